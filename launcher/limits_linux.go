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
	mc.Before, mc.After = before, before
	_, mc.HardErr, err = rlimit.Raise(before, func(l rlimit.Limit) error { return rlimit.Set(rlimit.Memlock, l) })
	if err != nil {
		return mc, fmt.Errorf("RLIMIT_MEMLOCK: %w", err)
	}
	if mc.HardErr != nil {
		mc.HardErr = fmt.Errorf("RLIMIT_MEMLOCK: %w", mc.HardErr)
	}
	mc.After, err = rlimit.Get(rlimit.Memlock)
	return mc, err
}

// checkMemlock refuses, before anything is forked, a memlock limit for the
// child that the kernel would refuse: a hard limit above ncclrun's own
// (after RaiseMemlock) needs CAP_SYS_RESOURCE, and soft may not exceed
// hard. Errors wrap ErrMemlock.
func checkMemlock(v rlimit.Limit) error {
	if rlimit.Above(v.Soft, v.Hard) {
		return fmt.Errorf("%w: soft limit %s above hard limit %s", ErrMemlock, rlimString(v.Soft), rlimString(v.Hard))
	}
	cur, err := rlimit.Get(rlimit.Memlock)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMemlock, err)
	}
	if !rlimit.Above(v.Hard, cur.Hard) {
		return nil
	}
	if c, err := caps.Get(); err == nil && caps.Has(c.Effective, caps.SysResource) {
		return nil
	}
	return fmt.Errorf("%w: raising the hard RLIMIT_MEMLOCK from %s to %s needs CAP_SYS_RESOURCE, which ncclrun does not have", ErrMemlock, rlimString(cur.Hard), rlimString(v.Hard))
}

// rlimString is a limit in bytes, or "unlimited".
func rlimString(v int64) string {
	if v < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes", v)
}
