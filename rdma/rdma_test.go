//go:build rdma

package rdma

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The limit of every trap scenario: 64 KiB, soft and hard.
const trapLimit = 65536

func TestMain(m *testing.M) {
	code := m.Run()
	if booted.log != "" && code == 0 {
		os.RemoveAll(filepath.Dir(booted.log))
	} else if booted.log != "" {
		os.Stderr.WriteString("rdma: the VM's serial console is kept in " + booted.log + "\n")
	}
	os.Exit(code)
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "not JSON: %q", s)
	return m
}

// check returns the doctor check with the given id.
func check(t *testing.T, doc map[string]any, id string) map[string]any {
	t.Helper()
	checks, _ := doc["checks"].([]any)
	for _, c := range checks {
		if m, _ := c.(map[string]any); m["id"] == id {
			return m
		}
	}
	t.Fatalf("no check %q in %v", id, doc)
	return nil
}

func details(t *testing.T, c map[string]any) map[string]any {
	t.Helper()
	d, ok := c["details"].(map[string]any)
	require.True(t, ok, "check %v has no details", c["id"])
	return d
}

func statuses(t *testing.T, doc map[string]any) [][2]string {
	t.Helper()
	var out [][2]string
	checks, _ := doc["checks"].([]any)
	for _, c := range checks {
		m := c.(map[string]any)
		out = append(out, [2]string{m["id"].(string), m["status"].(string)})
	}
	return out
}

// toolLines are the lines of a stream that ncclrun did not write.
func toolLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" && !strings.HasPrefix(l, "ncclrun: ") {
			out = append(out, l)
		}
	}
	return out
}

func TestDoctorOnRealSysfs(t *testing.T) {
	b := vm(t).get(t, "doctor-root")
	require.Equal(t, 0, b.rc, "doctor as root with rxe0 fails a check: %s", b.parts["stdout"])
	doc := decode(t, b.parts["stdout"])

	rd := check(t, doc, "rdma")
	assert.Equal(t, "ok", rd["status"], rd["summary"])
	devs, _ := details(t, rd)["devices"].([]any)
	require.Len(t, devs, 1, "one RDMA device: %v", devs)
	dev := devs[0].(map[string]any)
	assert.Equal(t, "rxe0", dev["name"])
	assert.Equal(t, true, dev["uverbs_present"], "rxe0's verbs node: %v", dev)
	assert.Regexp(t, `^uverbs[0-9]+$`, dev["uverbs"])
	ports, _ := dev["ports"].([]any)
	require.Len(t, ports, 1)
	port := ports[0].(map[string]any)
	assert.Equal(t, float64(1), port["port"])
	assert.Equal(t, "ACTIVE", port["state"])
	assert.Equal(t, "Ethernet", port["link_layer"])

	// No GPU in the VM: shm reports the size and assumes no GPU.
	assert.Equal(t, "skip", check(t, doc, "gpu")["status"])
	shm := check(t, doc, "shm")
	assert.Equal(t, "skip", shm["status"], shm["summary"])
	assert.NotContains(t, shm["summary"], "assumed")
	assert.Equal(t, float64(0), details(t, shm)["gpus"])
	assert.Greater(t, details(t, shm)["size_bytes"], float64(0))

	assert.Equal(t, "ok", check(t, doc, "memlock")["status"])
	assert.Equal(t, "dummy0", strings.TrimPrefix(check(t, doc, "network")["summary"].(string), "NCCL will use "))
}

func TestDoctorInTheTrap(t *testing.T) {
	b := vm(t).get(t, "doctor-trap")
	require.Equal(t, 1, b.rc, "doctor in the trap state exits 1: %s", b.parts["stdout"])
	doc := decode(t, b.parts["stdout"])
	m := check(t, doc, "memlock")
	assert.Equal(t, "fail", m["status"], m["summary"])
	assert.Equal(t, float64(trapLimit), details(t, m)["soft"])
	assert.Equal(t, float64(trapLimit), details(t, m)["hard"])
	assert.NotEmpty(t, m["fix"])
	c := details(t, check(t, doc, "capabilities"))
	assert.Equal(t, float64(1000), c["uid"])
	assert.Equal(t, map[string]any{"effective": false, "permitted": false, "inheritable": false, "bounding": true, "ambient": false}, c["ipc_lock"])
	// rxe0 is as usable to uid 1000 as to root.
	assert.Equal(t, "ok", check(t, doc, "rdma")["status"])
}

