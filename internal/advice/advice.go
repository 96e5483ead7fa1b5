// Package advice holds every fix text ncclrun gives for pinning memory and
// shared memory, once, keyed by (Fix, Platform). preflight's checks, the
// diagnosis catalog (through {advice:NAME} placeholders) and lint's
// findings all take their words from here, so the advice cannot drift
// between doctor, run's diagnosis and a lint of the manifest.
//
// Standard library only: diagnosis may import it.
package advice

import (
	"fmt"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

// Platform is where ncclrun runs, as preflight's environment check decides
// and as lint reads it from a manifest's kind.
type Platform string

// The platforms of docs/preflight.md ("environment").
const (
	Kubernetes Platform = "kubernetes"
	Docker     Platform = "docker"
	Slurm      Platform = "slurm"
	Host       Platform = "host"
)

// Platforms lists every platform in the order AllPlatforms writes them.
var Platforms = []Platform{Docker, Kubernetes, Slurm, Host}

// Fix names one remedy. Its text depends on the platform and, for some, on
// the user CMD runs as (Who).
type Fix string

// The fixes.
const (
	// RaiseMemlock: raise RLIMIT_MEMLOCK where the container or job is
	// started (docs/research/capabilities.md §5).
	RaiseMemlock Fix = "raise-memlock"
	// Ambient: let ncclrun hand CAP_IPC_LOCK to a non-root CMD (way a:
	// root + ncclrun --user; way b: the +p file capability).
	Ambient Fix = "ambient"
	// RootUser: way (a) only, root + ncclrun --user (for a state where the
	// file capability is already there and no_new_privs defeats it).
	RootUser Fix = "root-user"
	// AddIPCLock: add the capability to a root container.
	AddIPCLock Fix = "add-ipc-lock"
	// AddSetid: add SETUID and SETGID so ncclrun --user can switch users.
	AddSetid Fix = "add-setid"
	// ExecForm: start ncclrun as the container's own process, not through
	// a shell, so no_new_privs keeps its file capability.
	ExecForm Fix = "exec-form"
	// ShmSize: give the container a bigger /dev/shm.
	ShmSize Fix = "shm-size"
	// PodMemlock: a per-pod memlock limit set by the runtime (containerd
	// or CRI-O NRI with the ulimit-adjuster plugin), for namespaces where
	// no capability may be added.
	PodMemlock Fix = "pod-memlock"
	// UserNamespace: leave the user namespace (capabilities there do not
	// count for RLIMIT_MEMLOCK).
	UserNamespace Fix = "user-namespace"
	// PrivilegedNamespace: a namespace whose Pod Security level admits
	// added capabilities.
	PrivilegedNamespace Fix = "privileged-namespace"
	// DriverUpgrade: make the node's NVIDIA driver fit the CUDA runtime
	// the job was built with (upgrade it, or run a build for an older
	// CUDA), and let the node's libcuda.so, not a copy in the image, load.
	DriverUpgrade Fix = "driver-upgrade"
	// FabricManager: bring up the NVSwitch fabric (nvidia-fabricmanager)
	// and, for multi-node NVLink, IMEX on the node.
	FabricManager Fix = "fabric-manager"
	// CRIOUlimits: CRI-O's own default_ulimits, the first way where CRI-O
	// runs with the systemd cgroup manager (its containers' transient
	// scopes may not take crio.service's LimitMEMLOCK). One text for every
	// platform: it is about the node's runtime.
	CRIOUlimits Fix = "crio-ulimits"
	// SlurmdMemlock: a Slurm task's limit is slurmd's own; raise it in
	// slurmd's systemd unit. One text for every platform: it is about
	// the node's slurmd.
	SlurmdMemlock Fix = "slurmd-memlock"
	// SlurmPropagation: a Slurm task's soft limit is the submitting
	// shell's (PropagateResourceLimits); stop propagating MEMLOCK.
	SlurmPropagation Fix = "slurm-propagation"
)

// Who is the user CMD runs as, for fixes that name it.
type Who struct {
	UID, GID int
	// Unknown: the uid is the image's (a manifest with runAsNonRoot and no
	// runAsUser); texts say UID:GID.
	Unknown bool
}

func (w Who) ids() string {
	if w.Unknown {
		return "UID:GID"
	}
	return fmt.Sprintf("%d:%d", w.UID, w.GID)
}

// Text returns fix f for platform p. An unknown platform gets the host's
// text; an unknown fix gets "".
func Text(f Fix, p Platform, w Who) string {
	switch f {
	case RaiseMemlock:
		return raiseMemlock(p)
	case Ambient:
		return ambient(p, w)
	case RootUser:
		switch p {
		case Kubernetes:
			return fmt.Sprintf("run the container as root with `securityContext: {runAsUser: 0, allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [IPC_LOCK, SETUID, SETGID]}}` and start `ncclrun --user=%s -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability", w.ids())
		default:
			return fmt.Sprintf("run the container as root with `--cap-add IPC_LOCK` (and SETUID, SETGID if you drop ALL) and start `ncclrun --user=%s -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability", w.ids())
		}
	case AddIPCLock:
		switch p {
		case Kubernetes:
			return "add the capability to the root container: `securityContext: {capabilities: {add: [IPC_LOCK]}}`"
		case Docker:
			return "add the capability to the root container: `docker run --cap-add IPC_LOCK`"
		default:
			return "give the process CAP_IPC_LOCK"
		}
	case AddSetid:
		return "add SETUID and SETGID to the container's capabilities (Kubernetes: `capabilities.add: [IPC_LOCK, SETUID, SETGID]`)"
	case ExecForm:
		switch p {
		case Docker:
			return "Docker gives a non-root user's added capabilities to the bounding set only, so under `--security-opt no-new-privileges` the file capability on ncclrun is ignored however ncclrun is started: drop `no-new-privileges`"
		default:
			return "make ncclrun the container's command in exec form (`command: [\"/usr/local/bin/ncclrun\", \"--\", ...]`, no `sh -c` in between: runc then execs it holding CAP_IPC_LOCK in its permitted set, which no_new_privs keeps) or set `allowPrivilegeEscalation: false` to true"
		}
	case ShmSize:
		switch p {
		case Kubernetes:
			return "mount a memory-backed emptyDir at /dev/shm: `volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}]` and `volumeMounts: [{name: dshm, mountPath: /dev/shm}]`"
		case Docker:
			return "start the container with `docker run --shm-size=1g` (or `--ipc=host`); compose: `shm_size: 1gb`"
		case Slurm:
			return "give the job's container a larger /dev/shm (enroot/pyxis use the host's /dev/shm unless a mount hook replaces it; check `df -h /dev/shm` on the node)"
		default:
			return "grow /dev/shm: `mount -o remount,size=1G /dev/shm` (persist it in /etc/fstab)"
		}
	case UserNamespace:
		return "set the limit where the container is started, or leave the user namespace (Kubernetes `hostUsers: true`; rootful Docker or Podman)"
	case PrivilegedNamespace:
		return "Pod Security Admission's baseline and restricted levels reject an added IPC_LOCK: add no capability and let the runtime set the pod's limit (the containerd/nri ulimit-adjuster annotation, admitted under `restricted`) or the node's; only where the pod must add the capability, run it in a namespace labelled `pod-security.kubernetes.io/enforce: privileged`"
	case DriverUpgrade:
		switch p {
		case Kubernetes:
			return "upgrade the NVIDIA driver on the GPU nodes (the GPU Operator's `driver.version`, or the node image) to one whose `nvidia-smi` \"CUDA Version\" is at least the image's CUDA, or use an image built for an older CUDA; the image must not ship its own libcuda.so (the NVIDIA container toolkit mounts the node's)"
		case Docker:
			return "upgrade the host's NVIDIA driver to one whose `nvidia-smi` \"CUDA Version\" is at least the image's CUDA, or run an image built for an older CUDA; remove any libcuda.so copied into the image so that the NVIDIA container toolkit mounts the host's"
		case Slurm:
			return "run on nodes whose driver supports the job's CUDA (`srun nvidia-smi` prints the newest CUDA Version the driver supports; ask the admins for a driver upgrade or a partition with one), or load a CUDA module / container built for an older CUDA"
		default:
			return "install an NVIDIA driver at least as new as the CUDA runtime needs (`nvidia-smi` prints the newest CUDA Version it supports) and reboot, or install a PyTorch/NCCL build for an older CUDA; on data-center GPUs the cuda-compat package is the alternative"
		}
	case FabricManager:
		switch p {
		case Kubernetes:
			return "on the NVSwitch nodes, run nvidia-fabricmanager at the driver's exact version (the GPU Operator deploys it with the driver; check `nvidia-smi -q | grep -A2 Fabric` shows State Completed), reset the GPUs after a fabric-manager restart, and for multi-node NVLink give the pod its IMEX channel (the NVIDIA DRA driver's ComputeDomain)"
		case Docker:
			return "on the host, `systemctl enable --now nvidia-fabricmanager` at the driver's exact version (`nvidia-smi -q | grep -A2 Fabric` shows State Completed), reset the GPUs after a fabric-manager restart, and for multi-node NVLink run nvidia-imex and pass `--device /dev/nvidia-caps-imex-channels/channel0`"
		case Slurm:
			return "ask the admins to check nvidia-fabricmanager (and, for multi-node NVLink, the IMEX daemon Slurm starts per job) on the job's nodes: `nvidia-smi -q | grep -A2 Fabric` must show State Completed"
		default:
			return "`systemctl enable --now nvidia-fabricmanager` at the driver's exact version, check `nvidia-smi -q | grep -A2 Fabric` shows State Completed, reset the GPUs (or reboot) after a fabric-manager restart; for multi-node NVLink run nvidia-imex with the nodes in its config and check `nvidia-imex-ctl -N`"
		}
	case CRIOUlimits:
		return "CRI-O with the systemd cgroup manager starts each container in a transient systemd scope, which may take its limits from systemd's DefaultLimitMEMLOCK rather than crio.service's LimitMEMLOCK (cri-o/cri-o#10006, disputed), so set the limit in CRI-O itself first: `default_ulimits = [\"memlock=-1:-1\"]` in the [crio.runtime] table of /etc/crio/crio.conf (or a file in /etc/crio/crio.conf.d/), `systemctl restart crio`, then run `ncclrun doctor` in a new pod to see the limit it really gets"
	case SlurmdMemlock:
		return "start slurmd with an unlimited memlock limit on every node: `systemctl edit slurmd`, add `[Service]` and `LimitMEMLOCK=infinity`, then `systemctl restart slurmd` (steps started before keep the old limit; check: `grep 'locked memory' /proc/$(pidof slurmd)/limits`); and set `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf (`scontrol reconfigure`) so that a login node's limit does not replace it"
	case SlurmPropagation:
		return "set `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf on every node and run `scontrol reconfigure`, so that tasks keep slurmd's limit instead of the submitting shell's (check: `scontrol show config | grep -i propagate`); for one job, `srun --propagate=NONE`, or `ulimit -l unlimited` in the submitting shell before sbatch or srun where its hard limit allows; slurmd itself needs `LimitMEMLOCK=infinity` in its systemd unit"
	case PodMemlock:
		return "where no capability may be added (Pod Security `baseline` or `restricted`), let the runtime set the pod's limit: containerd >= 1.7 (NRI enabled; on by default from 2.0) or CRI-O >= 1.26 with NRI, the containerd/nri ulimit-adjuster plugin as a DaemonSet, and the pod annotation `ulimits.noderesource.dev/container.<container name>: '[{type: RLIMIT_MEMLOCK, soft: 18446744073709551615, hard: 18446744073709551615}]'` (examples/kubernetes/d-nri-ulimit/)"
	}
	return ""
}

func raiseMemlock(p Platform) string {
	switch p {
	case Kubernetes:
		return "Kubernetes has no ulimit field yet, so raise the limit pods inherit from the runtime on the node: a systemd drop-in /etc/systemd/system/containerd.service.d/memlock.conf (or crio.service.d) with `[Service] LimitMEMLOCK=infinity`, then `systemctl daemon-reload && systemctl restart containerd`; CRI-O alternatively `default_ulimits = [\"memlock=-1:-1\"]`"
	case Docker:
		return "start the container with `docker run --ulimit memlock=-1:-1` (compose: `ulimits: {memlock: {soft: -1, hard: -1}}`; for all containers: `\"default-ulimits\": {\"memlock\": {\"Name\": \"memlock\", \"Soft\": -1, \"Hard\": -1}}` in /etc/docker/daemon.json)"
	case Slurm:
		return "set `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf and run slurmd with `LimitMEMLOCK=infinity` (check: `grep 'locked memory' /proc/$(pidof slurmd)/limits`); per job `ulimit -l unlimited` works only where the hard limit allows it"
	default:
		return "set `* soft memlock unlimited` and `* hard memlock unlimited` in /etc/security/limits.d/90-rdma.conf (login and ssh sessions) and `LimitMEMLOCK=infinity` in the unit of a systemd service"
	}
}

func ambient(p Platform, w Who) string {
	switch p {
	case Kubernetes:
		return fmt.Sprintf("run the container as root with `securityContext: {runAsUser: 0, allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [IPC_LOCK, SETUID, SETGID]}}` and start `ncclrun --user=%s -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability; or `setcap cap_ipc_lock+p` on ncclrun in the image (+p, never +ep) with `capabilities.add: [IPC_LOCK]`", w.ids())
	case Docker:
		return fmt.Sprintf("run the container as root with `--cap-add IPC_LOCK` and start `ncclrun --user=%s -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability; or `setcap cap_ipc_lock+p` on ncclrun in the image (+p, never +ep) and keep `--cap-add IPC_LOCK`", w.ids())
	default:
		return "`setcap cap_ipc_lock+p` on the ncclrun binary (+p, never +ep), so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability"
	}
}

// platformLabel is how AllPlatforms introduces a platform's text.
func platformLabel(p Platform) string {
	switch p {
	case Docker:
		return "Docker"
	case Kubernetes:
		return "Kubernetes"
	case Slurm:
		return "Slurm"
	case Host:
		return "hosts"
	}
	return ""
}

// AllPlatforms writes fix f for every platform, for readers whose platform
// is not known (explain of a pasted log): "Docker: ...; Kubernetes: ...".
// Platforms with the same text share it ("Slurm, hosts: ...").
func AllPlatforms(f Fix) string {
	var texts, labels []string
	for _, p := range Platforms {
		t := Text(f, p, Who{Unknown: true})
		if i := indexOf(texts, t); i >= 0 {
			labels[i] += ", " + platformLabel(p)
			continue
		}
		texts, labels = append(texts, t), append(labels, platformLabel(p))
	}
	parts := make([]string, len(texts))
	for i := range texts {
		parts[i] = labels[i] + ": " + texts[i]
	}
	return strings.Join(parts, "; ")
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// placeholder is compiled on first use: run's start-up never pays for it.
var placeholder = &lazy.Regexp{Expr: `\{advice:([a-z-]+)\}`}

// Expand replaces every {advice:NAME} in s with AllPlatforms(NAME); an
// unknown NAME is an error quoting it. The diagnosis catalog's fixes use it.
func Expand(s string) (string, error) {
	var bad string
	re := placeholder.Get()
	out := re.ReplaceAllStringFunc(s, func(m string) string {
		name := Fix(re.FindStringSubmatch(m)[1])
		if Text(name, Host, Who{}) == "" {
			bad = string(name)
			return m
		}
		return AllPlatforms(name)
	})
	if bad != "" {
		return "", fmt.Errorf("unknown advice %q", bad)
	}
	return out, nil
}
