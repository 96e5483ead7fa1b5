package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// warnTexts are NCCL WARN messages of a failing job, cycled by GenerateMixed.
var warnTexts = []string{
	"misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-node-02<48730>",
	"transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<53412> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.1 remoteGidsfe80::1",
	"proxy.cc:1523 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
	"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
	"include/socket.h:409 NCCL WARN Net : Connection closed by remote peer 10.1.0.2<60210>",
}

// GenerateMixed writes exactly size bytes of NCCL lines to w: healthy INFO
// lines with one WARN line every warnEvery lines (1: WARN lines only), the
// WARN lines from procs distinct processes in turn (host and pid vary;
// procs <= 0: the job's 16 ranks). It returns the number of WARN lines and
// of all lines; the last line is shortened to fit and ends in a newline.
func GenerateMixed(w io.Writer, size int64, warnEvery, procs int) (warns, lines int64, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	g := newLineGen(1, 16, -1)
	var line []byte
	for left := size; left > 0; {
		if warnEvery > 0 && lines%int64(warnEvery) == int64(warnEvery)-1 {
			p := int(warns % int64(max(procs, 16)))
			host, pid := p/8, 31000+p%8
			if procs > 16 {
				host, pid = p/30000, 1000+p%30000
			}
			line = fmt.Appendf(line[:0], "gpu-node-%02d:%d:%d [%d] %s\n", host, pid, pid+97, p%8, warnTexts[warns%int64(len(warnTexts))])
			warns++
		} else {
			line = g.next(line[:0])
		}
		if int64(len(line)) > left {
			line = append(line[:left-1], '\n')
		}
		if _, err := bw.Write(line); err != nil {
			return warns, lines, fmt.Errorf("write: %w", err)
		}
		lines++
		left -= int64(len(line))
	}
	if err := bw.Flush(); err != nil {
		return warns, lines, fmt.Errorf("write: %w", err)
	}
	return warns, lines, nil
}

func cmdMixed(args []string) error {
	fs := flag.NewFlagSet("mixed", flag.ContinueOnError)
	size := sizeFlag(256 << 20)
	fs.Var(&size, "size", "bytes to write")
	every := fs.Int("warn-every", 100, "one WARN line every N lines (1: only WARN lines)")
	procs := fs.Int("procs", 0, "distinct processes the WARN lines come from (0: 16 ranks)")
	out := fs.String("o", "", "output file (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *every < 1 {
		return errors.New("usage: mixed -size SIZE -warn-every N [-procs N] -o FILE")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	warns, lines, err := GenerateMixed(f, int64(size), *every, *procs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Printf("warn_lines=%d lines=%d\n", warns, lines)
	return nil
}

// cmdPace writes FILE to stdout at RATE bytes a second (64 KiB writes),
// as a training job's output arrives: steadily, not as fast as a pipe goes.
func cmdPace(args []string) error {
	fs := flag.NewFlagSet("pace", flag.ContinueOnError)
	rate := sizeFlag(200 << 20)
	fs.Var(&rate, "rate", "bytes per second")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || rate <= 0 {
		return errors.New("usage: pace -rate SIZE FILE")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	start := time.Now()
	var sent int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := os.Stdout.Write(buf[:n]); werr != nil {
				return werr
			}
			sent += int64(n)
			if ahead := time.Duration(float64(sent)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// monoNow is CLOCK_MONOTONIC, the same clock in every process.
func monoNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// stampEnv names the file catstamp writes its end time to.
const stampEnv = "NCCLBENCH_STAMP"

// cmdCatStamp copies FILE to stdout, then writes the monotonic time at
// which it finished to $NCCLBENCH_STAMP: the moment the child of exitlat
// is done, just before it exits.
func cmdCatStamp(args []string) error {
	if len(args) != 1 || os.Getenv(stampEnv) == "" {
		return errors.New("usage: NCCLBENCH_STAMP=FILE catstamp FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	if _, err := io.Copy(os.Stdout, f); err != nil {
		return err
	}
	f.Close()
	return os.WriteFile(os.Getenv(stampEnv), []byte(fmt.Sprint(int64(monoNow()))), 0o600)
}

// cmdExitLat runs CMD (whose last word is `ncclbench catstamp FILE`) n
// times with its output on /dev/null and prints the median time from the
// child's end to the supervisor's exit: how long a supervisor takes to
// exit after its child, what a final drain adds.
func cmdExitLat(args []string) error {
	fs := flag.NewFlagSet("exitlat", flag.ContinueOnError)
	n := fs.Int("n", 5, "runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 || *n < 1 {
		return errors.New("usage: exitlat -n N -- CMD... ncclbench catstamp FILE")
	}
	dir, err := os.MkdirTemp("", "exitlat")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stamp := dir + "/stamp"
	var ds []time.Duration
	for i := 0; i < *n; i++ {
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(os.Environ(), stampEnv+"="+stamp)
		if err := c.Run(); err != nil {
			return fmt.Errorf("%q: %w", argv, err)
		}
		end := monoNow()
		b, err := os.ReadFile(stamp)
		if err != nil {
			return fmt.Errorf("no stamp from the child: %w", err)
		}
		var t int64
		if _, err := fmt.Sscan(string(b), &t); err != nil {
			return fmt.Errorf("stamp %q: %w", b, err)
		}
		ds = append(ds, end-time.Duration(t))
	}
	s := Summarize(ds)
	fmt.Printf("median_ms=%.3f min_ms=%.3f max_ms=%.3f runs=%d\n", ms(s.Median), ms(s.Min), ms(s.Max), len(ds))
	return nil
}