func TestTrapRegistrationFails(t *testing.T) {
	r := vm(t)
	for _, tc := range []struct {
		name string // the block under ncclrun; name+"-plain" is the same without it
		want string // a line the tool prints when ibv_reg_mr fails
	}{
		{"pingpong-trap-server", "Couldn't register MR"},
		{"pingpong-trap-client", "Couldn't register MR"},
		{"writebw-trap-server", "Couldn't allocate MR"},
		{"writebw-trap-client", "Couldn't allocate MR"},
		{"pingpong-32k", "Couldn't register MR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			under := r.get(t, tc.name)
			plainName := strings.Replace(tc.name, "-trap", "-trap-plain", 1)
			if plainName == tc.name {
				plainName += "-plain"
			}
			plain := r.get(t, plainName)
			// Without ncclrun: the registration fails for real.
			assert.NotEqual(t, 0, plain.rc)
			assert.Contains(t, plain.parts["stderr"], tc.want, "the tool's own stderr")
			// Under ncclrun: the same failure, the same exit status, the
			// tool's output untouched.
			assert.Equal(t, plain.rc, under.rc, "ncclrun exits as the tool did")
			assert.Equal(t, toolLines(plain.parts["stderr"]), toolLines(under.parts["stderr"]), "the tool's stderr, line for line")
			rep := decode(t, under.parts["report"])
			assert.Equal(t, float64(under.rc), rep["exit_code"])
			// ... and named: memlock, certain, once, with the fix.
			diags, _ := rep["diagnoses"].([]any)
			if !assert.Len(t, diags, 1, "one diagnosis for the tool's lines %q", toolLines(under.parts["stderr"])) {
				return
			}
			d := diags[0].(map[string]any)
			assert.Equal(t, "memlock", d["id"])
			assert.Equal(t, "certain", d["certainty"])
			assert.NotEmpty(t, d["fix"])
			assert.Equal(t, 1, strings.Count(under.parts["stderr"], "ncclrun: "+d["title"].(string)), "the diagnosis is printed once: %s", under.parts["stderr"])
		})
	}
	// The kernel says why: the pin failed for lack of allowance.
	assert.Contains(t, r.get(t, "dmesg").parts["stdout"], "rxe_mr_init_user: Unable to pin memory region err = -12")
}

// TestWaysOut checks that each way out of the trap makes real 128 KiB
// registrations (ibv_rc_pingpong's buffers, both sides) succeed under the
// same 64 KiB limit, with nothing for ncclrun to diagnose.
func TestWaysOut(t *testing.T) {
	r := vm(t)
	for _, way := range []string{
		"way-user",    // root with IPC_LOCK, SETUID, SETGID; ncclrun --user=1000:1000
		"way-filecap", // cap_ipc_lock+p ncclrun exec'd by uid 1000 under no_new_privs
		"way-raise",   // hard limit above the need; ncclrun raises the soft one
	} {
		for _, side := range []string{"server", "client"} {
			t.Run(way+"-"+side, func(t *testing.T) {
				b := r.get(t, way+"-"+side)
				require.Equal(t, 0, b.rc, "stderr: %s", b.parts["stderr"])
				assert.Contains(t, b.parts["stdout"], "iters in")
				assert.NotContains(t, b.parts["stderr"], "Couldn't register MR")
				rep := decode(t, b.parts["report"])
				assert.Empty(t, rep["diagnoses"])
				assert.Equal(t, "ok", check(t, rep["preflight"].(map[string]any), "memlock")["status"])
			})
		}
	}
	t.Run("user drop holds IPC_LOCK as uid 1000", func(t *testing.T) {
		out := r.get(t, "way-user-dump").parts["stdout"]
		assert.Contains(t, out, "uid: 1000\n")
		assert.Contains(t, out, "Ambient capabilities: ipc_lock\n")
	})
	t.Run("the binary carries the file capability", func(t *testing.T) {
		assert.Equal(t, "/opt/ncclrun-cap cap_ipc_lock=p", strings.TrimSpace(r.get(t, "getcap").parts["stdout"]))
	})
}

