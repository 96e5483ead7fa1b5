package main

import (

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/preflight"
)

// transportFacts adds what preflight saw of the transports NCCL could use:
// the RDMA ports usable from CMD's view and the GPUDirect RDMA
// peer-memory module on the host. With them a "No device found" or a
// socket/tcp fallback on a node with usable ports is a certain
// degraded-transport, and "GPU Direct RDMA Disabled" names its cause.
func transportFacts(r preflight.Report, f *diagnosis.Facts) {
	f.RDMAPorts = preflight.UsablePorts(r.Facts.RDMA)
	if g := r.Facts.GPUDirect; g != nil {
		f.GDRModule = gdrModule(*g)
	}
}

// gdrModule names the peer-memory module the gpudirect check found.
func gdrModule(g preflight.GPUDirectFacts) string {
	switch {
	case g.NvMem:
		return diagnosis.GDRModuleNvMem
	case g.NvidiaPeermem:
		return diagnosis.GDRModuleNvidiaPeermem
	}
	return diagnosis.GDRModuleNone
}
