package launcher

import (
	"fmt"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// RaiseMemlock raises ncclrun's own RLIMIT_MEMLOCK, which children
// inherit: the soft limit to the hard limit (always allowed), then the
// hard limit to unlimited, which needs CAP_SYS_RESOURCE in the initial
// user namespace; when that is refused the reason is in HardErr and the
// soft=hard result stands. An error is returned only when the limit
// cannot be read or the soft raise fails.
func RaiseMemlock() (MemlockChange, error) {
	var mc MemlockChange
	before, err := rlimit.Get(rlimit.Memlock)
	if err != nil {
		return mc, err
	}
	mc.Before, mc.After = [2]int64{before.Soft, before.Hard}, [2]int64{before.Soft, before.Hard}
	_, mc.HardErr, err = rlimit.Raise(before, func(l rlimit.Limit) error { return rlimit.Set(rlimit.Memlock, l) })
	if err != nil {
		return mc, fmt.Errorf("RLIMIT_MEMLOCK: %w", err)
	}
	if mc.HardErr != nil {
		mc.HardErr = fmt.Errorf("RLIMIT_MEMLOCK: %w", mc.HardErr)
	}
	mc.After, err = getMemlock()
	return mc, err
}

func getMemlock() ([2]int64, error) {
	l, err := rlimit.Get(rlimit.Memlock)
	return [2]int64{l.Soft, l.Hard}, err
}

// checkMemlock refuses, before anything is forked, a memlock limit for the
// child that the kernel would refuse: a hard limit above ncclrun's own
// (after RaiseMemlock) needs CAP_SYS_RESOURCE, and soft may not exceed
// hard. Errors wrap ErrMemlock.
func checkMemlock(v [2]int64) error {
	above := func(a, b int64) bool { return b != -1 && (a == -1 || a > b) }
	if above(v[0], v[1]) {
		return fmt.Errorf("%w: soft limit %s above hard limit %s", ErrMemlock, rlimString(v[0]), rlimString(v[1]))
	}
	cur, err := getMemlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMemlock, err)
	}
	if !above(v[1], cur[1]) {
		return nil
	}
	if c, err := caps.Get(); err == nil && caps.Has(c.Effective, caps.SysResource) {
		return nil
	}
	return fmt.Errorf("%w: raising the hard RLIMIT_MEMLOCK from %s to %s needs CAP_SYS_RESOURCE, which ncclrun does not have", ErrMemlock, rlimString(cur[1]), rlimString(v[1]))
}

// rlimString is a limit in bytes, or "unlimited".
func rlimString(v int64) string {
	if v < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes", v)
}

func setMemlock(v [2]int64) error {
	return rlimit.Set(rlimit.Memlock, rlimit.Limit{Soft: v[0], Hard: v[1]})
}
