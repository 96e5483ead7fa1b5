package launcher

import (
	"sync"

	"golang.org/x/sys/unix"
)

// hugePages is what SmallPages changed: CMD is started with the setting
// ncclrun inherited, not with ncclrun's own.
var hugePages struct {
	sync.Mutex
	turnedOff bool
}

// SmallPages turns transparent huge pages off for ncclrun's own memory
// from now on (prctl PR_SET_THP_DISABLE), unless they are off already.
// On a node whose THP setting is "always", the kernel otherwise backs
// each 2 MiB of the Go heap that ncclrun touches with a huge page, and a
// few MiB of live heap become twice that in RSS. The setting is kept
// across fork and exec, so Run gives CMD back the one ncclrun started
// with (a training job may want huge pages for its tensors), and so does
// Exec. Call it first in main; an error (a kernel without the prctl)
// leaves the setting alone.
func SmallPages() {
	v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0)
	if err != nil || v != 0 {
		return
	}
	if unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0) == nil {
		hugePages.turnedOff = true
	}
}

// withInheritedPages runs start (a fork and exec, or an exec in place)
// with the huge-page setting ncclrun inherited. The setting belongs to
// the process, and a child started by vfork, as syscall.ForkExec does,
// takes the one in force at its exec: ncclrun's own new pages may be
// huge only for that moment.
func withInheritedPages(start func()) {
	hugePages.Lock()
	defer hugePages.Unlock()
	if !hugePages.turnedOff {
		start()
		return
	}
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 0, 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
	start()
}
