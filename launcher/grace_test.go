package launcher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseCheckpointSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // 0: refused
	}{
		{"SIGUSR1", int(unix.SIGUSR1)}, {"usr2", int(unix.SIGUSR2)}, {" 10 ", 10},
		{"SIGKILL", 0}, {"STOP", 0}, {"USR9", 0}, {"0", 0}, {"65", 0},
	} {
		sig, err := ParseCheckpointSignal(tc.in)
		if tc.want == 0 {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, int(sig), tc.in)
	}
}
