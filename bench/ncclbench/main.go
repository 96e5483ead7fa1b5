// Command ncclbench is the helper of scripts/bench.sh, the whole-process
// comparison of `ncclrun` with what users would run instead (a plain `cat`
// relay, a static Go program, `grep -c`). It generates realistic NCCL
// output, plays 64 ranks writing into one pipe, times commands and
// measures how long a partial line takes to get through a supervisor. It
// is not part of ncclrun.
//
//	ncclbench gen -size 256MiB -o FILE        NCCL INFO lines, exactly SIZE bytes
//	ncclbench mixed -size 256MiB -warn-every 100 [-procs N] -o FILE  INFO lines with WARN lines
//	ncclbench pace -rate 200MiB FILE          FILE on stdout at RATE bytes/s
//	ncclbench exitlat -n 5 -- CMD... ncclbench catstamp FILE  child's end to CMD's exit
//	ncclbench longline -size 256MiB           SIZE bytes on stdout, no newline
//	ncclbench ranks -n 64 -size 256MiB        n rank processes, one write(2) per line
//	ncclbench time -n 5 [-warmup 1] [-pipe] -- CMD... median wall and CPU time of CMD (stdio: /dev/null, or stdout a pipe)
//	ncclbench latency -n 500 -- CMD...        partial-line round trips through CMD
//	ncclbench echo-partial                    the child of latency
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"time"

	"github.com/ncclrun/ncclrun/internal/units"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ncclbench gen|mixed|pace|catstamp|exitlat|longline|ranks|rank|time|latency|echo-partial [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "gen":
		err = cmdGen(args)
	case "mixed":
		err = cmdMixed(args)
	case "pace":
		err = cmdPace(args)
	case "catstamp":
		err = cmdCatStamp(args)
	case "exitlat":
		err = cmdExitLat(args)
	case "longline":
		err = cmdLongLine(args)
	case "ranks":
		err = cmdRanks(args)
	case "rank":
		err = cmdRank(args)
	case "time":
		err = cmdTime(args)
	case "latency":
		err = cmdLatency(args)
	case "echo-partial":
		err = echoPartial(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ncclbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// sizeFlag is a flag.Value taking units.ParseSize sizes.
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }
func (s *sizeFlag) Set(v string) error {
	n, err := units.ParseSize(v)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("size %q: must be finite", v)
	}
	*s = sizeFlag(n)
	return nil
}

func cmdGen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	size := sizeFlag(256 << 20)
	fs.Var(&size, "size", "bytes to write")
	out := fs.String("o", "", "output file (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("create %q: %w", *out, err)
		}
		defer f.Close()
		w = f
	}
	if err := Generate(w, int64(size)); err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && *out != "" {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close %q: %w", *out, err)
		}
	}
	return nil
}

func cmdLongLine(args []string) error {
	fs := flag.NewFlagSet("longline", flag.ContinueOnError)
	size := sizeFlag(256 << 20)
	fs.Var(&size, "size", "bytes to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return LongLine(os.Stdout, int64(size))
}

func cmdRanks(args []string) error {
	fs := flag.NewFlagSet("ranks", flag.ContinueOnError)
	n := fs.Int("n", 64, "rank processes")
	size := sizeFlag(256 << 20)
	fs.Var(&size, "size", "bytes all ranks write together")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("-n %d: want at least 1", *n)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find myself: %w", err)
	}
	per := int64(size) / int64(*n)
	cmds := make([]*exec.Cmd, *n)
	for i := range cmds {
		c := exec.Command(self, "rank", "-id", strconv.Itoa(i), "-n", strconv.Itoa(*n), "-size", strconv.FormatInt(per, 10))
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			return fmt.Errorf("start rank %d: %w", i, err)
		}
		cmds[i] = c
	}
	var errs []error
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func cmdRank(args []string) error {
	fs := flag.NewFlagSet("rank", flag.ContinueOnError)
	id := fs.Int("id", 0, "rank")
	n := fs.Int("n", 64, "ranks in the job")
	size := sizeFlag(4 << 20)
	fs.Var(&size, "size", "bytes this rank writes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return WriteRank(os.Stdout, *id, *n, int64(size))
}

func cmdTime(args []string) error {
	fs := flag.NewFlagSet("time", flag.ContinueOnError)
	n := fs.Int("n", 5, "measured runs")
	warm := fs.Int("warmup", 1, "unmeasured runs first")
	showErr := fs.Bool("stderr", false, "pass the command's stderr through (default: discard it)")
	toPipe := fs.Bool("pipe", false, "stdout on a pipe this process drains (default: /dev/null)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 || *n < 1 {
		return errors.New("usage: time -n N [-warmup W] -- CMD [ARGS...]")
	}
	var ds, cpu []time.Duration
	for i := 0; i < *warm+*n; i++ {
		c := exec.Command(argv[0], argv[1:]...)
		if *showErr {
			c.Stderr = os.Stderr
		}
		if *toPipe {
			c.Stdout = io.Discard // exec drains it through a pipe
		}
		start := time.Now()
		if err := c.Run(); err != nil {
			return fmt.Errorf("%q: %w", argv, err)
		}
		if i >= *warm {
			ds = append(ds, time.Since(start))
			// The child's user and system time, with those of the
			// descendants it waited for (a shell pipeline's processes).
			cpu = append(cpu, c.ProcessState.UserTime()+c.ProcessState.SystemTime())
		}
	}
	s := Summarize(ds)
	fmt.Printf("median_ms=%.3f min_ms=%.3f max_ms=%.3f runs=%d cpu_ms=%.3f\n", ms(s.Median), ms(s.Min), ms(s.Max), len(ds), ms(Summarize(cpu).Median))
	return nil
}

func cmdLatency(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	n := fs.Int("n", 500, "round trips")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 || *n < 1 {
		return errors.New("usage: latency -n N -- CMD [ARGS...] (CMD ends in `ncclbench echo-partial`)")
	}
	ds, err := Latency(argv, *n)
	if err != nil {
		return err
	}
	s := Summarize(ds)
	fmt.Printf("median_us=%.1f p99_us=%.1f max_us=%.1f samples=%d\n", us(s.Median), us(s.P99), us(s.Max), len(ds))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Stats summarises durations.
type Stats struct {
	Min, Median, P99, Max time.Duration
}

// Summarize returns the order statistics of ds (the zero Stats for none);
// the median of an even count is the mean of the middle two. ds is not
// modified.
func Summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	p := (len(s)*99 + 99) / 100 // ceil(0.99 n), 1-based
	return Stats{Min: s[0], Median: med, P99: s[p-1], Max: s[len(s)-1]}
}
