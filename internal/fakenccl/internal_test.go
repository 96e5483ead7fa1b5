package fakenccl

import (
	"bytes"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExitStatus(t *testing.T) {
	tests := []struct {
		script string
		want   int
	}{
		{"exit 0", 0}, {"exit 1", 1}, {"exit 77", 77},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	}
	for _, tc := range tests {
		c := exec.Command("sh", "-c", tc.script)
		err := c.Run()
		assert.Equal(t, tc.want, exitStatus(c, err), tc.script)
	}
}

func TestParseVersion(t *testing.T) {
	v, err := parseVersion("2.21.5")
	require.NoError(t, err)
	assert.Equal(t, version{2, 21, 5}, v)
	assert.True(t, v.atLeast(2, 21, 5))
	assert.True(t, v.atLeast(2, 13, 0))
	assert.False(t, v.atLeast(2, 21, 6))
	assert.False(t, v.atLeast(2, 26, 0))
	for _, bad := range []string{"", "2.21", "2.x.1", "1.9.0", "2.3.7", "2.21.5.1", "-2.1.1"} {
		_, err := parseVersion(bad)
		assert.Error(t, err, bad)
	}
}

func TestRegMrLocation(t *testing.T) {
	tests := map[string]struct {
		call string
		line int
	}{
		"2.11.4": {"ibv_reg_mr", 252}, "2.12.12": {"ibv_reg_mr_iova2", 278}, "2.13.4": {"ibv_reg_mr_iova2", 283},
		"2.17.1": {"ibv_reg_mr_iova2", 278}, "2.18.6": {"ibv_reg_mr_iova2", 150}, "2.21.5": {"ibv_reg_mr_iova2", 169},
		"2.23.4": {"ibv_reg_mr_iova2", 169}, "2.26.2": {"ibv_reg_mr_iova2", 178}, "2.27.3": {"ibv_reg_mr_iova2", 182},
		"2.27.7": {"ibv_reg_mr_iova2", 188}, "2.28.3": {"ibv_reg_mr_iova2", 189}, "2.29.3": {"ibv_reg_mr_iova2", 194},
		"2.30.4": {"ibv_reg_mr_iova2", 197}, "2.30.7": {"ibv_reg_mr_iova2", 212},
	}
	for vs, want := range tests {
		v, err := parseVersion(vs)
		require.NoError(t, err)
		loc := regMrLocation(v)
		assert.Equal(t, want.call, loc.call, vs)
		assert.Equal(t, want.line, loc.line, vs)
		assert.Equal(t, "misc/ibvwrap.cc", loc.file, vs)
	}
}

func TestDebugLevel(t *testing.T) {
	for in, want := range map[string]int{"": levelNone, "bogus": levelNone, "VERSION": levelVersion,
		"warn": levelWarn, "Info": levelInfo, "ABORT": levelAbort, "TRACE": levelTrace} {
		assert.Equal(t, want, debugLevel(in), in)
	}
}

func TestLogHost(t *testing.T) {
	assert.Equal(t, "node-a", logHost("node-a.cluster.local"))
	assert.Equal(t, "a-b-c", logHost("a%b/c"))
	assert.Equal(t, "plain", logHost("plain"))
}

func TestStrerror(t *testing.T) {
	assert.Equal(t, "Cannot allocate memory", strerror(syscall.ENOMEM))
	assert.Equal(t, "Operation not permitted", strerror(syscall.EPERM))
	assert.Equal(t, "No space left on device", strerror(syscall.ENOSPC))
}

func TestLoggerFormats(t *testing.T) {
	saved := now
	now = func() time.Time { return time.Date(2025, 6, 3, 16, 12, 9, 0, time.Local) }
	t.Cleanup(func() { now = saved })
	tests := []struct {
		name  string
		v     version
		level int
		ts    string
		do    func(l *logger)
		want  string
	}{
		{"warn 2.21", version{2, 21, 5}, levelWarn, "", func(l *logger) { l.warn("misc/ibvwrap.cc", 169, "f", "boom") },
			"\nh:10:11 [3] misc/ibvwrap.cc:169 NCCL WARN boom\n"},
		{"warn 2.26 timestamp", version{2, 26, 2}, levelWarn, "[%F %T] ", func(l *logger) { l.warn("x.cc", 1, "f", "boom") },
			"\n[2025-06-03 16:12:09] h:10:11 [3] x.cc:1 NCCL WARN boom\n"},
		{"warn 2.30.7 function", version{2, 30, 7}, levelInfo, "[%F_%T] ", func(l *logger) { l.warn("x.cc", 1, "f", "boom") },
			"\n[2025-06-03 16:12:09] h:10:11 [3] x.cc:1 (f) NCCL WARN boom\n"},
		{"warn hidden when unset", version{2, 21, 5}, levelNone, "", func(l *logger) { l.warn("x.cc", 1, "f", "boom") }, ""},
		{"info hidden at WARN", version{2, 21, 5}, levelWarn, "", func(l *logger) { l.info(subInit, "hello %d", 1) }, ""},
		{"info", version{2, 26, 2}, levelInfo, "[%F %T] ", func(l *logger) { l.info(subInit, "hello %d", 1) }, "h:10:11 [3] NCCL INFO hello 1\n"},
		{"version bare at VERSION", version{2, 21, 5}, levelVersion, "", func(l *logger) { l.version("NCCL version %s", "x") }, "NCCL version x\n"},
		{"version as INFO", version{2, 21, 5}, levelTrace, "", func(l *logger) { l.version("NCCL version %s", "x") }, "h:10:11 [3] NCCL INFO NCCL version x\n"},
		{"version hidden when unset", version{2, 21, 5}, levelNone, "", func(l *logger) { l.version("NCCL version %s", "x") }, ""},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		l := &logger{w: &b, level: tc.level, mask: subAll, v: tc.v, host: "h", pid: 10, tid: 11, dev: 3, tsFmt: tc.ts}
		tc.do(l)
		assert.Equal(t, tc.want, b.String(), tc.name)
	}
}

func TestDebugMask(t *testing.T) {
	for _, tc := range []struct {
		s    string
		set  bool
		want uint64
	}{
		{"", false, subInit | subBootstrap | subEnv},
		{"INIT,NET", true, subInit | subNet},
		{"init,net", true, subInit | subNet},
		{"NET,BOGUS", true, subNet},
		{"^NET", true, subAll &^ subNet},
		{"ALL", true, subAll},
		{"^ALL", true, 0},
		{"", true, 0},
	} {
		assert.Equal(t, tc.want, debugMask(tc.s, tc.set), "%q set=%v", tc.s, tc.set)
	}
}

func TestDebugFileName(t *testing.T) {
	for pattern, want := range map[string]string{
		"/tmp/nccl.%h.%p":  "/tmp/nccl.h.10",
		"/tmp/%%h-%x":      "/tmp/%h-%x",
		"/tmp/nccl.log.%":  "/tmp/nccl.log.%",
		"/tmp/%h/%p/%h.%p": "/tmp/h/10/h.10",
		"":                 "",
	} {
		assert.Equal(t, want, debugFileName(pattern, "h", 10), pattern)
	}
}
