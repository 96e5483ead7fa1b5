package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/preflight"
)

func TestTransportFacts(t *testing.T) {
	dev := func(name string, uverbs bool, states ...string) preflight.RDMADevice {
		d := preflight.RDMADevice{Name: name, UverbsPresent: uverbs}
		for i, s := range states {
			d.Ports = append(d.Ports, preflight.RDMAPort{Port: i + 1, State: s})
		}
		return d
	}
	tests := []struct {
		name   string
		facts  preflight.Facts
		ports  []string
		module string
	}{
		{"nothing checked", preflight.Facts{}, nil, ""},
		{"usable and unusable ports", preflight.Facts{RDMA: []preflight.RDMADevice{
			dev("mlx5_0", true, "ACTIVE", "DOWN"), dev("mlx5_1", false, "ACTIVE"), dev("mlx5_2", true, "ACTIVE")}},
			[]string{"mlx5_0:1", "mlx5_2:1"}, ""},
		{"no devices", preflight.Facts{NoRDMA: true}, nil, ""},
		{"gpudirect skipped", preflight.Facts{GPUDirect: nil}, nil, ""},
		{"nv_peer_mem", preflight.Facts{GPUDirect: &preflight.GPUDirectFacts{NvMem: true, NvidiaPeermem: true}}, nil, diagnosis.GDRModuleNvMem},
		{"nvidia_peermem only", preflight.Facts{GPUDirect: &preflight.GPUDirectFacts{NvidiaPeermem: true}}, nil, diagnosis.GDRModuleNvidiaPeermem},
		{"no module", preflight.Facts{GPUDirect: &preflight.GPUDirectFacts{DMABuf: false}}, nil, diagnosis.GDRModuleNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := facts(preflight.Report{Facts: tt.facts}, 0)
			assert.Equal(t, tt.ports, f.RDMAPorts)
			assert.Equal(t, tt.module, f.GDRModule)
		})
	}
}

// TestTransportFactsFromTrees: the preflight testdata trees give the
// facts their names promise.
func TestTransportFactsFromTrees(t *testing.T) {
	for _, tt := range []struct {
		tree   string
		usable bool
		module string
		first  string // first id for "No device found" in a multi-node job; "" none
	}{
		{"ib-node", true, diagnosis.GDRModuleNvidiaPeermem, "degraded-transport"},
		{"roce-node", true, diagnosis.GDRModuleNvMem, "degraded-transport"},
		{"no-peermem", true, diagnosis.GDRModuleNone, "degraded-transport"},
		{"docker-root", false, "", ""}, // no RDMA device at all: the INFO line is expected
	} {
		t.Run(tt.tree, func(t *testing.T) {
			root := filepath.Join("..", "..", "preflight", "testdata", tt.tree)
			r := preflight.Run(context.Background(), preflight.Options{Root: root, Env: []string{}})
			f := facts(r, 0)
			assert.Equal(t, tt.usable, len(f.RDMAPorts) > 0, "ports %v", f.RDMAPorts)
			if tt.module != "" {
				assert.Equal(t, tt.module, f.GDRModule)
			}
			// The line is this host's: run's facts are (facts sets Host).
			host, _, _ := strings.Cut(f.Host, ".")
			m := diagnosis.NewMatcher(f)
			m.Feed([]byte(host + ":1:2 [0] NCCL INFO NET/IB : No device found."))
			ds := m.Diagnoses()
			if tt.first == "" {
				assert.Empty(t, ds)
				return
			}
			if assert.NotEmpty(t, ds) {
				assert.Equal(t, tt.first, ds[0].ID)
				assert.Equal(t, diagnosis.Certain, ds[0].Certainty)
			}
		})
	}
}

// TestFactsSlurmSource: the matcher's memlock words carry where a Slurm
// task's limit came from, and that source's fix where doctor gave none.
func TestFactsSlurmSource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mem     preflight.MemlockFacts
		seen    string
		wantFix string
	}{
		{"no source", preflight.MemlockFacts{Fix: "f"}, "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not effective", "f"},
		{"source, not judged", preflight.MemlockFacts{Source: "the limit is slurmd's own", SourceFix: "sf"},
			"RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not effective; the limit is slurmd's own", "sf"},
		{"source, judged", preflight.MemlockFacts{Fix: "f", Source: "s", SourceFix: "sf"},
			"RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not effective; s", "f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := preflight.Report{Command: preflight.CommandState{UID: 1000, Memlock: preflight.Rlimit{Soft: 64 << 10, Hard: 64 << 10}}}
			r.Facts.Memlock = tc.mem
			f := facts(r, 0)
			assert.Equal(t, tc.seen, f.Seen)
			assert.Equal(t, tc.wantFix, f.MemlockFix)
		})
	}
}

// TestIBDisabledFact: NCCL_IB_DISABLE=1 in CMD's environment, run's
// --no-ib (which run's composed environment carries) or NCCL's
// configuration file turns IB off for the matcher; the environment wins
// over the file, as in NCCL.
func TestIBDisabledFact(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		conf    map[string]string
		noIB    bool
		want    bool
	}{
		{"nothing", nil, nil, false, false},
		{"environment", []string{"NCCL_IB_DISABLE=1"}, nil, false, true},
		{"environment 0", []string{"NCCL_IB_DISABLE=0"}, nil, false, false},
		{"--no-ib", nil, nil, true, true},
		{"configuration file", nil, map[string]string{"NCCL_IB_DISABLE": "1"}, false, true},
		{"environment wins over the file", []string{"NCCL_IB_DISABLE=0"}, map[string]string{"NCCL_IB_DISABLE": "1"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings{ncclIB: true, noIB: tt.noIB}
			env, _ := s.composeEnv(tt.environ, preflight.Report{}, nil)
			assert.Equal(t, tt.want, ibDisabled(env, tt.conf))
		})
	}
}
