// Package fakenccl is a workload that plays NCCL so ncclrun can be shown and
// tested without GPUs or InfiniBand: it pins memory as NCCL's ibv_reg_mr
// does (through internal/pin, so the kernel's real RLIMIT_MEMLOCK and
// CAP_IPC_LOCK rules decide), optionally creates an NCCL shared-memory
// segment in /dev/shm, and prints NCCL's real log lines and PyTorch's real
// error surface for the NCCL version it impersonates.
//
// It is a test and demonstration tool, not a benchmark: nothing is sent
// between ranks. Use a real NCCL test (nccl-tests' all_reduce_perf) to
// measure a fabric.
package fakenccl

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclrun/ncclrun/internal/pin"
	"github.com/ncclrun/ncclrun/internal/units"
)

// Exit statuses of Main.
const (
	ExitOK    = 0 // every rank initialised
	ExitNCCL  = 1 // a rank failed as NCCL would (PyTorch's DistBackendError)
	ExitUsage = 2 // bad flags
)

// DefaultPin is what each rank pins unless --pin says otherwise: 16 MiB,
// more than both memlock limits seen failing in the field (Docker's 64 KiB
// and the 8 MiB kernel/systemd default) and far less than one real NCCL
// rank registers, so the default run fails exactly where real NCCL fails
// and passes where it passes, without pinning much of a laptop's RAM.
const DefaultPin int64 = 16 << 20

// DefaultVersion is the NCCL version impersonated unless --nccl-version
// says otherwise (the one PyTorch 2.4-2.5 wheels ship).
const DefaultVersion = "2.21.5"

// Environment variables through which a parent hands a child process its
// rank. When they are absent, torchrun's RANK and WORLD_SIZE are used, so
// `torchrun --nproc-per-node 2 ncclrun fake-nccl` plays two ranks too.
const (
	EnvRank   = "FAKENCCL_RANK"
	EnvNRanks = "FAKENCCL_NRANKS"
)

type options struct {
	ranks       int
	pin         int64
	shm         int64
	shmDir      string
	version     version
	toStderr    bool
	rankPrefix  bool
	versionText string
	net         string // "ib" or "socket"
	hold        bool
}

// Main runs the workload with args (the flags after `fake-nccl`, without a
// program name) and returns its exit status: ExitOK, ExitNCCL or ExitUsage,
// or 128+N when a rank was killed by signal N.
//
// With --ranks N > 1 Main starts N separate processes, so every rank has its
// own pid in NCCL's host:pid:tid prefix. Each is the running executable
// started again with the same os.Args and EnvRank/EnvNRanks set, so Main
// must be reached again that way (it is for `ncclrun fake-nccl ...` and
// for a test binary that dispatches on an environment variable in
// TestMain). The children write straight to stdout and stderr when those
// are files, as torchrun's workers do.
//
// NCCL's lines go to stdout (NCCL's default) or, with --stderr, to stderr;
// NCCL_DEBUG decides which are printed exactly as NCCL does: nothing when
// unset, WARN for WARN, and INFO for INFO, ABORT and TRACE.
func Main(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	rank, nranks, isRank := rankFromEnv()
	if isRank {
		return runRank(opts, rank, nranks, stdout, stderr)
	}
	if opts.ranks <= 1 {
		return runRank(opts, 0, 1, stdout, stderr)
	}
	return spawnRanks(opts.ranks, stdout, stderr)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("fake-nccl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var pinS, shmS string
	fs.IntVar(&o.ranks, "ranks", 1, "number of ranks, each a separate process")
	fs.StringVar(&pinS, "pin", units.FormatSize(DefaultPin), "memory each rank pins (mlock) as NCCL's ibv_reg_mr would")
	fs.StringVar(&shmS, "shm", "0", "size of the /dev/shm/nccl-XXXXXX segment each rank creates with fallocate (0: none)")
	fs.StringVar(&o.shmDir, "shm-dir", "/dev/shm", "directory of the shared memory segments")
	fs.StringVar(&o.versionText, "nccl-version", DefaultVersion, "NCCL version whose message formats are printed")
	fs.BoolVar(&o.toStderr, "stderr", false, "print NCCL's lines to stderr instead of stdout")
	stdoutFlag := fs.Bool("stdout", false, "print NCCL's lines to stdout (the default, as NCCL does)")
	fs.BoolVar(&o.rankPrefix, "rank-prefix", true, "prefix PyTorch's error lines with [rankN]: as torch >= 2.2 does")
	fs.StringVar(&o.net, "net", "ib", "transport NCCL reports: ib, or socket (NET/IB finds no device and NCCL falls back to TCP sockets)")
	fs.BoolVar(&o.hold, "hold", false, "after a successful init, keep running as a training job does until a terminating signal, then exit 128+N")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "fake-nccl: %v\n", err)
		return o, err
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	if *stdoutFlag && o.toStderr {
		return bad("--stdout and --stderr are exclusive")
	}
	if o.net != "ib" && o.net != "socket" {
		return bad("--net %q: want ib or socket", o.net)
	}
	if o.ranks < 1 || o.ranks > 1024 {
		return bad("--ranks %d: want 1..1024", o.ranks)
	}
	var err error
	if o.pin, err = units.ParseSize(pinS); err != nil || o.pin < 0 {
		return bad("--pin: %v", orErr(err, "unlimited is not a size"))
	}
	if o.shm, err = units.ParseSize(shmS); err != nil || o.shm < 0 {
		return bad("--shm: %v", orErr(err, "unlimited is not a size"))
	}
	if o.version, err = parseVersion(o.versionText); err != nil {
		return bad("--nccl-version: %v", err)
	}
	return o, nil
}

func orErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

func rankFromEnv() (rank, nranks int, ok bool) {
	for _, names := range [][2]string{{EnvRank, EnvNRanks}, {"RANK", "WORLD_SIZE"}} {
		r, err1 := strconv.Atoi(os.Getenv(names[0]))
		n, err2 := strconv.Atoi(os.Getenv(names[1]))
		if err1 == nil && err2 == nil && r >= 0 && n > r {
			return r, n, true
		}
	}
	return 0, 1, false
}

// spawnRanks starts n copies of the running executable as ranks, forwards
// terminating signals to them and returns the status of the lowest failing
// rank (128+N for a signal), 0 when all passed.
func spawnRanks(n int, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "fake-nccl: find own executable: %v\n", err)
		return ExitNCCL
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	env := os.Environ()
	cmds := make([]*exec.Cmd, 0, n)
	for r := 0; r < n; r++ {
		c := exec.Command(self, os.Args[1:]...)
		c.Env = append(append([]string(nil), env...), fmt.Sprintf("%s=%d", EnvRank, r), fmt.Sprintf("%s=%d", EnvNRanks, n))
		c.Stdout, c.Stderr = stdout, stderr
		if err := c.Start(); err != nil {
			fmt.Fprintf(stderr, "fake-nccl: start rank %d: %v\n", r, err)
			for _, started := range cmds {
				_ = started.Process.Kill()
				_ = started.Wait()
			}
			return ExitNCCL
		}
		cmds = append(cmds, c)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				for _, c := range cmds {
					_ = c.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	status := ExitOK
	for _, c := range cmds {
		err := c.Wait()
		if st := exitStatus(c, err); st != 0 && status == ExitOK {
			status = st
		}
	}
	close(done)
	return status
}

func exitStatus(c *exec.Cmd, err error) int {
	if c.ProcessState == nil {
		return ExitNCCL
	}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := c.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	_ = err
	return ExitNCCL
}

// rankRun is one rank's state while it plays NCCL.
type rankRun struct {
	o            options
	rank, nranks int
	log          *logger
	stdout       io.Writer
	stderr       io.Writer
	iface        string
}

func runRank(o options, rank, nranks int, stdout, stderr io.Writer) int {
	ncclOut := stdout
	if o.toStderr {
		ncclOut = stderr
	}
	l := newLogger(ncclOut, o.version, rank%8)
	r := &rankRun{o: o, rank: rank, nranks: nranks, log: l, stdout: stdout, stderr: stderr, iface: bootstrapInterface()}
	return r.run()
}

func (r *rankRun) run() int {
	v, l := r.o.version, r.log
	if v.atLeast(2, 26, 0) {
		l.info(subInit, "Bootstrap: Using %s", r.iface)
	} else {
		l.info(subInit, "Bootstrap : Using %s", r.iface)
	}
	l.info(subInit, "cudaDriverVersion 12040")
	if r.rank == 0 {
		l.version("NCCL version %s+cuda12.4", v)
	}
	if v.atLeast(2, 23, 0) && !v.atLeast(2, 30, 0) {
		l.info(subInit|subNet, "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.")
	}
	if r.o.net == "socket" {
		l.info(subInit|subNet, "NET/IB : No device found.")
		l.info(subInit|subNet, "NET/Socket : Using [0]%s", r.iface)
		l.info(subInit|subNet, "Using network Socket")
	} else {
		l.info(subInit|subNet, "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB %s", r.iface)
		l.info(subInit|subNet, "Using network IB")
	}
	comm := 0x55d0c0000000 + rand.Uint64N(0xfffffff)&^0xf
	commID := rand.Uint64()
	busID := busIDs[r.rank%len(busIDs)]
	dev := r.rank % 8
	initName := "ncclCommInitRank"
	if v.atLeast(2, 20, 0) {
		initName = "ncclCommInitRankConfig"
	}
	l.info(subInit, "%s comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId 0x%x - Init START",
		initName, comm, r.rank, r.nranks, dev, dev, busID, commID)

	var err error
	if r.o.pin > 0 {
		var release func()
		if release, err = pin.Pin(r.o.pin); err == nil {
			defer release()
		}
	}
	if r.o.pin > 0 && err != nil {
		return r.failRegistration(err)
	}
	if r.o.shm > 0 {
		if code, ok := r.createShm(); !ok {
			return code
		}
	}
	if r.nranks > 1 {
		ring := make([]string, r.nranks)
		for i := range ring {
			ring[i] = strconv.Itoa(i)
		}
		l.info(subInit, "Channel 00/02 :    %s", strings.Join(ring, "   "))
		l.info(subInit, "Channel 01/02 :    %s", strings.Join(ring, "   "))
	}
	l.info(subInit, "Connected all rings")
	l.info(subInit, "%s comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId 0x%x - Init COMPLETE",
		initName, comm, r.rank, r.nranks, dev, dev, busID, commID)
	if r.rank == 0 {
		fmt.Fprintf(r.stdout, "fake-nccl: all-reduce OK on %d ranks (%s pinned per rank, NCCL %s)\n",
			r.nranks, units.FormatSize(r.o.pin), v)
	}
	if r.o.hold {
		return r.holdUntilSignal()
	}
	return ExitOK
}

// holdUntilSignal plays a job that trains until it is stopped: it waits
// for a terminating signal, says which one came, and returns 128+N as a
// process killed by it would report.
func (r *rankRun) holdUntilSignal() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	fmt.Fprintf(r.stdout, "fake-nccl: rank %d training until a terminating signal\n", r.rank)
	sig := (<-sigs).(syscall.Signal)
	fmt.Fprintf(r.stdout, "fake-nccl: rank %d stopped by %v\n", r.rank, sig)
	return 128 + int(sig)
}

