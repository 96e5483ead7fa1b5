package lint

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/units"
)

// nriKey is the pod annotation of the NRI ulimit-adjuster plugin
// (containerd/nri plugins/ulimit-adjuster) for one container.
const nriKey = "ulimits.noderesource.dev/container."

// kubeContainers turns a pod template into containers, the securityContexts
// merged as the kubelet merges them: a container's field wins over the
// pod's; capabilities exist only on the container.
func kubeContainers(file string, p podRef) []container {
	spec := p.spec
	psc := get(spec, "securityContext")
	hostIPC := boolean(get(spec, "hostIPC"))
	hostUsers := boolean(get(spec, "hostUsers"))
	shmVolumes := map[string]bool{}
	for _, v := range items(get(spec, "volumes")) {
		// Any volume mounted at /dev/shm replaces the 64 MiB default;
		// emptyDir {medium: Memory} is the usual one.
		if n := str(get(v, "name")); n != "" {
			shmVolumes[n] = true
		}
	}
	annotations := get(p.meta, "annotations")
	var out []container
	for _, cn := range items(get(spec, "containers")) {
		c := container{platform: advice.Kubernetes, file: file, object: p.object, name: str(get(cn, "name")), line: line(cn, 1),
			env: map[string]string{}}
		csc := get(cn, "securityContext")
		pick := func(key string) *yaml.Node {
			if v := get(csc, key); v != nil {
				return v
			}
			return get(psc, key)
		}
		if n := pick("runAsUser"); n != nil {
			c.uid, c.userLine = integer(n), line(n, c.line)
		}
		if n := pick("runAsGroup"); n != nil {
			c.gid = integer(n)
		}
		if b := boolean(pick("runAsNonRoot")); b != nil && *b {
			c.nonRoot = true
			if c.userLine == 0 {
				c.userLine = line(pick("runAsNonRoot"), c.line)
			}
		}
		if b := boolean(get(csc, "allowPrivilegeEscalation")); b != nil && !*b {
			c.nnp, c.nnpLine = true, line(get(csc, "allowPrivilegeEscalation"), c.line)
		}
		if b := boolean(get(csc, "privileged")); b != nil && *b {
			c.privileged = true
		}
		c.userns = hostUsers != nil && !*hostUsers
		caps := get(csc, "capabilities")
		for _, n := range items(get(caps, "add")) {
			c.add = append(c.add, capItem{str(n), line(n, c.line)})
		}
		for _, n := range items(get(caps, "drop")) {
			c.drop = append(c.drop, capItem{str(n), line(n, c.line)})
		}
		for _, e := range items(get(cn, "env")) {
			if get(e, "valueFrom") == nil {
				c.env[str(get(e, "name"))] = str(get(e, "value"))
			}
		}
		cmd, args := get(cn, "command"), get(cn, "args")
		argv := append(stringList(cmd), stringList(args)...)
		c.launch = parseLaunch(argv, cmd != nil)
		c.launch.applyEnv(c.env)
		c.commandLine = line(cmd, line(args, c.line))
		c.gpu = gpuResources(get(cn, "resources")) || visibleDevices(c.env)
		for _, m := range items(get(cn, "volumeMounts")) {
			if strings.TrimRight(str(get(m, "mountPath")), "/") == "/dev/shm" && shmVolumes[str(get(m, "name"))] {
				c.shm = true
			}
		}
		if hostIPC != nil && *hostIPC {
			c.shm = true
		}
		if a := get(annotations, nriKey+c.name); a != nil {
			c.annotationsLine = line(a, c.line)
			if lim, ok := nriMemlock(str(a)); ok {
				c.memlock, c.memlockLine, c.memlockFrom = &lim, line(a, c.line), "the pod annotation "+nriKey+c.name
			}
		}
		out = append(out, c)
	}
	return out
}

// nriMemlock reads the ulimit-adjuster annotation's value: a YAML list of
// {type, soft, hard} with unsigned 64-bit values (18446744073709551615 is
// unlimited).
func nriMemlock(v string) (pinrule.Limit, bool) {
	var list []struct {
		Type string `yaml:"type"`
		Soft uint64 `yaml:"soft"`
		Hard uint64 `yaml:"hard"`
	}
	if err := yaml.Unmarshal([]byte(v), &list); err != nil {
		return pinrule.Limit{}, false
	}
	conv := func(x uint64) int64 {
		if x >= 1<<63 {
			return pinrule.Unlimited
		}
		return int64(x)
	}
	for _, l := range list {
		if t := strings.ToUpper(l.Type); t == "RLIMIT_MEMLOCK" || t == "MEMLOCK" {
			return pinrule.Limit{Soft: conv(l.Soft), Hard: conv(l.Hard)}, true
		}
	}
	return pinrule.Limit{}, false
}

