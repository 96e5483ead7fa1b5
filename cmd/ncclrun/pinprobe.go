package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ncclrun/ncclrun/launcher"
)

// The memlock probe of doctor's --probe is a pin in a child that holds
// exactly the credentials CMD would: pinProbe starts `ncclrun probe-mlock
// [--ambient] SIZE` through the launcher, and that command is
// pin.ProbeHere.

// pinProbe pins size bytes in `self probe-mlock SIZE`, started by the
// launcher with cfg's environment, user, capabilities and limits (Path,
// Args, stdio and KillAfter are pinProbe's). It returns nil when the pin
// held, else the child's reason. With cfg.AmbientIPCLock the child is told
// --ambient: a self run from a cap_ipc_lock+p file loses the ambient set
// on exec and raises the capability itself.
func pinProbe(self string, cfg launcher.Config, size int64) error {
	args := []string{"probe-mlock"}
	if cfg.AmbientIPCLock {
		args = append(args, "--ambient")
	}
	var errBuf bytes.Buffer
	cfg.Path, cfg.Args = self, append(args, strconv.FormatInt(size, 10))
	cfg.Stdin, cfg.Stdout, cfg.Stderr = bytes.NewReader(nil), io.Discard, &errBuf
	cfg.KillAfter = time.Second
	res, err := launcher.Run(cfg)
	if err != nil {
		return fmt.Errorf("start the probe: %w", err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errBuf.String()), "ncclrun: "))
		if msg == "" {
			msg = fmt.Sprintf("probe exited with status %d", res.ExitCode)
		}
		return errors.New(msg)
	}
	return nil
}
