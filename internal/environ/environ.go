// Package environ reads and edits environments as lists of "KEY=VALUE"
// strings, the form of os.Environ, exec.Cmd.Env and execve(2).
//
// Duplicate keys: when a list names a key more than once, the last entry
// for it wins, as exec.Cmd.Env documents ("only the last value in the
// slice for each duplicate key is used"). Lookup and Map read it so, and
// Dedup makes a list that says so to any reader: the launcher hands CMD a
// deduplicated environment, so that what ncclrun read is what CMD gets
// whichever entry its libc would have picked.
package environ

import (
	"bytes"
	"strings"
)

// Name returns the key of a "KEY=VALUE" entry: everything before the
// first '=', all of it when there is none.
func Name(kv string) string {
	if i := strings.IndexByte(kv, '='); i >= 0 {
		return kv[:i]
	}
	return kv
}

// Lookup returns the value of name in env (the last entry for it) and
// whether env sets it at all, even to the empty string.
func Lookup(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Map returns env as a map (the last entry for a key wins), leaving out
// entries without '=' or with an empty key.
func Map(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// Without returns a new list: env without any entry named name.
func Without(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if Name(kv) != name {
			out = append(out, kv)
		}
	}
	return out
}

// Dedup returns a new list with one entry per key, the last one, in the
// order of those last entries (as os/exec does with exec.Cmd.Env).
func Dedup(env []string) []string {
	seen := make(map[string]bool, len(env))
	keep := make([]bool, len(env))
	n := 0
	for i := len(env) - 1; i >= 0; i-- {
		k := Name(env[i])
		if !seen[k] {
			seen[k], keep[i] = true, true
			n++
		}
	}
	out := make([]string, 0, n)
	for i, kv := range env {
		if keep[i] {
			out = append(out, kv)
		}
	}
	return out
}

// Parse splits an environment block into its entries: sep is 0 for the
// NUL-separated form of /proc/<pid>/environ and execve(2), '\n' for one
// entry a line. Empty entries are dropped; nothing else is changed.
func Parse(b []byte, sep byte) []string {
	var env []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, sep)
		if i < 0 {
			i = len(b)
		}
		if i > 0 {
			env = append(env, string(b[:i]))
		}
		b = b[min(i+1, len(b)):]
	}
	return env
}

// Var is one variable ncclrun adds to CMD's environment, with the reason
// `ncclrun env` and run's report show for it.
type Var struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}
