package pin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/launcher"
)

// The memlock probe is a pin in a child that holds exactly the credentials
// CMD would: Probe starts `ncclrun probe-mlock [--ambient] SIZE` through the
// launcher, and that command is ProbeHere.

// Probe pins size bytes in `self probe-mlock SIZE`, started by the
// launcher with cfg's environment, user, capabilities and limits (Path,
// Args, stdio and KillAfter are Probe's). It returns nil when the pin
// held, else the child's reason. With cfg.AmbientIPCLock the child is told
// --ambient: a self run from a cap_ipc_lock+p file loses the ambient set
// on exec and raises the capability itself.
func Probe(self string, cfg launcher.Config, size int64) error {
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

// ProbeHere is the probe's child: it pins size bytes with mlock(2) and
// releases them; the error says why the pin did not hold. With ambient it
// first raises CAP_IPC_LOCK from permitted to effective, which is what
// CMD's ambient set gives it (the probe is ncclrun itself, whose file
// capabilities, if any, replace the ambient set on exec).
func ProbeHere(size int64, ambient bool) error {
	runtime.LockOSThread() // capabilities are per thread; pin on this one
	if ambient {
		// Best effort: the probe then reports what mlock says.
		_, _ = caps.Raise(caps.IPCLock)
	}
	release, err := Pin(size)
	if err != nil {
		return err
	}
	release()
	return nil
}
