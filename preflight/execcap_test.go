package preflight

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/pinrule"
)

// vfsCap builds a security.capability value as setcap writes it.
func vfsCap(rev uint32, eff bool, prm, inh uint32, rootid uint32) []byte {
	magic := rev
	if eff {
		magic |= vfsCapEffective
	}
	n := map[uint32]int{vfsCapRevision1: 12, vfsCapRevision2: 20, vfsCapRevision3: 24}[rev]
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint32(b[4:], prm)
	binary.LittleEndian.PutUint32(b[8:], inh)
	if n == 24 {
		binary.LittleEndian.PutUint32(b[20:], rootid)
	}
	return b
}

func TestParseVFSCap(t *testing.T) {
	const ipc, netRaw = 1 << capIPCLock, 1 << 13
	cases := []struct {
		name string
		in   []byte
		want pinrule.ExecFile
		err  bool
	}{
		{"cap_ipc_lock+p (v2)", vfsCap(vfsCapRevision2, false, ipc, 0, 0), pinrule.ExecFile{FileCap: true, IPCLockPermitted: true}, false},
		{"cap_ipc_lock+ep (v2)", vfsCap(vfsCapRevision2, true, ipc, 0, 0), pinrule.ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, false},
		{"cap_ipc_lock+ei (v2)", vfsCap(vfsCapRevision2, true, 0, ipc, 0), pinrule.ExecFile{FileCap: true, Effective: true, IPCLockInheritable: true}, false},
		{"cap_net_raw+ep (v2)", vfsCap(vfsCapRevision2, true, netRaw, 0, 0), pinrule.ExecFile{FileCap: true, Effective: true}, false},
		{"empty capability sets still make the file privileged", vfsCap(vfsCapRevision2, false, 0, 0, 0), pinrule.ExecFile{FileCap: true}, false},
		{"v1", vfsCap(vfsCapRevision1, true, ipc, 0, 0), pinrule.ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, false},
		{"v3 of the initial namespace's root", vfsCap(vfsCapRevision3, false, ipc, 0, 0), pinrule.ExecFile{FileCap: true, IPCLockPermitted: true}, false},
		{"v3 of another namespace's root is ignored", vfsCap(vfsCapRevision3, true, ipc, 0, 100000), pinrule.ExecFile{}, false},
		{"short", []byte{1, 0}, pinrule.ExecFile{}, true},
		{"size not the revision's", append(vfsCap(vfsCapRevision2, false, ipc, 0, 0), 0), pinrule.ExecFile{}, true},
		{"unknown revision", func() []byte { b := vfsCap(vfsCapRevision2, false, ipc, 0, 0); b[3] = 9; return b }(), pinrule.ExecFile{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVFSCap(tc.in)
			if tc.err {
				require.ErrorIs(t, err, errVFSCap)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestShebang(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"#!/bin/sh\nexec x\n", "/bin/sh", true},
		{"#! /usr/bin/env python3\n", "/usr/bin/env", true},
		{"#!\t/bin/bash -e\n", "/bin/bash", true},
		{"#!/bin/sh", "/bin/sh", true},
		{"#!/bin/sh\r\n", "/bin/sh\r", true}, // the kernel keeps the CR: exec fails, as it will
		{"#!\n", "", false},
		{"\x7fELF\x02\x01", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		got, ok := shebang([]byte(tc.in))
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}
