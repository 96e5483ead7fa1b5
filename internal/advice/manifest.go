package advice

import (
	"fmt"
	"strconv"
	"strings"
)

// Spot is what a manifest fix names: the container and the command it runs.
type Spot struct {
	// Container is the container's (or Compose service's) name.
	Container string
	// Command is the training command (what ncclrun should start); nil
	// when the manifest leaves it to the image.
	Command []string
	Who     Who
}

// unlimitedU64 is RLIM_INFINITY as the NRI ulimit-adjuster's unsigned values.
const unlimitedU64 = "18446744073709551615"

func flowList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, ", ")
}

func (s Spot) ncclrunCommand(flags ...string) string {
	words := append([]string{"/usr/local/bin/ncclrun"}, flags...)
	words = append(words, "--")
	cmd := flowList(words)
	if len(s.Command) > 0 {
		cmd += ", " + flowList(s.Command)
	} else {
		cmd += `, "<the image's command>"`
	}
	return "[" + cmd + "]"
}

// Manifest returns fix f as the YAML to change in a Kubernetes pod spec or
// a Compose service, for ncclrun lint. An unknown pair returns "".
func Manifest(f Fix, p Platform, s Spot) string {
	k := p == Kubernetes
	switch f {
	case Ambient:
		if k {
			return "# way (a): a root container that holds only IPC_LOCK, SETUID, SETGID; ncclrun drops to the user\n" +
				"securityContext:\n  runAsUser: 0\n  runAsNonRoot: false\n  allowPrivilegeEscalation: false\n  capabilities:\n    drop: [ALL]\n    add: [IPC_LOCK, SETUID, SETGID]\n" +
				"command: " + s.ncclrunCommand("--user="+s.Who.ids()) + "\n" +
				"# way (b): keep the non-root securityContext and add: [IPC_LOCK]; ncclrun, carrying\n" +
				"# cap_ipc_lock+p in the image (Dockerfile.base), is the command in exec form\n" +
				"command: " + s.ncclrunCommand()
		}
		return "# root with IPC_LOCK; ncclrun drops to the user with CAP_IPC_LOCK ambient\n" +
			"user: \"0\"\ncap_drop: [ALL]\ncap_add: [IPC_LOCK, SETUID, SETGID]\n" +
			"entrypoint: " + s.ncclrunCommand("--user="+s.Who.ids()) + "\n" +
			"# or lift the limit (needs an engine that may raise it)\nulimits:\n  memlock: {soft: -1, hard: -1}"
	case ExecForm:
		if k {
			return "# ncclrun first, in exec form; a shell, if needed, goes after ncclrun's --\n" +
				"command: " + s.ncclrunCommand()
		}
		return "# Docker keeps a non-root user's capabilities in the bounding set only: drop no-new-privileges\n" +
			"security_opt: []\n# or run as root and let ncclrun drop to the user\nuser: \"0\"\ncap_add: [IPC_LOCK, SETUID, SETGID]\n" +
			"entrypoint: " + s.ncclrunCommand("--user="+s.Who.ids())
	case AddIPCLock:
		if k {
			return "securityContext:\n  capabilities:\n    drop: [ALL]\n    add: [IPC_LOCK, SETUID, SETGID]"
		}
		return "cap_add: [IPC_LOCK, SETUID, SETGID]"
	case AddSetid:
		if k {
			return "securityContext:\n  capabilities:\n    add: [IPC_LOCK, SETUID, SETGID]"
		}
		return "cap_add: [IPC_LOCK, SETUID, SETGID]"
	case ShmSize:
		if k {
			return "volumes:\n  - name: dshm\n    emptyDir: {medium: Memory, sizeLimit: 16Gi}\n" +
				"containers:\n  - name: " + s.Container + "\n    volumeMounts:\n      - {name: dshm, mountPath: /dev/shm}"
		}
		return "shm_size: 16gb"
	case PodMemlock:
		if k {
			return fmt.Sprintf("# no capability at all: the runtime sets the container's limit (containerd >= 1.7 or\n"+
				"# CRI-O >= 1.26 with NRI and the ulimit-adjuster plugin on the node)\n"+
				"metadata:\n  annotations:\n    %scontainer.%s: |\n      - type: RLIMIT_MEMLOCK\n        soft: %s\n        hard: %s",
				"ulimits.noderesource.dev/", s.Container, unlimitedU64, unlimitedU64)
		}
		return "ulimits:\n  memlock: {soft: -1, hard: -1}"
	case RaiseMemlock:
		if k {
			return "# on every node: /etc/systemd/system/containerd.service.d/memlock.conf\n[Service]\nLimitMEMLOCK=infinity"
		}
		return "ulimits:\n  memlock: {soft: -1, hard: -1}"
	case UserNamespace:
		return "hostUsers: true"
	case PrivilegedNamespace:
		return "# or, where the pod must add the capability: the namespace at the privileged level\n# (kubectl label namespace NS ...)\nmetadata:\n  labels:\n    pod-security.kubernetes.io/enforce: privileged"
	}
	return ""
}
