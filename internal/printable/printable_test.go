package printable

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "NCCL WARN Call to ibv_reg_mr failed", "NCCL WARN Call to ibv_reg_mr failed"},
		{"tab kept", "a\tb", "a\tb"},
		{"utf-8 kept", "nœud-é 日本", "nœud-é 日本"},
		{"window title", "error \x1b]0;pwned\x07 memory", `error \x1b]0;pwned\x07 memory`},
		{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"carriage return and NUL", "a\rb\x00c", `a\x0db\x00c`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"invalid UTF-8", "a\xff\xfeb", "a\uFFFDb"},
		{"invalid and control", "\xff\x1b", "\uFFFD\\x1b"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, String(tc.in))
		})
	}
}
