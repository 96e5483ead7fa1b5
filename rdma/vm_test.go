//go:build rdma

package rdma

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// block is what one scenario printed: its parts (stdout, stderr, report,
// ...) and the exit status of its command.
type block struct {
	parts map[string]string
	rc    int
}

// vmRun is the outcome of the one boot this test binary makes.
type vmRun struct {
	blocks  map[string]block
	log     string // the serial console's path
	ncclrun string // the static binary put in the VM, for reading back on the host
	err     error
}

var (
	bootOnce sync.Once
	booted   vmRun
)

const marker = "@@@ "

// parseConsole splits the serial console into scenario blocks:
// "@@@ BEGIN name", "@@@ PART part" then the part's lines, "@@@ END name
// rc=N". Lines outside a block (kernel messages) are dropped; the console's
// CR LF line ends become LF.
func parseConsole(r io.Reader) (map[string]block, error) {
	out := map[string]block{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var name, part string
	var cur block
	var b strings.Builder
	flush := func() {
		if part != "" {
			cur.parts[part] = strings.TrimSuffix(b.String(), "\n")
		}
		b.Reset()
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		rest, isMarker := strings.CutPrefix(line, marker)
		switch {
		case isMarker && strings.HasPrefix(rest, "BEGIN "):
			name, part = strings.TrimPrefix(rest, "BEGIN "), ""
			cur = block{parts: map[string]string{}}
		case isMarker && strings.HasPrefix(rest, "PART ") && name != "":
			flush()
			part = strings.TrimPrefix(rest, "PART ")
		case isMarker && strings.HasPrefix(rest, "END ") && name != "":
			flush()
			f := strings.Fields(strings.TrimPrefix(rest, "END "))
			if len(f) != 2 || f[0] != name || !strings.HasPrefix(f[1], "rc=") {
				return nil, fmt.Errorf("malformed end of block %q: %q", name, line)
			}
			rc, err := strconv.Atoi(strings.TrimPrefix(f[1], "rc="))
			if err != nil {
				return nil, fmt.Errorf("block %q: %w", name, err)
			}
			cur.rc = rc
			out[name] = cur
			name, part = "", ""
		case name != "" && part != "":
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return out, sc.Err()
}

// vm boots the VM once for the whole test binary and returns its blocks.
// Where qemu or the tools that build the VM are missing it skips, or fails
// under CI=true.
func vm(t *testing.T) vmRun {
	t.Helper()
	for _, tool := range []string{"qemu-system-x86_64", "apt-get", "dpkg-deb", "depmod", "cpio", "go"} {
		testutil.RequireTool(t, tool)
	}
	bootOnce.Do(func() { booted = boot() })
	if booted.err != nil {
		t.Fatalf("Soft-RoCE VM: %v (console: %s)", booted.err, booted.log)
	}
	return booted
}

func boot() vmRun {
	dir, err := os.MkdirTemp("", "ncclrun-rdma-")
	if err != nil {
		return vmRun{err: err}
	}
	r := vmRun{log: filepath.Join(dir, "console.log"), ncclrun: filepath.Join(dir, "ncclrun")}
	if bin := os.Getenv("NCCLRUN_RDMA_BIN"); bin != "" {
		// A static ncclrun built elsewhere (another branch, a release).
		r.ncclrun = bin
		return run(r)
	}
	build := exec.Command("go", "build", "-trimpath", "-tags", "urfave_cli_no_docs", "-o", r.ncclrun, "./cmd/ncclrun")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		r.err = fmt.Errorf("build the static ncclrun: %v: %s", err, out)
		return r
	}
	return run(r)
}

// run boots the VM with r.ncclrun inside and parses its console.
func run(r vmRun) vmRun {
	run := exec.Command("scripts/rdma-vm.sh", "run", r.ncclrun, "rdma/testdata/scenarios.sh", r.log)
	run.Dir = ".."
	run.Stdout, run.Stderr = os.Stderr, os.Stderr
	if err := run.Run(); err != nil {
		r.err = fmt.Errorf("scripts/rdma-vm.sh run: %w", err)
		return r
	}
	f, err := os.Open(r.log)
	if err != nil {
		r.err = err
		return r
	}
	defer f.Close()
	r.blocks, r.err = parseConsole(f)
	if r.err == nil {
		if _, ok := r.blocks["dmesg"]; !ok {
			r.err = fmt.Errorf("the VM did not run its last scenario")
		}
	}
	return r
}

// get returns the named block, failing the test when the VM printed none.
func (r vmRun) get(t *testing.T, name string) block {
	t.Helper()
	b, ok := r.blocks[name]
	if !ok {
		t.Fatalf("no block %q on the console %s", name, r.log)
	}
	return b
}
