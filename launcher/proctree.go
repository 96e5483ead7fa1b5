package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	PID, PPID int
	State     byte // 'R', 'S', 'D', 'Z', ...
}

// parseStat parses the start of /proc/PID/stat (proc(5)): "pid (comm)
// state ppid ...". comm may hold spaces and parentheses, so the fields
// after it are found from the last ')'.
func parseStat(b []byte) (proc, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return proc{}, fmt.Errorf("parse stat %q: no (comm)", b)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return proc{}, fmt.Errorf("parse stat pid: %w", err)
	}
	f := bytes.Fields(b[closing+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return proc{}, fmt.Errorf("parse stat %q: short", b)
	}
	if st := f[0][0]; (st < 'A' || st > 'Z') && (st < 'a' || st > 'z') {
		// proc(5): the state is one letter (R, S, D, Z, T, t, X, I, ...)
		return proc{}, fmt.Errorf("parse stat %q: state %q is not a letter", b, st)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return proc{}, fmt.Errorf("parse stat ppid: %w", err)
	}
	return proc{PID: pid, PPID: ppid, State: f[0][0]}, nil
}

// processTable reads every /proc/PID/stat under procRoot. A process that
// vanishes while being read is skipped.
func processTable(procRoot string) ([]proc, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", procRoot, err)
	}
	var ps []proc
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := readSmall(filepath.Join(procRoot, e.Name(), "stat"))
		if err != nil {
			continue
		}
		p, err := parseStat(b)
		if err != nil {
			continue
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// descendants returns every process whose PPid chain leads to pid, sorted
// by pid. Orphans that were reparented to pid (a subreaper or PID 1) are
// its children, so they count.
func descendants(procRoot string, pid int) ([]proc, error) {
	ps, err := processTable(procRoot)
	if err != nil {
		return nil, err
	}
	kids := map[int][]proc{}
	for _, p := range ps {
		kids[p.PPID] = append(kids[p.PPID], p)
	}
	var out []proc
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, c := range kids[q] {
			if seen[c.PID] {
				continue
			}
			seen[c.PID] = true
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// readSmall reads a small procfs/sysfs file with one bounded read.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	return b[:n], nil
}
