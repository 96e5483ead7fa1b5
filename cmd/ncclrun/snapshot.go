package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/units"
	"github.com/ncclrun/ncclrun/preflight"
	"github.com/ncclrun/ncclrun/preflight/snapshot"
)

// flagOutput is snapshot's --output.
const flagOutput = "output"

func cmdSnapshot(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return usagef("snapshot takes no arguments (got %q); use --%s FILE.tar.gz|DIR", c.Args().First(), flagOutput)
	}
	now := time.Now()
	out, err := snapshot.ParseOutput(c.String(flagOutput), now)
	if err != nil {
		return usagef("--%s %q: %v", flagOutput, c.String(flagOutput), err)
	}
	src := c.String(flagRoot)
	if liveRoot(src) {
		src = "/"
	} else if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return usagef("--%s %q is not a directory", flagRoot, src)
	}
	w, cleanup, err := out.Open(e.stdout)
	switch {
	case errors.Is(err, snapshot.ErrNotDir), errors.Is(err, snapshot.ErrNotEmpty):
		return usagef("--%s %q %v", flagOutput, out.Path, err)
	case err != nil:
		return usagef("--%s: %v", flagOutput, err)
	}
	s := snapshot.Take(c.Context, src, e.environ)
	analyse := out.Analyse()
	m := snapshot.Manifest{
		Version: version, Commit: commit, TakenAt: now.UTC().Format(time.RFC3339), Source: src,
		Files: s.Files, Bytes: s.Bytes,
		Unreadable: append([]string{}, s.Unreadable...), OverLimit: append([]string{}, s.OverLimit...),
		EnvFile: preflight.EnvFile, Analyse: analyse,
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		cleanup()
		return fmt.Errorf("encode %s: %w", snapshot.ManifestFile, err)
	}
	s.Add(snapshot.ManifestFile, append(mb, '\n'))
	if err := s.Write(w); err != nil {
		_ = w.Close()
		cleanup()
		return err
	}
	if err := w.Close(); err != nil {
		cleanup()
		return err
	}
	extra := ""
	if n := len(s.Unreadable); n > 0 {
		extra += fmt.Sprintf(", %d unreadable skipped", n)
	}
	if n := len(s.OverLimit); n > 0 {
		extra += fmt.Sprintf(", %d left out over the %s/%d-file bound", n, units.FormatSize(snapshot.MaxTotal), snapshot.MaxEntries)
	}
	// The output's name is the user's, and may carry an escape sequence.
	say(e.stderr, "snapshot written to %s (%d files, %s%s); analyse it with: %s",
		out.Where(), s.Files, units.FormatSize(s.Bytes), extra, analyse)
	return nil
}
