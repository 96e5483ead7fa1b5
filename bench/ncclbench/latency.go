package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// latencyWarmup round trips are made before measuring.
const latencyWarmup = 20

// Latency measures n round trips through argv, a command that ends in
// `ncclbench echo-partial` (directly, or behind a supervisor such as
// `ncclrun run --`): each trip writes one byte to the command's stdin,
// which reaches the child directly, and times until the child's answer,
// one byte with no newline (a partial line), arrives on the command's
// stdout. All timestamps are taken in this process. Subtracting the
// direct round trip from the supervised one gives what the supervisor's
// relay adds to a partial line.
func Latency(argv []string, n int) ([]time.Duration, error) {
	c := exec.Command(argv[0], argv[1:]...)
	in, err := c.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	c.Stdout = outW
	if err := c.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("start %q: %w", argv, err)
	}
	outW.Close()
	defer outR.Close()
	ds, rerr := roundTrips(in, outR, n)
	in.Close()
	_, _ = io.Copy(io.Discard, outR)
	werr := c.Wait()
	if rerr != nil {
		return nil, rerr
	}
	if werr != nil {
		return nil, fmt.Errorf("%q: %w", argv, werr)
	}
	return ds, nil
}

func roundTrips(w io.Writer, r io.Reader, n int) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	ping := []byte{'p'}
	pong := make([]byte, 1)
	for i := 0; i < latencyWarmup+n; i++ {
		start := time.Now()
		if _, err := w.Write(ping); err != nil {
			return nil, fmt.Errorf("round trip %d: write: %w", i, err)
		}
		if _, err := io.ReadFull(r, pong); err != nil {
			return nil, fmt.Errorf("round trip %d: read: %w", i, err)
		}
		d := time.Since(start)
		if pong[0] != '.' {
			return nil, fmt.Errorf("round trip %d: got %q, want %q", i, pong, ".")
		}
		if i >= latencyWarmup {
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// echoPartial answers each byte read from r with "." on w, a partial line
// (no newline), until r ends.
func echoPartial(r io.Reader, w io.Writer) error {
	b := make([]byte, 1)
	dot := []byte{'.'}
	for {
		_, err := r.Read(b)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if _, err := w.Write(dot); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}
