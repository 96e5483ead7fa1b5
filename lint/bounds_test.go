package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bomb is a List of k aliases to a Pod of k aliases to a container whose
// command is k aliases: a few KB that expand to k³ nodes.
func bomb(k int) string {
	list := func(alias string) string { return "[" + strings.Repeat(alias+",", k-1) + alias + "]" }
	return "kind: List\nx-s: &s torchrun\nx-c: &c {name: c, command: " + list("*s") + "}\n" +
		"x-p: &p {kind: Pod, metadata: {name: p}, spec: {containers: " + list("*c") + "}}\nitems: " + list("*p") + "\n"
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

// TestAliasBomb: a document that expands past its bound through aliases
// is one input error, found without expanding it, and the other inputs
// are still checked; anchors as manifests and Compose files use them
// (`<<: *defaults`, a shared env list) are read as before.
func TestAliasBomb(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a-bomb.yaml"), bomb(100))
	writeFile(t, filepath.Join(dir, "b-cycle.yaml"), "kind: List\nitems: &l [*l]\n")
	trap, err := os.ReadFile("testdata/rules/trap.yaml")
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, "c-trap.yaml"), string(trap))
	rep := Paths([]string{dir}, nil)
	require.Len(t, rep.Errors, 2)
	for _, e := range rep.Errors {
		assert.ErrorIs(t, e, ErrInput)
		assert.Contains(t, e.Error(), "expands through its aliases to more than")
	}
	assert.Len(t, rep.Containers, 1, "the good input is still checked")

	compose := `x-defaults: &defaults
  image: trainer:1
  user: "1000:1000"
  cap_drop: [ALL]
x-env: &env
  - NCCL_DEBUG=INFO
services:
`
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		compose += "  " + s + ":\n    <<: *defaults\n    environment: *env\n    cap_add: [IPC_LOCK]\n    gpus: all\n"
	}
	rep, err = CheckBytes("compose.yaml", []byte(compose))
	require.NoError(t, err)
	assert.Len(t, rep.Containers, 8)

	// Within the bound: a pod of 1000 containers that share one anchored
	// securityContext.
	pod := "kind: Pod\nmetadata: {name: p}\nx: &sc {runAsUser: 1000, capabilities: {add: [IPC_LOCK]}}\nspec:\n  containers:\n"
	for i := 0; i < 1000; i++ {
		pod += "  - {name: c" + itoa(i) + ", securityContext: *sc}\n"
	}
	rep, err = CheckBytes("pod.yaml", []byte(pod))
	require.NoError(t, err)
	assert.Len(t, rep.Containers, 1000)
}