// gpuResources: the container asks for a GPU (nvidia.com/gpu, amd.com/gpu,
// gpu.intel.com/..., or any resource with "gpu" in its name).
func gpuResources(res *yaml.Node) bool {
	for _, k := range []string{"limits", "requests"} {
		for _, kv := range pairs(get(res, k)) {
			if strings.Contains(strings.ToLower(kv[0].Value), "gpu") {
				if n := integer(kv[1]); n == nil || *n > 0 {
					return true
				}
			}
		}
	}
	return false
}

func visibleDevices(env map[string]string) bool {
	v, ok := env["NVIDIA_VISIBLE_DEVICES"]
	return ok && v != "" && v != "void" && v != "none"
}

// composeContainers turns Compose services into containers (Docker's rules).
func composeContainers(file string, doc *yaml.Node) []container {
	var out []container
	for _, kv := range pairs(get(doc, "services")) {
		name, svc := kv[0].Value, kv[1]
		c := container{platform: advice.Docker, file: file, object: "service/" + name, name: name, line: line(kv[0], 1), env: map[string]string{}}
		if u := get(svc, "user"); u != nil {
			c.userLine = line(u, c.line)
			user, _, _ := strings.Cut(str(u), ":")
			if id, g, ok := parseIDs(str(u)); ok {
				uid, gid := int64(id), int64(g)
				c.uid, c.gid = &uid, &gid
			} else if user == "root" {
				zero := int64(0)
				c.uid = &zero
			} else if user != "" {
				c.nonRoot, c.userName = true, user
			}
		}
		for _, n := range items(get(svc, "cap_add")) {
			c.add = append(c.add, capItem{str(n), line(n, c.line)})
		}
		for _, n := range items(get(svc, "cap_drop")) {
			c.drop = append(c.drop, capItem{str(n), line(n, c.line)})
		}
		if b := boolean(get(svc, "privileged")); b != nil && *b {
			c.privileged = true
		}
		for _, o := range items(get(svc, "security_opt")) {
			v := strings.ReplaceAll(strings.ToLower(str(o)), "=", ":")
			if v == "no-new-privileges" || v == "no-new-privileges:true" {
				c.nnp, c.nnpLine = true, line(o, c.line)
			}
		}
		if m := path(svc, "ulimits", "memlock"); m != nil {
			if lim, ok := composeLimit(m); ok {
				c.memlock, c.memlockLine, c.memlockFrom = &lim, line(m, c.line), "ulimits.memlock"
			}
		}
		if s := get(svc, "shm_size"); s != nil {
			if n, err := units.ParseSize(str(s)); err == nil && (n < 0 || n > 64<<20) {
				c.shm = true
			}
		}
		if ipc := str(get(svc, "ipc")); ipc == "host" || strings.HasPrefix(ipc, "container:") || strings.HasPrefix(ipc, "service:") {
			c.shm = true
		}
		env := get(svc, "environment")
		for _, kv := range pairs(env) {
			c.env[kv[0].Value] = str(kv[1])
		}
		for _, e := range stringList(env) {
			k, v, _ := strings.Cut(e, "=")
			c.env[k] = v
		}
		ep, cmd := get(svc, "entrypoint"), get(svc, "command")
		argv := append(composeArgv(ep), composeArgv(cmd)...)
		c.launch = parseLaunch(argv, ep != nil)
		c.launch.applyEnv(c.env)
		c.commandLine = line(ep, line(cmd, c.line))
		c.gpu = composeGPU(svc) || visibleDevices(c.env)
		out = append(out, c)
	}
	return out
}

// composeArgv reads a Compose command or entrypoint: a list (exec form) or
// a string, which Compose splits shell-like into words (not a shell).
func composeArgv(n *yaml.Node) []string {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return strings.Fields(n.Value)
	}
	return stringList(n)
}

// composeLimit reads ulimits.memlock: a number (soft = hard) or {soft, hard};
// -1 is unlimited.
func composeLimit(n *yaml.Node) (pinrule.Limit, bool) {
	conv := func(x *yaml.Node) (int64, bool) {
		v := integer(x)
		if v == nil {
			return 0, false
		}
		if *v < 0 {
			return pinrule.Unlimited, true
		}
		return *v, true
	}
	if n.Kind == yaml.ScalarNode {
		v, ok := conv(n)
		return pinrule.Limit{Soft: v, Hard: v}, ok
	}
	s, ok1 := conv(get(n, "soft"))
	h, ok2 := conv(get(n, "hard"))
	return pinrule.Limit{Soft: s, Hard: h}, ok1 && ok2
}

// composeGPU: deploy.resources.reservations.devices with the gpu
// capability, `gpus:`, or runtime: nvidia.
func composeGPU(svc *yaml.Node) bool {
	for _, d := range items(path(svc, "deploy", "resources", "reservations", "devices")) {
		for _, c := range stringList(get(d, "capabilities")) {
			if c == "gpu" {
				return true
			}
		}
		if str(get(d, "driver")) == "nvidia" {
			return true
		}
	}
	return get(svc, "gpus") != nil || str(get(svc, "runtime")) == "nvidia"
}
