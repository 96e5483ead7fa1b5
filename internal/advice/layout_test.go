package advice

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLayoutPutsEachAlternativeOnALine(t *testing.T) {
	assert.Equal(t, "fix: do A\n     or do B\n     or do C", Layout("do A; or do B; or do C", "fix: ", "     "))
	assert.Equal(t, "fix: only one; with a semicolon", Layout("only one; with a semicolon", "fix: ", "     "))
}

func TestShellWord(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/usr/bin/python3.11", "/usr/bin/python3.11"},
		{"/opt/my app/run", `'/opt/my app/run'`},
		{"it's", `'it'\''s'`},
		{"$(reboot)", `'$(reboot)'`},
		{"", `''`},
		{"a;b", `'a;b'`},
	} {
		assert.Equal(t, tc.want, ShellWord(tc.in), tc.in)
	}
}
