package launcher

// The types cmd/ncclrun gives Run and RaiseMemlock and gets back from
// them: the child's Config, the Tap that sees its output, the Result.

import (
	"io"
	"syscall"
	"time"

	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// Stream names one of the child's output streams.
type Stream int

// The child's output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// Tap receives a copy of the child's output for diagnosis, whole lines
// at a time. The launcher calls it from goroutines of its own, behind a
// bounded queue, so that a slow Tap never slows the relay nor the child:
// while the Tap is behind the output, the lines no diagnosis needs may be
// shed, by Lines itself or, when the queue is full, by the relay (Shed);
// when even the other lines do not fit in the queue's bounds they are
// lost and counted (Result.TapLost).
type Tap interface {
	// Lines takes lines of stream s, each ending in a newline (a last
	// line without one is given one), each at most MaxLine bytes before
	// its newline (a longer line is cut to what a terminal shows of it,
	// the text from its last '\r', in the tap's copy only). When
	// behind is true the Tap is behind the output: Lines may skip the
	// lines Shed would drop instead of diagnosing them, and returns how
	// many it skipped. It is called from one goroutine at a time and must
	// not retain p.
	Lines(s Stream, p []byte, behind bool) (shed int)
	// Shed moves the lines of p (whole lines, each ending in a newline)
	// that a diagnosis needs to the front of p, in place, and returns
	// them with the number of lines it dropped: the relay keeps or counts
	// what a full queue cannot take. It is called from several goroutines
	// at once, on the relay's path, and must cost about one scan of p.
	Shed(p []byte) (kept []byte, shed int)
}

// MaxLine is the longest line handed to Tap.Lines.
const MaxLine = 64 << 10

// Config describes one child. The zero value of each field means "as
// ncclrun itself is" (its stdio, its environment, its credentials).
type Config struct {
	// Path is the command as given (looked up in PATH like exec.LookPath);
	// Args are its arguments without the command itself.
	Path string
	Args []string
	// Env is the complete environment of the child; nil inherits Environ() (os.Environ() as the kernel gave it).
	Env []string

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Tap, when set, gets a copy of the child's output (see Tap).
	Tap Tap

	// User, when set, runs the child as this user (ResolveUser) with
	// exactly its supplementary groups; nil runs it as ncclrun's user.
	User *User
	// AmbientIPCLock starts the child with CAP_IPC_LOCK in its ambient set
	// (ncclrun must hold it in its permitted set).
	AmbientIPCLock bool
	// DropCaps removes these capabilities (names like "IPC_LOCK" or
	// "CAP_IPC_LOCK") from every set of the child, bounding included.
	DropCaps []string
	// Memlock, when non-nil, sets the child's RLIMIT_MEMLOCK.
	Memlock *rlimit.Limit

	// KillAfter is how long after forwarding a terminating signal the
	// whole remaining process tree, the main child included, is killed.
	// 0 leaves the main child its own shutdown (torchrun's SIGTERM ->
	// SIGKILL escalation of its workers takes 30 s, mpirun has its own):
	// the main child is never killed, and descendants still alive when it
	// has exited get DefaultKillAfter from then before SIGKILL.
	KillAfter time.Duration

	// OnOutputError, when set, is called once per stream with the first
	// error writing the child's output to Stdout or Stderr (EPIPE when
	// the reader went away). From then on that stream is read and
	// discarded, so the child keeps running; the tap still sees it. It is
	// called from the stream's relay goroutine.
	OnOutputError func(s Stream, err error)

	// OnExit, when set, is told once that the main child has exited and
	// was reaped, before the rest of its output is drained and its
	// descendants reaped. It is called from Run's own goroutine and must
	// not block.
	OnExit func()

	// NoPTY gives the child plain pipes even when ncclrun's stdout or
	// stderr is a terminal (by default the child then gets a pseudo
	// terminal for that stream, so it behaves as on a terminal).
	NoPTY bool

	// Stop, when set, stops the child once it is closed, as a SIGTERM to
	// ncclrun would: the checkpoint step first (CheckpointSignal), then
	// SIGTERM forwarded and KillAfter; nothing when a terminating signal
	// was handled already. Nil: only signals stop the child.
	Stop <-chan struct{}
	// CheckpointSignal, with StopGrace above 0, is sent to the training
	// processes (CheckpointTo) on the first terminating signal; that
	// signal is forwarded StopGrace later, or as soon as they have all
	// exited (grace.go). 0 or a StopGrace of 0: the terminating signal is
	// forwarded at once.
	CheckpointSignal syscall.Signal
	StopGrace        time.Duration
	// CheckpointTo names the training processes; the zero value is the
	// main child.
	CheckpointTo Checkpoint
	// OnCheckpoint, when set, is told that the checkpoint step began on
	// terminating signal term, and how many training processes
	// CheckpointSignal reached (0: none, and term is forwarded at once).
	// It is called from Run's own goroutine.
	OnCheckpoint func(term syscall.Signal, reached int)
}

// DefaultKillAfter is how long descendants left by a main child that
// exited during a shutdown have (KillAfter 0) before they are killed.
const DefaultKillAfter = 30 * time.Second

// Result is how the child ended.
type Result struct {
	// ExitCode is the status ncclrun exits with: the child's code, or
	// 128+N when signal N killed it.
	ExitCode int
	// Signal is the signal that killed the child, 0 if it exited.
	Signal syscall.Signal
	// TapShed counts the lines shed (Config.Tap.Shed, or Lines while
	// behind) because the Tap was behind the output.
	TapShed int64
	// TapLost counts the other lines that did not reach Config.Tap: more
	// of them came than the queue's bounds hold (about 3 MiB), or the
	// final drain's bounds passed (50 ms and 128 lines after the output
	// ended). 0 as long as the Tap keeps up with the lines that are not
	// noise.
	TapLost int64
}

// MemlockChange reports RaiseMemlock's work.
type MemlockChange struct {
	Before, After rlimit.Limit
	// Err is why the hard limit could not be raised (nil when it was, or
	// when it was unlimited already); raising soft to hard never fails.
	HardErr error
}