// TestFileCapBehindShell checks the failure lint's nnp-shell names: under
// no_new_privs a shell between the runtime and the cap_ipc_lock+p ncclrun
// holds nothing to pass on, so the registration fails and doctor says why.
func TestFileCapBehindShell(t *testing.T) {
	r := vm(t)
	b := r.get(t, "way-filecap-shell")
	assert.NotEqual(t, 0, b.rc)
	assert.Contains(t, b.parts["stderr"], "Couldn't register MR")
	rep := decode(t, b.parts["report"])
	m := check(t, rep["preflight"].(map[string]any), "memlock")
	assert.Equal(t, "fail", m["status"])
	assert.Contains(t, m["summary"], "file capability was ignored")
	diags, _ := rep["diagnoses"].([]any)
	if assert.Len(t, diags, 1, "one diagnosis for %q", toolLines(b.parts["stderr"])) {
		assert.Equal(t, "memlock", diags[0].(map[string]any)["id"])
	}

	d := r.get(t, "doctor-filecap-shell")
	assert.Equal(t, 1, d.rc)
	doc := decode(t, d.parts["stdout"])
	assert.Equal(t, "fail", check(t, doc, "memlock")["status"])
	assert.Equal(t, true, details(t, check(t, doc, "capabilities"))["no_new_privs"])
}

// TestSnapshotReadBack checks that a snapshot taken in the VM, read back by
// doctor --root on the host, agrees with the live doctor in the VM.
func TestSnapshotReadBack(t *testing.T) {
	r := vm(t)
	for _, state := range []string{"root", "trap"} {
		t.Run(state, func(t *testing.T) {
			snap := r.get(t, "snapshot-"+state)
			require.Equal(t, 0, snap.rc, "snapshot: %s", snap.parts["stderr"])
			tgz, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(snap.parts["b64"], "\n", ""))
			require.NoError(t, err)
			dir := extract(t, tgz)

			cmd := exec.Command(r.ncclrun, "doctor", "--json", "--root", dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			liveB := r.get(t, "doctor-"+state)
			require.Equal(t, liveB.rc, code, "stderr: %s", stderr.String())
			live, back := decode(t, liveB.parts["stdout"]), decode(t, stdout.String())

			assert.Equal(t, statuses(t, live), statuses(t, back), "check ids and statuses")
			assert.Equal(t, live["environment"], back["environment"])
			assert.Equal(t, details(t, check(t, live, "rdma")), details(t, check(t, back, "rdma")))
			for _, k := range []string{"soft", "hard", "soft_before", "hard_before", "rule"} {
				assert.Equal(t, details(t, check(t, live, "memlock"))[k], details(t, check(t, back, "memlock"))[k], "memlock %s", k)
			}
			for _, k := range []string{"uid", "no_new_privs", "ipc_lock", "command", "rule"} {
				assert.Equal(t, details(t, check(t, live, "capabilities"))[k], details(t, check(t, back, "capabilities"))[k], "capabilities %s", k)
			}
			for _, id := range []string{"memlock", "capabilities", "rdma", "shm", "gpu", "network"} {
				assert.Equal(t, check(t, live, id)["summary"], check(t, back, id)["summary"], "%s summary", id)
			}
			// /dev/shm is a tmpfs of the default size: mountinfo shows half
			// of RAM in KiB, statfs counts whole pages, so the two may be
			// a fraction of a page apart.
			assert.InDelta(t, details(t, check(t, live, "shm"))["size_bytes"], details(t, check(t, back, "shm"))["size_bytes"], 4096)
		})
	}
}

// extract unpacks a snapshot tarball and returns its one top directory.
func extract(t *testing.T, tgz []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	dst := t.TempDir()
	tops := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		name := filepath.Clean(filepath.FromSlash(h.Name))
		require.False(t, filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)), "entry %q leaves the tarball", h.Name)
		tops[strings.Split(name, string(filepath.Separator))[0]] = true
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			b, err := io.ReadAll(io.LimitReader(tr, 16<<20))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		default:
			t.Fatalf("entry %q has type %c", h.Name, h.Typeflag)
		}
	}
	require.Len(t, tops, 1, "one top directory: %v", tops)
	for top := range tops {
		return filepath.Join(dst, top)
	}
	return ""
}
