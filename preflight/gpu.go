package preflight

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

// The regular expressions are compiled on first use (internal/lazy): a
// package init runs on every start of every command, and a start of `run`
// on a machine without a GPU never uses them.
var (
	driverVerRe   = &lazy.Regexp{Expr: `Kernel Module(?: for [A-Za-z0-9_]+)?\s+([0-9]+(?:\.[0-9]+)+)`}
	kernelVerRe   = &lazy.Regexp{Expr: `^([0-9]+)\.([0-9]+)`}
	anyVersionRe  = &lazy.Regexp{Expr: `[0-9]+(?:\.[0-9]+)+`}
	peermemStatic = []string{"sys/kernel/mm/memory_peers/nv_mem/version", "sys/kernel/mm/memory_peers/nv_mem_nc/version"}
)

// isNvidiaDev reports whether a /dev name is a GPU's device node,
// nvidiaN: `^nvidia[0-9]+$` (every name of /dev is tested on every start).
func isNvidiaDev(name string) bool {
	n, ok := strings.CutPrefix(name, "nvidia")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// gpuFacts are the local GPUs as the device nodes and the driver show them.
type gpuFacts struct {
	devices  []string // dev/nvidiaN
	procGPUs int      // proc/driver/nvidia/gpus/*
	driver   string
}

// count is the number of GPUs this container can use: its device nodes,
// else what the driver lists.
func (g gpuFacts) count() int {
	if len(g.devices) > 0 {
		return len(g.devices)
	}
	return g.procGPUs
}

// parseDriverVersion finds the driver version in proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..." or
// "... Open Kernel Module for x86_64  570.86.15 ...").
func parseDriverVersion(s string) (string, error) {
	if m := driverVerRe.Get().FindStringSubmatch(s); m != nil {
		return m[1], nil
	}
	first, _, _ := strings.Cut(s, "\n")
	if strings.HasPrefix(first, "NVRM") {
		if v := anyVersionRe.Get().FindString(first); v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("%w: no driver version in %q", ErrMalformed, first)
}

func readGPUs(s sysRoot) (gpuFacts, []string) {
	var g gpuFacts
	var problems []string
	if names, err := s.list("dev", isNvidiaDev); err == nil {
		g.devices = names
	}
	if names, err := s.list("proc/driver/nvidia/gpus"); err == nil {
		g.procGPUs = len(names)
	}
	if v, err := s.readAttr("proc/driver/nvidia/version"); err == nil {
		if g.driver, err = parseDriverVersion(v); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return g, problems
}

func checkGPU(g gpuFacts, problems []string) Result {
	if len(g.devices) == 0 && g.procGPUs == 0 {
		return Result{ID: IDGPU, Status: Skip, Summary: "No NVIDIA GPU: no dev/nvidiaN device and no proc/driver/nvidia/gpus"}
	}
	d := map[string]any{"devices": g.devices, "count": g.count(), "driver_gpus": g.procGPUs}
	if g.driver != "" {
		d["driver_version"] = g.driver
	}
	if len(problems) > 0 {
		d["problems"] = problems
	}
	r := Result{ID: IDGPU, Status: OK, Details: d}
	switch {
	case len(g.devices) == 0:
		r.Status = Warn
		r.Summary = fmt.Sprintf("The driver lists %d GPU(s) but no dev/nvidiaN device node is present: CUDA will find no GPU", g.procGPUs)
		r.Fix = "run the container with the NVIDIA runtime (`docker run --gpus all`; Kubernetes: `resources: {limits: {nvidia.com/gpu: N}}`)"
	case g.driver == "":
		r.Summary = fmt.Sprintf("%d GPU device node(s) (%s); driver version unknown", len(g.devices), strings.Join(g.devices, ", "))
	default:
		r.Summary = fmt.Sprintf("%d GPU(s) (%s), driver %s", len(g.devices), strings.Join(g.devices, ", "), g.driver)
	}
	return r
}

// kernelAtLeast reports whether a kernel release ("5.15.0-91-generic") is
// at least major.minor.
func kernelAtLeast(release string, major, minor int) (bool, error) {
	m := kernelVerRe.Get().FindStringSubmatch(strings.TrimSpace(release))
	if m == nil {
		return false, fmt.Errorf("%w: kernel release %q", ErrMalformed, release)
	}
	ma, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	return ma > major || (ma == major && mi >= minor), nil
}

// checkGPUDirect reports what NCCL's GPUDirect RDMA detection will find
// (transport/net_ib/gdr.cc, nccl-messages.md §3.7).
//
// The facts are nil when it does not apply.
func checkGPUDirect(s sysRoot, g gpuFacts, haveRDMA bool) (Result, *GPUDirectFacts) {
	if g.count() == 0 {
		return Result{ID: IDGPUDirect, Status: Skip, Summary: "No GPU: GPUDirect RDMA does not apply"}, nil
	}
	if !haveRDMA {
		return Result{ID: IDGPUDirect, Status: Skip, Summary: "No RDMA device: GPUDirect RDMA does not apply"}, nil
	}
	d := map[string]any{}
	nvMem := ""
	for _, p := range peermemStatic {
		if v, err := s.readAttr(p); err == nil {
			key := strings.Split(p, "/")[4] // nv_mem or nv_mem_nc
			d[key] = v
			if nvMem == "" {
				nvMem = key
			}
		}
	}
	peermem := ""
	if s.exists("sys/module/nvidia_peermem") {
		peermem = "loaded"
		if v, err := s.readAttr("sys/module/nvidia_peermem/version"); err == nil {
			peermem = v
		}
		d["nvidia_peermem"] = peermem
	}
	rel, err := s.readAttr("proc/sys/kernel/osrelease")
	dmabuf := false
	if err == nil {
		d["kernel_release"] = rel
		if ok, err := kernelAtLeast(rel, 5, 12); err == nil {
			dmabuf = ok
		}
	}
	d["dmabuf_kernel"] = dmabuf
	r := Result{ID: IDGPUDirect, Status: OK, Details: d}
	switch {
	case nvMem != "":
		r.Summary = fmt.Sprintf("GPUDirect RDMA through the peer-memory module (sys/kernel/mm/memory_peers/%s): every NCCL version detects it", nvMem)
	case peermem != "":
		r.Summary = "GPUDirect RDMA through nvidia_peermem: NCCL 2.23+ detects it (sys/module/nvidia_peermem), NCCL 2.19-2.22 do not and fall back to DMA-BUF or host staging"
		if dmabuf {
			r.Summary += fmt.Sprintf("; DMA-BUF is also possible (kernel %s)", rel)
		}
	case dmabuf:
		r.Summary = fmt.Sprintf("No peer-memory module, but kernel %s supports DMA-BUF: NCCL uses GPUDirect RDMA through DMA-BUF when the CUDA driver (>= 11.7) and rdma-core support it", rel)
	default:
		r.Status = Warn
		kr := rel
		if kr == "" {
			kr = "unknown"
		}
		r.Summary = fmt.Sprintf("Neither nvidia_peermem/nv_peer_mem nor DMA-BUF (kernel %s, needs 5.12): NCCL stages network traffic through host memory", kr)
		r.Fix = "load the peer-memory module on the host (`modprobe nvidia-peermem`; it must be loaded on the host, not in the container), or run a kernel >= 5.12 for DMA-BUF"
	}
	return r, &GPUDirectFacts{NvMem: nvMem != "", NvidiaPeermem: peermem != "", DMABuf: dmabuf}
}
