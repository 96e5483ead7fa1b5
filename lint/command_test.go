package lint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/cmdline"
)

// noSetidPod is a root pod that adds only IPC_LOCK and runs ncclrun with
// the flags given (JSON words) before the command.
const noSetidPod = `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: trainer
      image: trainer:1
      command: ["/usr/local/bin/ncclrun", %s]
      securityContext:
        runAsUser: 0
        capabilities: {drop: ["ALL"], add: ["IPC_LOCK"]}
      resources: {limits: {nvidia.com/gpu: 8}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes: [{name: dshm, emptyDir: {medium: Memory}}]
`

func lintWords(t *testing.T, words ...string) Report {
	t.Helper()
	rep := Paths([]string{"-"}, strings.NewReader(fmt.Sprintf(noSetidPod, `"`+strings.Join(words, `", "`)+`"`)))
	require.Empty(t, rep.Errors)
	return rep
}

// TestEveryRunFlagBeforeUser: lint reads ncclrun's command line with
// ncclrun's own table, so whatever run flag comes before --user (its
// value included), the root pod without SETUID and SETGID is
// user-needs-setuid, as without it.
func TestEveryRunFlagBeforeUser(t *testing.T) {
	want := ids(lintWords(t, "--user", "1000:1000", "--", "torchrun", "train.py"))
	require.Contains(t, want, "user-needs-setuid@8")
	for _, f := range cmdline.For("run") {
		if f.Name == "user" {
			continue
		}
		v := "120s" // a duration; any string but one of a few words
		if f.Words != nil {
			v = f.Words[0][0]
		}
		for _, form := range [][]string{{"--" + f.Name, v}, {"--" + f.Name + "=" + v}, {"run", "--" + f.Name, v}} {
			if !f.TakesValue() {
				form[len(form)-1] = "--" + f.Name
				if len(form) == 2 {
					form = form[:1]
				}
			}
			args := append(form, "--user", "1000:1000", "--", "torchrun", "train.py")
			assert.Equal(t, want, ids(lintWords(t, args...)), "%q", args)
		}
	}
}

// TestCommandLines: what lint takes of ncclrun's command line.
func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args            string
		user, drop, mem string
		cmd             string
	}{
		{"--stop-grace 120s --user 1000:1000 -- torchrun x", "1000:1000", "", "", "torchrun x"},
		{"--on-degraded fail --memlock 64KiB torchrun x", "", "", "64KiB", "torchrun x"},
		{"run --drop-cap IPC_LOCK --drop-cap=SYS_ADMIN -- run", "", "IPC_LOCK,SYS_ADMIN", "", "run"},
		{"--misconfig-exit 90 --checkpoint-signal USR2 --user=1000 python3 t.py", "1000", "", "", "python3 t.py"},
		{"--bogus --user 1000 torchrun", "1000", "", "", "torchrun"},
		{"-- doctor", "", "", "", "doctor"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			l := parseLaunch(append([]string{"ncclrun"}, strings.Fields(tc.args)...), true)
			assert.Equal(t, tc.user, l.user)
			assert.Equal(t, tc.drop, l.dropCaps)
			assert.Equal(t, tc.mem, l.memlock)
			assert.Equal(t, tc.cmd, strings.Join(l.cmd, " "))
		})
	}
}

// TestNcclrunUsage: a word of ncclrun's flags that run refuses (not its
// flag, another command's flag, a value flag without its value) is
// ncclrun-usage at the command's line, since ncclrun would exit 2; run's
// own flags, before or after the word run, are not.
func TestNcclrunUsage(t *testing.T) {
	for _, c := range []struct {
		words []string
		bad   string
	}{
		{[]string{"--stop-grase", "120s", "--", "torchrun", "train.py"}, "--stop-grase"},
		{[]string{"run", "--json", "--", "torchrun", "train.py"}, "--json"},
		{[]string{"--json", "run", "--", "torchrun", "train.py"}, "--json"},
		{[]string{"--no-watch", "--stop-grace"}, "--stop-grace"},
		{[]string{"--stop-grace", "2 minutes", "--", "torchrun", "train.py"}, "--stop-grace=2 minutes"},
		{[]string{"--quiet=yes", "--", "torchrun", "train.py"}, "--quiet=yes"},
		{[]string{"--stop-grace", "120s", "run", "--no-watch", "--", "torchrun", "train.py"}, ""},
		{[]string{"torchrun", "--bogus", "train.py"}, ""}, // CMD's own flags
		{[]string{"--stop-grace=-1s", "--", "torchrun", "train.py"}, "--stop-grace=-1s"},
		// What the runtime or a shell replaces before ncclrun reads it.
		{[]string{"--hang-after", "$(HANG_AFTER)", "--", "torchrun", "train.py"}, ""},
		{[]string{"--stop-grace=${GRACE:-10m}", "--", "torchrun", "train.py"}, ""},
		{[]string{"--$(EXTRA)", "--", "torchrun", "train.py"}, ""},
		// Another command's flags, and help.
		{[]string{"--json", "doctor"}, ""},
		{[]string{"doctor", "--probe", "1MiB"}, ""},
		{[]string{"run", "--help"}, ""},
	} {
		t.Run(strings.Join(c.words, " "), func(t *testing.T) {
			rep := lintWords(t, c.words...)
			var got []Finding
			for _, f := range rep.Findings {
				if f.ID == IDNcclrunUsage {
					got = append(got, f)
				}
			}
			if c.bad == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, Error, got[0].Severity)
			assert.Equal(t, 8, got[0].Line)
			assert.Contains(t, got[0].Message, fmt.Sprintf("%q", c.bad))
		})
	}
}
