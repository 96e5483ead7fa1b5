// Package snapshot copies what preflight reads under a root into a tree
// that preflight (`ncclrun doctor --root`) reads back: the file behind
// `ncclrun snapshot`.
//
// The copy is made by running preflight's tree-mode readers through a
// root that records every read (preflight.Record), so the list of what is
// copied is the list of what is read and cannot drift from it. The readers
// already refuse what a tree must not give them (FIFOs, devices, links out
// of the tree) and bound what they read; this package adds the privacy
// rules of docs/snapshot.md (NCCL configuration files keep only their
// NCCL_ lines, the environment only the variables preflight uses) and a
// bound on the whole.
//
// Do not use it to back up or diff a system: it copies facts, not files
// (device nodes become empty files, directories only the names used).
package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/ncclrun/ncclrun/preflight"
)

// Bounds of a snapshot: at most MaxTotal bytes of content in MaxEntries
// files and directories (each file is already cut where preflight cuts it).
const (
	MaxTotal   = 16 << 20
	MaxEntries = 4096
)

// ManifestFile is the file ncclrun adds at the top of a snapshot to say
// what was taken (Manifest); preflight does not read it.
const ManifestFile = "ncclrun-snapshot.json"

// Manifest is ncclrun-snapshot.json: what was taken, and what not.
type Manifest struct {
	Version    string   `json:"ncclrun_version"`
	Commit     string   `json:"ncclrun_commit"`
	TakenAt    string   `json:"taken_at"`
	Source     string   `json:"source"`
	Files      int      `json:"files"`
	Bytes      int64    `json:"bytes"`
	Unreadable []string `json:"unreadable"`
	OverLimit  []string `json:"over_limit"`
	EnvFile    string   `json:"env_file"`
	Analyse    string   `json:"analyse"`
}

// entry is one file or directory of a snapshot; a mark is an empty file
// or directory that only says the path exists.
type entry struct {
	dir  bool
	mark bool
	data []byte
}

// Snapshot is a collected tree, in memory (it is bounded).
type Snapshot struct {
	entries map[string]*entry
	// Bytes and Files count the content copied (preflight.EnvFile aside).
	Bytes int64
	Files int
	// Unreadable are the paths that exist but could not be read (a FIFO,
	// a device where a file was expected, a link out of the tree, no
	// permission); OverLimit those left out because a bound was reached.
	Unreadable []string
	OverLimit  []string
	// EnvDropped counts the variables not recorded.
	EnvDropped int
}

// Take copies from src ("/" is the live system, read as a tree) what
// preflight reads, and records in preflight.EnvFile the variables of
// environ that preflight uses (NCCLRUN_ROOT aside: it would point doctor
// away from the snapshot). It never fails: what cannot be read is counted.
func Take(ctx context.Context, src string, environ []string) *Snapshot {
	s := &Snapshot{entries: map[string]*entry{}}
	env := s.recordedEnv(environ)
	var marks []preflight.Read
	preflight.Record(ctx, preflight.Options{Root: src, Env: env}, func(r preflight.Read) {
		switch {
		case r.Err != nil:
			s.failed(r.Rel, r.Err)
		case r.Kind == preflight.ReadDir || r.Kind == preflight.ReadExists:
			marks = append(marks, r) // after the contents: see below
		case r.Kind == preflight.ReadConf:
			s.put(r.Rel, ncclLines(r.Data))
		default:
			s.put(r.Rel, r.Data)
		}
	})
	// Contents first, in the order preflight read them (credentials,
	// platform, ..., network), then the names of listed directories and
	// the paths only tested for: a bound drops names before facts.
	for _, r := range marks {
		if r.Kind == preflight.ReadExists {
			s.mark(r.Rel, len(r.Dirs) > 0 && r.Dirs[0])
			continue
		}
		s.mkdir(r.Rel)
		for i, n := range r.Names {
			s.mark(r.Rel+"/"+n, i < len(r.Dirs) && r.Dirs[i])
		}
	}
	text := strings.Join(env, "\n")
	if text != "" {
		text += "\n"
	}
	s.entries[preflight.EnvFile] = &entry{data: []byte(text)}
	return s
}

// recordedEnv is the environment a snapshot records, sorted: preflight's
// variables only, the last value of each, none holding a newline or NUL.
func (s *Snapshot) recordedEnv(environ []string) []string {
	last := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			last[k] = v
		}
	}
	var env []string
	for k, v := range last {
		if !preflight.EnvUsed(k) || k == "NCCLRUN_ROOT" || strings.ContainsAny(v, "\n\x00") {
			s.EnvDropped++
			continue
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// ncclLines keeps the NCCL_ lines of an NCCL configuration file: they are
// all preflight uses, and a NCCL_CONF_FILE aimed at a file that is not
// NCCL's leaks nothing.
func ncclLines(b []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if k, _, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "NCCL_") {
			out.WriteString(sc.Text())
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// failed records a path that exists but could not be read; a path that
// does not exist is simply not in the snapshot.
func (s *Snapshot) failed(rel string, err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return
	}
	for _, u := range s.Unreadable {
		if u == rel {
			return
		}
	}
	s.Unreadable = append(s.Unreadable, rel)
}

// room reports whether one more entry of n bytes fits, recording rel as
// left out when it does not.
func (s *Snapshot) room(rel string, n int) bool {
	if len(s.entries) >= MaxEntries || s.Bytes+int64(n) > MaxTotal {
		s.OverLimit = append(s.OverLimit, rel)
		return false
	}
	return true
}

// mkdir records a directory (and its parents).
func (s *Snapshot) mkdir(rel string) bool {
	if rel == "." || rel == "" {
		return true
	}
	if e, ok := s.entries[rel]; ok {
		return e.dir
	}
	if !s.mkdir(path.Dir(rel)) || !s.room(rel, 0) {
		return false
	}
	s.entries[rel] = &entry{dir: true}
	return true
}

// put records a file with its content; a path read twice keeps the first.
func (s *Snapshot) put(rel string, data []byte) {
	if e, ok := s.entries[rel]; ok && !e.mark {
		return
	}
	if !s.mkdir(path.Dir(rel)) || !s.room(rel, len(data)) {
		return
	}
	s.entries[rel] = &entry{data: data}
	s.Bytes += int64(len(data))
	s.Files++
}

// mark records that rel exists, as an empty directory or an empty file
// (a device node, .dockerenv), unless it is there already.
func (s *Snapshot) mark(rel string, dir bool) {
	if _, ok := s.entries[rel]; ok {
		return
	}
	if dir {
		s.mkdir(rel)
		return
	}
	if !s.mkdir(path.Dir(rel)) || !s.room(rel, 0) {
		return
	}
	s.entries[rel] = &entry{mark: true, data: []byte{}}
	s.Files++
}

// Add puts a file of ncclrun's own at the top (the manifest); it is not
// counted in Files or Bytes.
func (s *Snapshot) Add(rel string, data []byte) {
	s.entries[rel] = &entry{data: data}
}

// Entry returns the content recorded for rel, and false when rel is not a
// file of the snapshot.
func (s *Snapshot) Entry(rel string) ([]byte, bool) {
	e, ok := s.entries[rel]
	if !ok || e.dir {
		return nil, false
	}
	return e.data, true
}

// Len is the number of files and directories in the snapshot.
func (s *Snapshot) Len() int { return len(s.entries) }
