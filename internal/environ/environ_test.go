package environ

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLookupLastWins(t *testing.T) {
	env := []string{"A=1", "B=", "A=2", "C", "=x"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"A", "2", true}, {"B", "", true}, {"C", "", false}, {"D", "", false}, {"", "x", true},
	} {
		v, ok := Lookup(env, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.want, v, tc.name)
	}
}

func TestMap(t *testing.T) {
	assert.Equal(t, map[string]string{"A": "2", "B": "", "P": "a=b"},
		Map([]string{"A=1", "B=", "A=2", "C", "=x", "P=a=b"}))
	assert.Empty(t, Map(nil))
}

func TestName(t *testing.T) {
	assert.Equal(t, "A", Name("A=1=2"))
	assert.Equal(t, "C", Name("C"))
	assert.Equal(t, "", Name("=x"))
}

func TestWithout(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3", "AB=4"}
	assert.Equal(t, []string{"B=2", "AB=4"}, Without(env, "A"))
	assert.Equal(t, []string{"A=1", "B=2", "A=3", "AB=4"}, env, "env is not modified")
}

func TestDedup(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
	}{
		{nil, []string{}},
		{[]string{"A=1", "B=2"}, []string{"A=1", "B=2"}},
		{[]string{"A=1", "B=2", "A=3"}, []string{"B=2", "A=3"}},
		{[]string{"A=2", "A=1", "B=1"}, []string{"A=1", "B=1"}},
		{[]string{"C", "C=1"}, []string{"C=1"}},
	} {
		in := append([]string(nil), tc.in...)
		got := Dedup(in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.in, in, "input not modified")
		for _, kv := range got {
			v, _ := Lookup(tc.in, Name(kv))
			w, _ := Lookup(got, Name(kv))
			assert.Equal(t, v, w, "Lookup agrees before and after Dedup")
		}
	}
}

func TestParse(t *testing.T) {
	assert.Equal(t, []string{"A=1", "B=x y", "C"}, Parse([]byte("A=1\x00B=x y\x00\x00C\x00"), 0))
	assert.Equal(t, []string{"A=1", "B=2"}, Parse([]byte("A=1\nB=2"), '\n'))
	assert.Nil(t, Parse(nil, 0))
	assert.Nil(t, Parse([]byte("\x00\x00"), 0))
}
