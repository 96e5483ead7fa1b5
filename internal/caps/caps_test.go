package caps

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAndName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"IPC_LOCK", IPCLock}, {"CAP_IPC_LOCK", IPCLock}, {" cap_ipc_lock ", IPCLock},
		{"CHOWN", 0}, {"CAP_SETUID", SetUID}, {"setgid", SetGID},
		{"SYS_RESOURCE", SysResource}, {"CAP_CHECKPOINT_RESTORE", 40},
	} {
		c, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, c, tc.in)
		assert.Equal(t, "CAP_"+Normalize(tc.in), Name(c), tc.in)
	}
	_, err := Parse("IPC_LOKC")
	assert.True(t, errors.Is(err, ErrUnknown), "%v", err)
	assert.Equal(t, "CAP_63", Name(63))
	assert.Equal(t, "CAP_-1", Name(-1))
	for i := range names {
		c, err := Parse(Name(i))
		require.NoError(t, err)
		assert.Equal(t, i, c)
	}
}

func TestMask(t *testing.T) {
	m, err := Mask([]string{"IPC_LOCK", "cap_setuid"})
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<IPCLock|1<<SetUID), m)
	assert.True(t, Has(m, IPCLock))
	assert.False(t, Has(m, SetGID))
	assert.False(t, Has(m, 64))
	_, err = Mask([]string{"IPC_LOCK", "NOPE"})
	assert.ErrorIs(t, err, ErrUnknown)
}

func TestParseMask(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0000000000004000", 1 << IPCLock, true},
		{"000001ffffffffff", 0x1ffffffffff, true},
		{"ffffffffffffffff", ^uint64(0), true},
		{"0", 0, true},
		{"", 0, false},
		{"zz", 0, false},
		{"10000000000000000", 0, false},
		{"-1", 0, false},
	} {
		v, err := ParseMask(tc.in)
		if !tc.ok {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			assert.Zero(t, v, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, v, tc.in)
	}
}

// TestGetSet: Set with what Get returned changes nothing, and the sets
// agree with the kernel's own account in /proc/thread-self/status.
func TestGetSet(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := Get()
		assert.ErrorIs(t, err, ErrUnsupported)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s, err := Get()
	require.NoError(t, err)
	require.NoError(t, Set(s))
	s2, err := Get()
	require.NoError(t, err)
	assert.Equal(t, s, s2)
	eff, err := threadStatusMask("CapEff")
	require.NoError(t, err)
	assert.Equal(t, eff, s.Effective)
	prm, err := threadStatusMask("CapPrm")
	require.NoError(t, err)
	assert.Equal(t, prm, s.Permitted)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"IPC_LOCK", "cap_ipc_lock", " CAP_SYS_ADMIN ", "", "CAP_", "NOPE", "CAP_40", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, err := Parse(name)
		if err != nil {
			return
		}
		if c < 0 || c >= len(names) {
			t.Fatalf("%q -> %d", name, c)
		}
		if got := Name(c); !strings.EqualFold(strings.TrimPrefix(got, "CAP_"), strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")) {
			t.Fatalf("%q -> %d -> %q", name, c, got)
		}
	})
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"0000000000004000", "000001ffffffffff", "", "zz", "ffffffffffffffff", "10000000000000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMask(s)
		if err != nil && v != 0 {
			t.Fatalf("value %x with error", v)
		}
	})
}

// TestRaise: a capability that is effective already stays so after lower;
// one that is not permitted is not raised. (Raising a permitted-only one
// needs a cap_ipc_lock+p binary: the cmd/ncclrun doctor --probe tests.)
func TestRaise(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux capabilities")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := Get()
	require.NoError(t, err)
	for c := 0; c < 41; c++ {
		lower, err := Raise(c)
		require.NoError(t, err, Name(c))
		now, err := Get()
		require.NoError(t, err)
		assert.Equal(t, Has(before.Permitted, c), Has(now.Effective, c), Name(c))
		lower()
		now, err = Get()
		require.NoError(t, err)
		assert.Equal(t, before, now, Name(c))
	}
	if !Has(before.Permitted, IPCLock) {
		return
	}
	// Permitted only, as after a cap_ipc_lock+p exec: Raise adds it, lower takes it back.
	dropped := before
	dropped.Effective &^= 1 << IPCLock
	require.NoError(t, Set(dropped))
	defer func() { require.NoError(t, Set(before)) }()
	lower, err := Raise(IPCLock)
	require.NoError(t, err)
	now, err := Get()
	require.NoError(t, err)
	assert.True(t, Has(now.Effective, IPCLock))
	lower()
	now, err = Get()
	require.NoError(t, err)
	assert.Equal(t, dropped, now)
}
