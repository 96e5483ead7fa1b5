package hang

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ncclrun/ncclrun/internal/safefile"
)

// Python stacks: PYTHONFAULTHANDLER=1 (set by the caller in the job's
// environment) makes every Python process print all its threads' stacks
// to its stderr when it dies of SIGABRT, as PyTorch's watchdog kills a
// timed-out rank. While the processes still live, py-spy (where installed
// and permitted: it attaches with ptrace, so it needs CAP_SYS_PTRACE or a
// Yama ptrace_scope of 0) dumps them without stopping them.

// maxStack bounds one process's py-spy output kept.
const maxStack = 1 << 20

// Stack is one process's Python stacks as py-spy printed them, in File
// under the evidence directory, or why there are none.
type Stack struct {
	PID   int    `json:"pid"`
	File  string `json:"file,omitempty"`
	Error string `json:"error,omitempty"`
}

// PySpy dumps the Python stacks of pids with the py-spy at path
// (`py-spy dump --nonblocking --pid P`), all at once, each into
// dir/stacks-<pid>.txt, until ctx is done. A process that is not Python
// ends in a Stack with py-spy's own error.
func PySpy(ctx context.Context, path, dir string, pids []int) []Stack {
	out := make([]Stack, len(pids))
	var wg sync.WaitGroup
	for i, pid := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = pySpyOne(ctx, path, dir, pid)
		}()
	}
	wg.Wait()
	return out
}

func pySpyOne(ctx context.Context, path, dir string, pid int) Stack {
	st := Stack{PID: pid}
	cmd := exec.CommandContext(ctx, path, "dump", "--nonblocking", "--pid", strconv.Itoa(pid))
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{w: &b, n: maxStack}, &limited{w: &b, n: maxStack}
	cmd.WaitDelay = 100 * time.Millisecond // a killed py-spy's pipes are not waited for
	err := cmd.Run()
	if err != nil {
		msg := bytes.TrimSpace(b.Bytes())
		if len(msg) > 300 {
			msg = msg[:300]
		}
		st.Error = fmt.Sprintf("py-spy: %v: %s", err, msg)
		return st
	}
	f := filepath.Join(dir, fmt.Sprintf("stacks-%d.txt", pid))
	if err := safefile.WriteFile(f, b.Bytes(), 0o644); err != nil {
		st.Error = err.Error()
		return st
	}
	st.File = f
	return st
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if k := min(len(p), l.n-l.w.Len()); k > 0 {
		l.w.Write(p[:k])
	}
	return len(p), nil
}

// Descendants are the processes whose parent chain leads to pid, read
// from procRoot ("/proc" on the live system), sorted.
func Descendants(procRoot string, pid int) []int {
	des, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(filepath.Join(procRoot, de.Name(), "stat")); ok {
			kids[pp] = append(kids[pp], p)
		}
	}
	var out []int
	seen := map[int]bool{pid: true}
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range kids[queue[0]] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	sort.Ints(out)
	return out
}

// parentOf reads the PPid from /proc/<pid>/stat: the fourth field, after
// the command name in parentheses, which may itself hold ") ".
func parentOf(stat string) (int, bool) {
	f, err := os.Open(stat)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b := make([]byte, 1024)
	n, _ := f.Read(b)
	b = b[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fs := bytes.Fields(b[i+1:])
	if len(fs) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(fs[1]))
	return pp, err == nil
}
