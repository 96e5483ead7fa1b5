package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/demo"
	"github.com/ncclrun/ncclrun/internal/fakenccl"
	"github.com/ncclrun/ncclrun/internal/pin"
	"github.com/ncclrun/ncclrun/internal/units"
)

func cmdDemo(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return usagef("demo takes no arguments")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ncclrun's own binary: %w", err)
	}
	return exitWith(demo.Run(self, e.stdout, e.stderr))
}

func cmdFakeNCCL(c *cli.Context, e *env) error {
	return exitWith(fakenccl.Main(c.Args().Slice(), e.stdout, e.stderr))
}

// cmdProbeMlock pins SIZE bytes with mlock(2): exit 0 when it held, 1 with
// the reason on stderr when not. With --ambient it first raises
// CAP_IPC_LOCK from permitted to effective, which is what CMD's ambient set
// gives it (the probe is ncclrun itself, whose file capabilities, if any,
// replace the ambient set on exec).
func cmdProbeMlock(c *cli.Context, e *env) error {
	if c.NArg() != 1 {
		return usagef("probe-mlock takes one SIZE")
	}
	size, err := units.ParseSize(c.Args().First())
	if err != nil || size <= 0 {
		return usagef("probe-mlock: bad size %q", c.Args().First())
	}
	runtime.LockOSThread() // capabilities are per thread; pin on this one
	if c.Bool("ambient") {
		// Best effort: the probe then reports what mlock says.
		_, _ = caps.Raise(caps.IPCLock)
	}
	release, err := pin.Pin(size)
	if err != nil {
		// err already says "mlock 16 MiB: ...": say it once.
		fprintf(e.stderr, "ncclrun: %v\n", err)
		return exitWith(1)
	}
	release()
	return nil
}
