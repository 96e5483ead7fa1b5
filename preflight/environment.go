package preflight

import (
	"bufio"
	"bytes"
	"strings"
)

// Both tests below are written out by hand, not as regular expressions:
// they run on every start, and compiling the two took as long as the rest
// of the environment check (the tests check them against the expressions).

// inKubeletPodDir reports whether a path lies under the kubelet's pods
// directory (/var/lib/kubelet/pods/<pod uid>/...) as it appears in the
// root field of a mountinfo line: the kubelet bind-mounts /etc/hosts, the
// termination log and every volume from there into each container of a
// pod. It is a search for
// `/pods/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/(containers|volumes|etc-hosts)`.
func inKubeletPodDir(p string) bool {
	for {
		i := strings.Index(p, "/pods/")
		if i < 0 {
			return false
		}
		if rest, ok := cutUID(p[i+len("/pods/"):]); ok {
			if strings.HasPrefix(rest, "/containers") || strings.HasPrefix(rest, "/volumes") || strings.HasPrefix(rest, "/etc-hosts") {
				return true
			}
		}
		p = p[i+len("/pods"):] // the next match may begin with this one's last slash
	}
}

// cutUID reports whether p starts with a lower-case UUID (8-4-4-4-12
// hex digits) and returns what follows it.
func cutUID(p string) (rest string, ok bool) {
	const shape = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	if len(p) < len(shape) {
		return "", false
	}
	for i := 0; i < len(shape); i++ {
		c := p[i]
		if shape[i] == '-' {
			if c != '-' {
				return "", false
			}
		} else if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return p[len(shape):], true
}

// isPodHostname reports whether h is the name a controller gives a pod
// with generateName: a DNS label ending in "-" and five characters of the
// apiserver's generateName alphabet (no vowels, no 0, 1, 3). Deployment,
// Job, DaemonSet and ReplicaSet pods are named like this. It is
// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?-[bcdfghjklmnpqrstvwxz2456789]{5}$`.
func isPodHostname(h string) bool {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	if len(h) < 7 || h[len(h)-6] != '-' {
		return false
	}
	for i := len(h) - 5; i < len(h); i++ {
		if strings.IndexByte(alphabet, h[i]) < 0 {
			return false
		}
	}
	label := h[:len(h)-6]
	alnum := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' }
	if !alnum(label[0]) || !alnum(label[len(label)-1]) {
		return false
	}
	for i := 1; i < len(label)-1; i++ {
		if c := label[i]; c != '-' && !alnum(c) {
			return false
		}
	}
	return true
}

// kubeVars are the variables the kubelet puts into every container (for
// the API service), whatever enableServiceLinks says.
var kubeVars = []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_PORT"}

// detectEnvironment decides the platform from every clue it finds, and
// lists them all in Environment.Clues (the first of the deciding kind is
// Reason):
//
//   - Kubernetes: the kubelet's KUBERNETES_* variables; the service-account
//     mount; a kubepods cgroup (proc/self/cgroup or proc/1/cgroup, cgroupfs
//     or systemd driver); a mount from the kubelet's pod directory
//     (proc/self/mountinfo); a generateName hostname (HOSTNAME, which
//     Docker and the CRI set) counts only beside a CRI runtime's cgroup
//     (containerd, crio), never alone.
//   - Slurm: SLURM_JOB_ID or SLURM_PROCID.
//   - a container (kind docker): /.dockerenv, a container runtime in the
//     cgroup path, or the `container` variable of podman and systemd-nspawn.
//
// Kubernetes comes first because pods also look like containers: a pod
// with automountServiceAccountToken: false and no KUBERNETES_* variables
// is still a pod when its cgroup says kubepods, and Docker's advice would
// be wrong there. Slurm before docker because its fixes (slurm.conf, pyxis
// mounts) are the ones that help inside a job.
func detectEnvironment(s sysRoot, env map[string]string) Environment {
	var k8s, slurm, docker []string
	for _, k := range kubeVars {
		if _, ok := env[k]; ok {
			k8s = append(k8s, k+" is set")
		}
	}
	if s.exists("var/run/secrets/kubernetes.io/serviceaccount") {
		k8s = append(k8s, "var/run/secrets/kubernetes.io/serviceaccount exists")
	}
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_PROCID"} {
		if _, ok := env[k]; ok {
			slurm = append(slurm, k+" is set")
		}
	}
	if s.exists(".dockerenv") {
		docker = append(docker, ".dockerenv exists")
	}
	criRuntime, kubepods, runtime := false, false, false
	for _, f := range []string{"proc/self/cgroup", "proc/1/cgroup"} {
		b, err := s.readFile(f)
		if err != nil {
			continue
		}
		c := string(b)
		if !kubepods && strings.Contains(c, "kubepods") {
			kubepods = true
			k8s = append(k8s, f+" mentions kubepods")
		}
		for _, w := range []string{"docker", "containerd", "libpod", "crio"} {
			if !runtime && strings.Contains(c, w) {
				runtime = true
				docker = append(docker, f+" mentions "+w)
				criRuntime = w == "containerd" || w == "crio"
			}
		}
	}
	if b, err := s.readFile("proc/self/mountinfo"); err == nil {
		if m := kubeletPodMount(b); m != "" {
			k8s = append(k8s, "proc/self/mountinfo: "+m+" is mounted from the kubelet's pod directory")
		}
	}
	if v, ok := env["container"]; ok && v != "" {
		docker = append(docker, "container="+v+" is set")
	}
	var weak []string // listed, deciding nothing
	if h := env["HOSTNAME"]; isPodHostname(h) {
		clue := "hostname " + h + " looks like a pod name"
		if criRuntime {
			k8s = append(k8s, clue)
		} else {
			weak = append(weak, clue+" (not decisive without a CRI runtime's cgroup)")
		}
	}
	clues := append(append(append(append([]string{}, k8s...), slurm...), docker...), weak...)
	switch {
	case len(k8s) > 0:
		return Environment{Kind: Kubernetes, Reason: k8s[0], Clues: clues}
	case len(slurm) > 0:
		return Environment{Kind: Slurm, Reason: slurm[0], Clues: clues}
	case len(docker) > 0:
		return Environment{Kind: Docker, Reason: docker[0], Clues: clues}
	}
	e := Environment{Kind: Host, Reason: "no container or scheduler clue found"}
	if len(clues) > 0 {
		e.Clues = clues
	}
	return e
}

// kubeletPodMount returns the mount point of the first mountinfo line
// whose root lies in a kubelet pod directory, or "".
func kubeletPodMount(b []byte) string {
	if !bytes.Contains(b, []byte("/pods/")) {
		return "" // no line's root can match: the usual case, decided without splitting ~30 lines into fields
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && inKubeletPodDir(f[3]) {
			return f[4]
		}
	}
	return ""
}

func checkEnvironment(e Environment) Result {
	d := map[string]any{"kind": e.Kind, "reason": e.Reason}
	if len(e.Clues) > 0 {
		d["clues"] = e.Clues
	}
	name := map[Platform]string{Kubernetes: "Kubernetes pod", Slurm: "Slurm job", Docker: "container", Host: "host"}[e.Kind]
	return Result{ID: IDEnvironment, Status: OK, Summary: "Platform: " + name + " (" + e.Reason + ")", Details: d}
}
