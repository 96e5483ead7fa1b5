package rlimit

import (
	"errors"
	"fmt"

	"github.com/ncclrun/ncclrun/internal/units"
)

// Raise is the raise ncclrun makes of its own limit before it starts CMD,
// which inherits it: the soft limit to the hard limit, which the kernel
// always allows, then both to unlimited, which it allows only where
// HardRaisePermitted holds. set applies one step: Set, for this
// process; a model of the kernel's checks, in Raised. after is the limit the
// accepted steps leave; hardErr is why the second step was refused (the
// soft=hard result stands); err is the first step's failure, with after
// equal to before.
func Raise(before Limit, set func(Limit) error) (after Limit, hardErr, err error) {
	after = before
	if before.Soft != before.Hard {
		next := Limit{Soft: before.Hard, Hard: before.Hard}
		if err := set(next); err != nil {
			return before, nil, fmt.Errorf("raise the soft limit to the hard limit: %w", err)
		}
		after = next
	}
	if !IsUnlimited(before.Hard) {
		next := Limit{Soft: units.Unlimited, Hard: units.Unlimited}
		if err := set(next); err != nil {
			return after, fmt.Errorf("raise the hard limit to unlimited: %w", err), nil
		}
		after = next
	}
	return after, nil, nil
}

// HardRaisePermitted is the kernel's rule for raising a hard limit
// (setrlimit(2); kernel/sys.c, do_prlimit): the caller needs
// CAP_SYS_RESOURCE effective, and the kernel asks capable(), which looks
// in the initial user namespace, so the capability held inside any other
// user namespace (a rootless container, hostUsers: false) does not count.
// Lowering a limit, or raising soft up to hard, needs nothing.
func HardRaisePermitted(sysResourceEffective, initialUserNS bool) bool {
	return sysResourceEffective && initialUserNS
}

// Raised is what Raise leaves on a process whose hard limit may be raised
// or not (HardRaisePermitted): the prediction for a process that is not
// this one, such as a snapshot's. It runs Raise's steps against a model
// of the kernel's setrlimit checks, so that the prediction and the live
// raise are the same steps.
func Raised(before Limit, hardPermitted bool) Limit {
	cur := before
	after, _, _ := Raise(before, func(l Limit) error {
		if Above(l.Soft, l.Hard) || Above(l.Hard, cur.Hard) && !hardPermitted {
			return errRefused // EINVAL, EPERM
		}
		cur = l
		return nil
	})
	return after
}

var errRefused = errors.New("refused")