var busIDs = []string{"18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"}

// failRegistration prints what NCCL and PyTorch print when ibv_reg_mr fails
// with err's errno, and returns ExitNCCL.
func (r *rankRun) failRegistration(err error) int {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.ENOMEM
	}
	v := r.o.version
	loc := regMrLocation(v)
	msg := "Call to " + loc.call + " failed"
	if v.atLeast(2, 13, 0) {
		msg += " with error " + strerror(errno)
	}
	r.log.warn(loc.file, loc.line, loc.fn, msg)
	for _, f := range regMrChain(v) {
		r.log.info(subAll, "%s -> 2", f)
	}
	r.torchError(msg)
	return ExitNCCL
}

// torchError prints PyTorch's DistBackendError for ncclSystemError with
// lastErr as NCCL's last error text.
func (r *rankRun) torchError(lastErr string) {
	v := r.o.version
	str := "unhandled system error"
	if v.atLeast(2, 18, 0) {
		str += " (run with NCCL_DEBUG=INFO for details)"
	}
	lines := []string{
		fmt.Sprintf("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, %s, NCCL version %s", str, v),
	}
	if v.atLeast(2, 13, 0) {
		lines = append(lines,
			"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
			"Last error:",
			lastErr)
	} else {
		lines = append(lines, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. It can be also caused by unexpected exit of a remote peer.")
	}
	var b strings.Builder
	for _, s := range lines {
		if r.o.rankPrefix {
			fmt.Fprintf(&b, "[rank%d]: ", r.rank)
		}
		b.WriteString(s)
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(r.stderr, b.String())
}

// createShm creates and extends an NCCL shared-memory segment; on failure
// it prints NCCL's lines and PyTorch's error and returns (ExitNCCL, false).
// The segment is removed before it returns: nothing is left in /dev/shm.
func (r *rankRun) createShm() (int, bool) {
	v := r.o.version
	path, f, err := createSegment(r.o.shmDir)
	if err != nil {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EIO
		}
		loc := shmLocation(v, "create")
		msg := fmt.Sprintf("Error: failed to create shared memory file %s, error %s (%d)", path, strerror(errno), int(errno))
		r.log.warn(loc.file, loc.line, loc.fn, msg)
		r.log.info(subAll, "transport/shm.cc:493 -> 2")
		r.torchError(msg)
		return ExitNCCL, false
	}
	defer func() {
		f.Close()
		os.Remove(path)
	}()
	real := r.o.shm + 4 // NCCL's segment carries a reference count after the data
	if err := fallocate(f, real); err != nil {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EIO
		}
		ext := fmt.Sprintf("Error: failed to extend %s to %d bytes", path, real)
		seg := fmt.Sprintf("Error while creating shared memory segment %s (size %d)", path, r.o.shm)
		if v.atLeast(2, 22, 0) {
			ext += fmt.Sprintf(", error: %s (%d)", strerror(errno), int(errno))
			seg += fmt.Sprintf(", error: %s (%d)", strerror(errno), int(errno))
		}
		le, ls := shmLocation(v, "extend"), shmLocation(v, "segment")
		r.log.warn(le.file, le.line, le.fn, ext)
		r.log.warn(ls.file, ls.line, ls.fn, seg)
		r.log.info(subAll, "transport/shm.cc:551 -> 2")
		r.log.info(subAll, "transport/shm.cc:493 -> 2")
		r.torchError(seg)
		return ExitNCCL, false
	}
	return ExitOK, true
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// createSegment creates dir/nccl-XXXXXX as mkstemp(3) does.
func createSegment(dir string) (string, *os.File, error) {
	var path string
	for range 100 {
		b := make([]byte, 6)
		for i := range b {
			b[i] = alnum[rand.IntN(len(alnum))]
		}
		path = strings.TrimSuffix(dir, "/") + "/nccl-" + string(b)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return path, nil, fmt.Errorf("create %q: %w", path, err)
		}
		return path, f, nil
	}
	return path, nil, fmt.Errorf("create %q: %w", path, syscall.EEXIST)
}

// bootstrapInterface returns NCCL's "name:address<0>" for the first up,
// non-loopback interface with an IPv4 address (lo when there is none).
func bootstrapInterface() string {
	ifs, err := net.Interfaces()
	if err == nil {
		for _, it := range ifs {
			if it.Flags&net.FlagUp == 0 || it.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, _ := it.Addrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
					return fmt.Sprintf("%s:%s<0>", it.Name, ipn.IP)
				}
			}
		}
	}
	return "lo:127.0.0.1<0>"
}

// strerror returns glibc's strerror text for e ("Cannot allocate memory"):
// Go's table is glibc's with the first letter lowered.
func strerror(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// now is the clock of WARN timestamps; tests replace it.
var now = time.Now
