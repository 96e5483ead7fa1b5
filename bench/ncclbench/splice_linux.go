package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// cmdSplice relays stdin to stdout with splice(2) through 1 MiB pipes (both
// must be pipes): the fastest relay there is, the reference for ncclrun's.
func cmdSplice([]string) error {
	for _, fd := range []int{0, 1} {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, 1<<20)
	}
	for {
		n, err := unix.Splice(0, nil, 1, nil, 1<<20, unix.SPLICE_F_MOVE)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("splice: %w (stdin and stdout must be pipes)", err)
		}
		if n == 0 {
			return nil
		}
	}
}
