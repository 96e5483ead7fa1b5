// Command capprobe shows what a container runtime gave a process, without
// ncclrun: it prints one JSON object with its uid/gid, the five capability
// sets, NoNewPrivs, RLIMIT_MEMLOCK and the outcome of mlock(2) of --mlock
// bytes. It is built static by the integration suite and copied into images.
//
// Other modes serve the PID 1 tests:
//
//	capprobe term-exit N   print "ready", exit N on SIGTERM
//	capprobe ignore-term   print "ready", ignore SIGTERM, block forever
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Report is what capprobe prints.
type Report struct {
	UID         int               `json:"uid"`
	GID         int               `json:"gid"`
	Caps        map[string]string `json:"caps"`     // CapInh.. as hex, from /proc/self/status
	IPCLock     map[string]bool   `json:"ipc_lock"` // per set
	NoNewPrivs  int               `json:"no_new_privs"`
	MemlockSoft int64             `json:"memlock_soft"` // -1 unlimited
	MemlockHard int64             `json:"memlock_hard"`
	MlockBytes  int64             `json:"mlock_bytes,omitempty"`
	MlockOK     bool              `json:"mlock_ok"`
	MlockErr    string            `json:"mlock_err,omitempty"`
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "term-exit":
			code, _ := strconv.Atoi(os.Args[2])
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, syscall.SIGTERM)
			fmt.Println("ready")
			<-ch
			fmt.Println("capprobe: got SIGTERM")
			os.Exit(code)
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
			fmt.Println("ready")
			for { // block; a bare select{} would die as a deadlock
				time.Sleep(time.Hour)
			}
		}
	}
	var size int64
	for i := 1; i < len(os.Args); i++ {
		if os.Args[i] == "--mlock" && i+1 < len(os.Args) {
			n, err := strconv.ParseInt(os.Args[i+1], 10, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, "capprobe: --mlock wants bytes:", err)
				os.Exit(2)
			}
			size = n
			i++
		}
	}
	r := Report{UID: os.Getuid(), GID: os.Getgid(), Caps: map[string]string{}, IPCLock: map[string]bool{}}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "capprobe:", err)
		os.Exit(1)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			r.Caps[k] = v
			n, _ := strconv.ParseUint(v, 16, 64)
			r.IPCLock[k] = n&(1<<unix.CAP_IPC_LOCK) != 0
		case "NoNewPrivs":
			r.NoNewPrivs, _ = strconv.Atoi(v)
		}
	}
	f.Close()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil {
		r.MemlockSoft, r.MemlockHard = lim(rl.Cur), lim(rl.Max)
	}
	if size > 0 {
		r.MlockBytes = size
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err == nil {
			err = unix.Mlock(b)
			if err == nil {
				r.MlockOK = true
				_ = unix.Munlock(b)
			}
			_ = unix.Munmap(b)
		}
		if err != nil {
			r.MlockErr = err.Error()
		}
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func lim(v uint64) int64 {
	if v == unix.RLIM_INFINITY {
		return -1
	}
	return int64(v)
}
