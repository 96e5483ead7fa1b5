package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Writer writes a snapshot's entries, parents before children.
type Writer interface {
	Dir(rel string) error
	File(rel string, data []byte) error
	Close() error
}

// Write writes every entry, sorted so that parents come first.
func (s *Snapshot) Write(w Writer) error {
	rels := make([]string, 0, len(s.entries))
	for r := range s.entries {
		rels = append(rels, r)
	}
	sort.Strings(rels)
	if err := w.Dir("."); err != nil {
		return err
	}
	for _, r := range rels {
		e := s.entries[r]
		var err error
		if e.dir {
			err = w.Dir(r)
		} else {
			err = w.File(r, e.data)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DirWriter writes a snapshot as a directory tree under Root, which exists.
type DirWriter struct{ Root string }

// Dir creates directory rel.
func (d *DirWriter) Dir(rel string) error {
	p := filepath.Join(d.Root, filepath.FromSlash(rel))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// File writes file rel.
func (d *DirWriter) File(rel string, data []byte) error {
	p := filepath.Join(d.Root, filepath.FromSlash(rel))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// Close does nothing.
func (d *DirWriter) Close() error { return nil }

// TarWriter writes a snapshot as a gzip-compressed tar under one top
// directory.
type TarWriter struct {
	top    string
	tw     *tar.Writer
	gz     *gzip.Writer
	closer io.Closer
	now    time.Time
}

// NewTarWriter writes to w under top; Close closes c too (nil: nothing).
func NewTarWriter(w io.Writer, top string, c io.Closer) *TarWriter {
	gz := gzip.NewWriter(w)
	return &TarWriter{top: top, tw: tar.NewWriter(gz), gz: gz, closer: c, now: time.Now()}
}

func (t *TarWriter) header(rel string, dir bool, size int) error {
	name := t.top + "/" + rel
	if rel == "." {
		name = t.top
	}
	h := &tar.Header{Name: name, Mode: 0o644, Size: int64(size), ModTime: t.now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if dir {
		h.Name += "/"
		h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
	}
	if err := t.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// Dir writes a directory header.
func (t *TarWriter) Dir(rel string) error { return t.header(rel, true, 0) }

// File writes a file.
func (t *TarWriter) File(rel string, data []byte) error {
	if err := t.header(rel, false, len(data)); err != nil {
		return err
	}
	if _, err := t.tw.Write(data); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// Close ends the tar and gzip streams and closes the underlying closer.
func (t *TarWriter) Close() error {
	var errs []error
	errs = append(errs, t.tw.Close(), t.gz.Close())
	if t.closer != nil {
		errs = append(errs, t.closer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}
