package launcher

// This file is the contract between launcher and cmd/ncclrun. Extend it
// (new fields, new functions); do not rename or remove what is here.

import (
	"io"
	"os"
	"syscall"
	"time"
)

// Stream names one of the child's output streams.
type Stream int

// The child's output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// LineFunc receives a copy of each complete line the child wrote (without
// the newline, at most MaxLine bytes; longer lines are cut and the rest is
// dropped from the tap only, never from the relay). It is called from one
// goroutine at a time and must not retain line.
type LineFunc func(s Stream, line []byte)

// MaxLine is the longest line handed to a LineFunc.
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
	// OnLine, when set, taps a copy of the child's output for diagnosis.
	OnLine LineFunc
	// Shed, when set, names the lines the tap may shed when OnLine falls
	// behind the output (noise: NCCL's per-channel INFO lines); every other
	// line still reaches OnLine, in order. Called from the relay and tap
	// goroutines at once (it must be safe for concurrent use), on a line
	// without its newline, and must be cheap: it runs on every line of a
	// burst. Nil: no line is noise.
	Shed func(line []byte) bool
	// ShedLines, when set with Shed, is Shed for a run of lines at once,
	// as the tap's goroutine sheds a burst: p is lines each ending in a
	// newline; it calls keep with each line (without its newline) that
	// Shed does not call noise, in order, and returns how many lines it
	// shed and their bytes, newlines included. It must agree with Shed
	// line by line (a line over MaxLine is judged whole, then cut).
	ShedLines func(p []byte, keep func(line []byte)) (lines, size int)
	// FeedLines, when set with Shed, takes the chunks of lines the tap
	// would otherwise hand to OnLine one at a time, except in the final
	// drain (there ShedLines and OnLine get them, within its bounds): p is
	// whole lines each ending in a newline, which FeedLines delivers
	// itself, as OnLine of each line would be; when shed is true (the tap
	// is behind the output) it may shed lines that Shed calls noise. It
	// returns how many lines it shed and their bytes, newlines included.
	// It is called on the tap's goroutine, as OnLine is. Why: a matcher
	// fed a chunk at once skips the lines that cannot change its result
	// with a vector scan, cheaper than a call and a filter a line
	// (diagnosis.Matcher.FeedChunk).
	FeedLines func(s Stream, p []byte, shed bool) (lines, size int)

	// User runs the child as this user ("name", "uid", "name:group",
	// "uid:gid") with the user's own supplementary groups only.
	User string
	// Credential, when non-nil, is User already resolved (ResolveUser), so
	// that ncclrun resolves a user once; nil means User is resolved here.
	Credential *Credential
	// AmbientIPCLock starts the child with CAP_IPC_LOCK in its ambient set
	// (ncclrun must hold it in its permitted set).
	AmbientIPCLock bool
	// DropCaps removes these capabilities (names like "IPC_LOCK" or
	// "CAP_IPC_LOCK") from every set of the child, bounding included.
	DropCaps []string
	// Memlock, when non-nil, sets the child's RLIMIT_MEMLOCK (soft, hard;
	// -1 = unlimited).
	Memlock *[2]int64

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

// Splicer is a Config.Stdout or Stderr that is not an *os.File but writes
// through to one (a filter that puts lines of its own between the
// child's): past the tap's share of a burst, the relay moves the child's
// output into that file with splice(2), as it does into an *os.File.
type Splicer interface {
	io.Writer
	// SpliceFile is the file Write writes to in the end, nil when there is
	// none (the relay then writes as usual).
	SpliceFile() *os.File
	// Spliced runs splice, which moves bytes into the file and returns how
	// many, while no Write runs. What it moved may end inside a line: the
	// relay's next Write (a read's worth, through the tap) follows it.
	Spliced(splice func() int)
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
	// TapDropped counts the output bytes that reached the relay but not
	// OnLine (the lines of TapShed and TapLost with their newlines). 0 when
	// OnLine kept up or is nil.
	TapDropped int64
	// TapShed counts the noise lines (Config.Shed) not passed to OnLine
	// because it fell behind the output.
	TapShed int64
	// TapLost counts the other lines not passed to OnLine: more lines
	// that are not noise arrived than the tap's bounds hold (about 2 MiB
	// queued under pressure; after the output ended, what the matcher does
	// not read in 5 ms beyond 128 lines). 0 as long as OnLine keeps up
	// with the lines that are not noise.
	TapLost int64
	// TapUnread counts the bytes of TapDropped that the tap did not read:
	// the part of a burst beyond its share (tapRate and tapShare in
	// relay.go: 256 MiB/s after the first 8 MiB, 30 % of the time after
	// 20 ms of work), which the relay moved past it.
	TapUnread int64
}

// MemlockChange reports RaiseMemlock's work.
type MemlockChange struct {
	Before, After [2]int64 // soft, hard; -1 = unlimited
	// Err is why the hard limit could not be raised (nil when it was, or
	// when it was unlimited already); raising soft to hard never fails.
	HardErr error
}
