package launcher

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// User is who the child runs as: the ids, resolved once (ResolveUser),
// that the fork, the trampoline and the reading of CMD's files as CMD's
// user all use.
type User struct {
	UID, GID uint32
	// Groups are the supplementary groups: the user's own (from
	// /etc/group, primary group included) when no group was named, only
	// GID when one was, none for a numeric uid that /etc/passwd lacks.
	Groups []uint32
}

// noID is (uid_t)-1, which the set*id calls read as "leave this id
// unchanged": it names no user or group, and a child asked to run as it
// would fail only at exec, as a command that cannot be executed.
const noID = ^uint32(0)

// ResolveUser resolves a --user spec ("name", "uid", "name:group",
// "uid:gid", "uid:group", "name:gid") through /etc/passwd and /etc/group
// (os/user, which needs no cgo), as gosu and su-exec do. A numeric uid
// missing from /etc/passwd is allowed; its group is then the named one or
// ncclrun's own gid. A uid or gid of (uid_t)-1 names nobody. Errors wrap
// ErrUser.
func ResolveUser(spec string) (User, error) {
	c, err := resolveUser(spec)
	switch {
	case err != nil:
		return User{}, err
	case c.UID == noID:
		return User{}, fmt.Errorf("%w %q: uid %d is (uid_t)-1, not a user", ErrUser, spec, noID)
	case c.GID == noID:
		return User{}, fmt.Errorf("%w %q: gid %d is (gid_t)-1, not a group", ErrUser, spec, noID)
	}
	return c, nil
}

func resolveUser(spec string) (User, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || (hasGroup && group == "") {
		return User{}, fmt.Errorf("%w %q: want USER or USER:GROUP", ErrUser, spec)
	}
	var c User
	var u *user.User
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		c.UID = uint32(n)
		c.GID = uint32(os.Getgid())
		if uu, err := user.LookupId(name); err == nil {
			u = uu
		}
	} else {
		uu, err := user.Lookup(name)
		if err != nil {
			return User{}, fmt.Errorf("%w %q: %w", ErrUser, spec, err)
		}
		u = uu
	}
	if u != nil {
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return User{}, fmt.Errorf("%w %q: non-numeric ids %q:%q", ErrUser, spec, u.Uid, u.Gid)
		}
		c.UID, c.GID = uint32(uid), uint32(gid)
	}
	if hasGroup {
		gid, err := resolveGroup(group)
		if err != nil {
			return User{}, fmt.Errorf("%w %q: %w", ErrUser, spec, err)
		}
		c.GID = gid
		c.Groups = []uint32{gid}
		return c, nil
	}
	c.Groups = []uint32{}
	if u != nil {
		ids, err := u.GroupIds()
		if err != nil {
			return User{}, fmt.Errorf("%w %q: supplementary groups: %w", ErrUser, spec, err)
		}
		seen := map[uint32]bool{}
		for _, s := range ids {
			g, err := strconv.ParseUint(s, 10, 32)
			if err != nil || seen[uint32(g)] {
				continue
			}
			seen[uint32(g)] = true
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return c, nil
}

// self reports whether u is ncclrun's own real and effective uid and gid.
func (u User) self() bool {
	return u.UID == uint32(os.Getuid()) && u.UID == uint32(os.Geteuid()) &&
		u.GID == uint32(os.Getgid()) && u.GID == uint32(os.Getegid())
}

func resolveGroup(group string) (uint32, error) {
	if n, err := strconv.ParseUint(group, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q has non-numeric gid %q", group, g.Gid)
	}
	return uint32(n), nil
}
