package preflight

import (
	"strings"
)

// detectEnvironment decides the platform: kubernetes (KUBERNETES_SERVICE_HOST
// or a service account mount), slurm (SLURM_JOB_ID or SLURM_PROCID), docker
// (/.dockerenv, a container runtime in proc/1/cgroup, or the `container`
// variable that podman and systemd-nspawn set), else host. Kubernetes comes
// first because pods also look like containers; Slurm before docker because
// its fixes (slurm.conf, pyxis mounts) are the ones that help inside a job.
func detectEnvironment(s sysRoot, env map[string]string) Environment {
	var k8s, slurm, docker []string
	if _, ok := env["KUBERNETES_SERVICE_HOST"]; ok {
		k8s = append(k8s, "KUBERNETES_SERVICE_HOST is set")
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
	if b, err := s.readFile("proc/1/cgroup"); err == nil {
		c := string(b)
		for _, w := range []string{"docker", "containerd", "kubepods", "libpod", "crio"} {
			if strings.Contains(c, w) {
				docker = append(docker, "proc/1/cgroup mentions "+w)
				break
			}
		}
	}
	if v, ok := env["container"]; ok && v != "" {
		docker = append(docker, "container="+v+" is set")
	}
	clues := append(append(append([]string{}, k8s...), slurm...), docker...)
	switch {
	case len(k8s) > 0:
		return Environment{Kind: "kubernetes", Reason: k8s[0], Clues: clues}
	case len(slurm) > 0:
		return Environment{Kind: "slurm", Reason: slurm[0], Clues: clues}
	case len(docker) > 0:
		return Environment{Kind: "docker", Reason: docker[0], Clues: clues}
	}
	return Environment{Kind: "host", Reason: "no container or scheduler clue found"}
}

func checkEnvironment(e Environment) Result {
	d := map[string]any{"kind": e.Kind, "reason": e.Reason}
	if len(e.Clues) > 0 {
		d["clues"] = e.Clues
	}
	name := map[string]string{"kubernetes": "Kubernetes pod", "slurm": "Slurm job", "docker": "container", "host": "host"}[e.Kind]
	return Result{ID: IDEnvironment, Status: OK, Summary: "Platform: " + name + " (" + e.Reason + ")", Details: d}
}
