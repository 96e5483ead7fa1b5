package lint

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDuplicateKeys: a mapping that names a key twice is refused as
// kubectl and Compose refuse it (their decoders reject it), one input
// error naming the key and both lines, never judged by one of its values
// while the cluster would see another or none.
func TestDuplicateKeys(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {limits: {nvidia.com/gpu: 1}}\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"container key", pod + "    securityContext: {capabilities: {add: [IPC_LOCK]}}\n    securityContext: {}\n",
			`not YAML: line 10: mapping key "securityContext" already defined at line 9`},
		{"top key", "apiVersion: v1\nkind: Pod\nkind: Deployment\nmetadata: {name: x}\n",
			`not YAML: line 3: mapping key "kind" already defined at line 2`},
		{"flow mapping", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, name: y}\n",
			`not YAML: line 3: mapping key "name" already defined at line 3`},
		{"JSON", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"metadata":{"name":"y"}}`,
			`not YAML: line 1: mapping key "metadata" already defined at line 1`},
		{"in a later document", pod + "---\n" + "a: 1\nb: 2\na: 3\n",
			`not YAML: line 12: mapping key "a" already defined at line 10`},
		{"long key", "k" + strings.Repeat("x", 200) + ": 1\nk" + strings.Repeat("x", 200) + ": 2\n",
			`already defined at line 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckBytes("m.yaml", []byte(tc.in))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 200, "one short line")
		})
	}

	for _, ok := range []string{
		pod,
		// the same key in sibling mappings, and a merge key beside its own keys
		"x-d: &d {image: i, user: \"1000\"}\nservices:\n  a: {<<: *d, image: j}\n  b: {<<: *d, image: k}\n",
		// keys that differ only in quoting are different text
		"a: 1\n\"b\": 2\n",
	} {
		_, err := CheckBytes("m.yaml", []byte(ok))
		assert.NoError(t, err, ok)
	}
}
