package preflight

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// RDMAPort is one port of an RDMA device as sysfs shows it.
type RDMAPort struct {
	Port      int    `json:"port"`
	State     string `json:"state"`                // "ACTIVE", "DOWN", ... ("4: ACTIVE" in sysfs)
	PhysState string `json:"phys_state,omitempty"` // "LinkUp", "Disabled", ...
	LinkLayer string `json:"link_layer"`           // "InfiniBand" or "Ethernet"
	Rate      string `json:"rate"`                 // "400 Gb/sec (4X NDR)"
}

// RDMADevice is one device of sys/class/infiniband with its verbs node
// (rdma.details.devices of docs/contract.md).
type RDMADevice struct {
	Name string `json:"name"`
	// Uverbs is the verbs character device's name ("uverbs0"), "" when
	// sysfs shows none (ib_uverbs not loaded).
	Uverbs string `json:"uverbs"`
	// UverbsPresent: dev/infiniband/<Uverbs> can be opened read-write
	// (live) or exists (snapshot).
	UverbsPresent bool       `json:"uverbs_present"`
	UverbsError   string     `json:"uverbs_error,omitempty"`
	Ports         []RDMAPort `json:"ports"`
}

// usable reports whether NCCL can use port p of d: verbs node present and
// port ACTIVE (NCCL skips other ports silently).
func (d RDMADevice) usable(p RDMAPort) bool { return d.UverbsPresent && p.State == "ACTIVE" }

// UsablePorts lists the ports of devs NCCL can open ("mlx5_0:1"): a verbs
// node in /dev/infiniband and the port ACTIVE.
func UsablePorts(devs []RDMADevice) []string {
	var out []string
	for _, d := range devs {
		for _, p := range d.Ports {
			if d.usable(p) {
				out = append(out, fmt.Sprintf("%s:%d", d.Name, p.Port))
			}
		}
	}
	return out
}

// parseSysfsState turns "4: ACTIVE" (sysfs port state and phys_state) into
// "ACTIVE"; a value without a number is returned trimmed.
func parseSysfsState(s string) (string, error) {
	s = strings.TrimSpace(s)
	num, name, ok := strings.Cut(s, ":")
	if !ok {
		if s == "" {
			return "", fmt.Errorf("%w: empty state", ErrMalformed)
		}
		return s, nil
	}
	if _, err := strconv.Atoi(strings.TrimSpace(num)); err != nil {
		return "", fmt.Errorf("%w: state %q", ErrMalformed, s)
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("%w: state %q", ErrMalformed, s)
	}
	return name, nil
}

// readRDMADevices lists sys/class/infiniband. found is false when the
// directory does not exist or is empty.
func readRDMADevices(s sysRoot) (devs []RDMADevice, problems []string, found bool) {
	names, err := s.list("sys/class/infiniband")
	if err != nil || len(names) == 0 {
		return nil, nil, false
	}
	verbsByDev := map[string]string{}
	if vs, err := s.list("sys/class/infiniband_verbs"); err == nil {
		for _, v := range vs {
			if !strings.HasPrefix(v, "uverbs") {
				continue
			}
			if ib, err := s.readAttr(path.Join("sys/class/infiniband_verbs", v, "ibdev")); err == nil {
				verbsByDev[ib] = v
			}
		}
	}
	for _, n := range names {
		base := path.Join("sys/class/infiniband", n)
		d := RDMADevice{Name: n, Ports: []RDMAPort{}}
		if vs, err := s.list(path.Join(base, "device/infiniband_verbs")); err == nil && len(vs) > 0 {
			d.Uverbs = vs[0]
		} else {
			d.Uverbs = verbsByDev[n]
		}
		if d.Uverbs != "" {
			dev := path.Join("dev/infiniband", d.Uverbs)
			if s.live {
				if err := openRW(s.path(dev)); err == nil {
					d.UverbsPresent = true
				} else {
					d.UverbsError = err.Error()
				}
			} else if s.exists(dev) {
				d.UverbsPresent = true
			} else {
				d.UverbsError = "dev/infiniband/" + d.Uverbs + " does not exist"
			}
		}
		ports, err := s.list(path.Join(base, "ports"))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", n, err))
		}
		for _, pn := range ports {
			num, err := strconv.Atoi(pn)
			if err != nil {
				continue
			}
			pb := path.Join(base, "ports", pn)
			p := RDMAPort{Port: num}
			if v, err := s.readAttr(pb + "/state"); err != nil {
				problems = append(problems, fmt.Sprintf("%s port %d: %v", n, num, err))
				p.State = "UNKNOWN"
			} else if p.State, err = parseSysfsState(v); err != nil {
				problems = append(problems, fmt.Sprintf("%s port %d: %v", n, num, err))
				p.State = "UNKNOWN"
			}
			if v, err := s.readAttr(pb + "/phys_state"); err == nil {
				p.PhysState, _ = parseSysfsState(v)
			}
			p.LinkLayer, _ = s.readAttr(pb + "/link_layer")
			p.Rate, _ = s.readAttr(pb + "/rate")
			d.Ports = append(d.Ports, p)
		}
		devs = append(devs, d)
	}
	return devs, problems, true
}

