package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

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

// cmdProbeMlock is the child of doctor's --probe (pin.ProbeHere): exit 0
// when SIZE bytes could be pinned with mlock(2), 1 with the reason on
// stderr when not.
func cmdProbeMlock(c *cli.Context, e *env) error {
	if c.NArg() != 1 {
		return usagef("probe-mlock takes one SIZE")
	}
	size, err := units.ParseSize(c.Args().First())
	if err != nil || size <= 0 {
		return usagef("probe-mlock: bad size %q", c.Args().First())
	}
	if err := pin.ProbeHere(size, c.Bool("ambient")); err != nil {
		// err already says "mlock 16 MiB: ...": say it once.
		fprintf(e.stderr, "ncclrun: %v\n", err)
		return exitWith(1)
	}
	return nil
}