func rdmaFix(kind Platform) string {
	switch kind {
	case Kubernetes:
		return "request the RDMA devices from the node's RDMA device plugin (e.g. `resources: {limits: {rdma/ib: 1}}` or the resource name your plugin advertises, such as `rdma/rdma_shared_device_a`), or run the pod privileged; the device plugin mounts /dev/infiniband/uverbsN into the container"
	case Docker:
		return "pass the devices into the container: `docker run --device=/dev/infiniband` (all of them) or `--device=/dev/infiniband/uverbsN` for each HCA, plus `--device=/dev/infiniband/rdma_cm`"
	case Slurm:
		return "mount the devices into the container: pyxis `srun --container-mounts=/dev/infiniband` (enroot: ENROOT_MOUNT_HOME / a mount hook for /dev/infiniband)"
	default:
		return "load the verbs driver and its device nodes on the host (`modprobe ib_uverbs`; `ls /dev/infiniband`)"
	}
}

// checkRDMA returns the rdma check and the devices sysfs lists.
func checkRDMA(s sysRoot, env map[string]string, kind Platform) (Result, []RDMADevice) {
	devs, problems, found := readRDMADevices(s)
	d := map[string]any{}
	ibDisabled := env["NCCL_IB_DISABLE"] == "1"
	if !found {
		return Result{ID: IDRDMA, Status: Skip, Summary: "No RDMA devices in sys/class/infiniband: NCCL will use sockets",
			Details: map[string]any{"devices": []RDMADevice{}, "sysfs_devices": 0}}, nil
	}
	d["devices"] = devs
	d["rdma_cm"] = s.exists("dev/infiniband/rdma_cm")
	if len(problems) > 0 {
		d["problems"] = problems
	}
	var noVerbs, down, usable []string
	for _, dev := range devs {
		if !dev.UverbsPresent {
			noVerbs = append(noVerbs, dev.Name)
		}
		for _, p := range dev.Ports {
			if dev.usable(p) {
				usable = append(usable, fmt.Sprintf("%s:%d", dev.Name, p.Port))
			}
			if p.State != "ACTIVE" {
				down = append(down, fmt.Sprintf("%s:%d (%s)", dev.Name, p.Port, p.State))
			}
		}
	}
	r := Result{ID: IDRDMA, Status: OK, Details: d}
	var hcaWarn string
	if v, ok := env["NCCL_IB_HCA"]; ok && !ibDisabled {
		l := parseHCAList(v)
		d["nccl_ib_hca"] = l
		var matched []string
		for _, dev := range devs {
			for _, p := range dev.Ports {
				if dev.usable(p) && l.Match(dev.Name, p.Port) {
					matched = append(matched, fmt.Sprintf("%s:%d", dev.Name, p.Port))
				}
			}
		}
		d["nccl_ib_hca_matches"] = matched
		switch {
		case len(l.Problems) > 0:
			hcaWarn = fmt.Sprintf("NCCL_IB_HCA=%q is malformed (%s) and selects %s", v, l.Problems[0], listOrNothing(matched))
		case len(matched) == 0:
			hcaWarn = fmt.Sprintf("NCCL_IB_HCA=%q matches no usable HCA port (usable: %s)", v, listOrNothing(usable))
		}
	}
	switch {
	case ibDisabled:
		r.Summary = fmt.Sprintf("%d RDMA device(s) found but NCCL_IB_DISABLE=1: NCCL will use sockets", len(devs))
	case len(usable) == 0 && len(noVerbs) > 0:
		r.Status = Fail
		r.Summary = fmt.Sprintf("RDMA device(s) %s are in sysfs but their verbs nodes are missing from /dev/infiniband: NCCL will silently use sockets", strings.Join(noVerbs, ", "))
		r.Fix = rdmaFix(kind)
	case len(usable) == 0:
		r.Status = Fail
		r.Summary = fmt.Sprintf("No RDMA port is ACTIVE (%s): NCCL will silently use sockets", strings.Join(down, ", "))
		r.Fix = "check the cable and the switch port (`ibstat`, `ibv_devinfo`); a RoCE port needs its Ethernet link up"
	case len(noVerbs) > 0:
		r.Status = Warn
		r.Summary = fmt.Sprintf("RDMA device(s) %s have no verbs node in /dev/infiniband; NCCL can use %s", strings.Join(noVerbs, ", "), strings.Join(usable, ", "))
		r.Fix = rdmaFix(kind)
	case len(down) > 0:
		r.Status = Warn
		r.Summary = fmt.Sprintf("RDMA port(s) %s are not ACTIVE; NCCL will use %s", strings.Join(down, ", "), strings.Join(usable, ", "))
		r.Fix = "check the cable and the switch port (`ibstat`); ncclrun limits NCCL_IB_HCA to the usable ports unless you set it"
	default:
		r.Summary = fmt.Sprintf("%d RDMA device(s), all usable: %s", len(devs), strings.Join(usable, ", "))
	}
	if hcaWarn != "" {
		if r.Status == OK {
			r.Status = Warn
			r.Summary = hcaWarn
			r.Fix = "NCCL_IB_HCA syntax: `[^][=]hca[:port],...`, '^' then '=' once at the start; without '=' names are prefixes (mlx5_1 also matches mlx5_10); e.g. `NCCL_IB_HCA==mlx5_0:1,mlx5_1:1` or `NCCL_IB_HCA=^=mlx5_8,mlx5_14`"
		} else {
			r.Summary += "; " + lowerFirst(hcaWarn)
		}
	}
	return r, devs
}

func listOrNothing(l []string) string {
	if len(l) == 0 {
		return "nothing"
	}
	return strings.Join(l, ", ")
}
