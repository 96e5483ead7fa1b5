package lint

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/units"
)

// kubeContainers turns a pod template into containers (its containers,
// then its initContainers: restartable sidecars and run-once ones alike),
// the securityContexts merged as the kubelet merges them: a container's
// field wins over the pod's; capabilities exist only on the container. The
// findings returned are the pod's own: ulimit-adjuster annotations that
// name no container of the pod.
func kubeContainers(file string, p podRef) ([]container, []Finding) {
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
	type node struct {
		n    *yaml.Node
		init bool
	}
	var nodes []node
	names := map[string]bool{}
	for _, cn := range items(get(spec, "containers")) {
		nodes = append(nodes, node{cn, false})
	}
	for _, cn := range items(get(spec, "initContainers")) {
		nodes = append(nodes, node{cn, true})
	}
	for _, nd := range nodes {
		names[str(get(nd.n, "name"))] = true
	}
	for _, cn := range items(get(spec, "ephemeralContainers")) {
		names[str(get(cn, "name"))] = true
	}
	gpuClaims := map[string]bool{}
	for _, rc := range items(get(spec, "resourceClaims")) {
		// Dynamic Resource Allocation: the claim's names are the user's,
		// and a GPU claim says so (gpu, gpus, single-gpu, ...).
		n := str(get(rc, "name"))
		ref := str(get(rc, "resourceClaimName")) + " " + str(get(rc, "resourceClaimTemplateName"))
		gpuClaims[n] = strings.Contains(strings.ToLower(n+" "+ref), "gpu")
	}
	nri, orphans := podNRI(get(p.meta, "annotations"), names)
	var out []container
	for _, nd := range nodes {
		cn := nd.n
		c := container{platform: advice.Kubernetes, file: file, object: p.object, name: str(get(cn, "name")), line: line(cn, 1),
			env: map[string]string{}, init: nd.init}
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
		for _, cl := range items(path(cn, "resources", "claims")) {
			if gpuClaims[str(get(cl, "name"))] {
				c.gpu = true
			}
		}
		for _, m := range items(get(cn, "volumeMounts")) {
			if strings.TrimRight(str(get(m, "mountPath")), "/") == "/dev/shm" && shmVolumes[str(get(m, "name"))] {
				c.shm = true
			}
		}
		if hostIPC != nil && *hostIPC {
			c.shm = true
		}
		c.kepUlimits(get(csc, "ulimits"))
		if a, ok := nri[c.name]; ok {
			c.annotationsLine = a.line
			c.nriAnnotation(a)
		}
		out = append(out, c)
	}
	var pod []Finding
	if pc := get(psc, "capabilities"); pc != nil {
		// A common slip: capabilities exist only in a container's
		// securityContext (PodSecurityContext has no such field).
		to := trainer(out)
		pod = append(pod, readFinding(Finding{ID: IDPodCaps, File: file, Line: keyLine(psc, "capabilities"), Object: p.object, Container: to,
			Message: "securityContext.capabilities is set on the pod, where Kubernetes has no such field: kubectl refuses the manifest (strict field validation: unknown field), and clients that do not validate drop it, so no container gets these capabilities.",
			Fix:     podCapsFix(pc, to)}))
	}
	for _, a := range orphans {
		to := suggestContainer(a.name, out)
		msg := fmt.Sprintf("The annotation %s names container %q, which this pod does not have, so the ulimit-adjuster applies nothing and every container keeps the node's limit.", a.key, a.name)
		if to == "" {
			msg = fmt.Sprintf("The annotation %s names container %q, but this pod has no container, so the ulimit-adjuster applies nothing.", a.key, a.name)
			to = a.name
		}
		pod = append(pod, readFinding(Finding{ID: IDNRIAnnotation, File: file, Line: a.line, Object: p.object, Container: a.name,
			Message: msg, Fix: a.corrected(to)}))
	}
	return out, pod
}

// keyLine is the line of key in mapping n (0 when absent).
func keyLine(n *yaml.Node, key string) int {
	for _, kv := range pairs(n) {
		if kv[0].Value == key {
			return kv[0].Line
		}
	}
	return 0
}

// trainer is the container a pod-level fix names: the first that is not
// an init container ("trainer" when there is none).
func trainer(cs []container) string {
	for _, c := range cs {
		if !c.init {
			return c.name
		}
	}
	return "trainer"
}

// podCapsFix is pod-level capabilities pc moved to container name (the
// fix says to do so for each that trains).
func podCapsFix(pc *yaml.Node, name string) string {
	var b strings.Builder
	b.WriteString("# in each container that trains, not in the pod's securityContext\ncontainers:\n  - name: " + name + "\n    securityContext:\n      capabilities:\n")
	for _, k := range []string{"add", "drop"} {
		if l := stringList(get(pc, k)); len(l) > 0 {
			b.WriteString("        " + k + ": [" + strings.Join(quoteAll(l), ", ") + "]\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func quoteAll(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = strconv.Quote(s)
	}
	return out
}

// suggestContainer is the container an annotation meant: the nearest name,
// else the first GPU container without an annotation, else the first.
func suggestContainer(name string, cs []container) string {
	best, dist := "", len(name)/2+1
	for _, c := range cs {
		if d := editDistance(name, c.name); d < dist {
			best, dist = c.name, d
		}
	}
	if best != "" {
		return best
	}
	for _, c := range cs {
		if c.gpu && c.annotationsLine == 0 {
			return c.name
		}
	}
	if len(cs) > 0 {
		return cs[0].name
	}
	return ""
}

// nriAnnotation takes the limit the annotation sets (it wins over
// securityContext.ulimits: NRI adjusts the spec the CRI plugin made), or
// the finding that says why the plugin rejects it or leaves a useless
// limit.
func (c *container) nriAnnotation(a nriAnnotation) {
	if a.memlock != nil {
		c.memlock, c.memlockLine, c.memlockFrom, c.kep = a.memlock, a.line, "the pod annotation "+a.key, false
	}
	if len(a.problems) == 0 {
		return
	}
	msg := fmt.Sprintf("The ulimit-adjuster reads the annotation %s as a list of a type it knows with unsigned 64-bit soft and hard values: %s", a.key, strings.Join(a.problems, "; "))
	if a.fails {
		msg += ", so the plugin returns an error and the runtime does not create the container."
		c.noStart = true
	} else {
		msg += "."
	}
	c.nriZero = a.memlockZero
	c.extra = append(c.extra, readFinding(Finding{ID: IDNRIAnnotation, File: c.file, Line: a.line, Object: c.object, Container: c.name,
		Message: msg, Fix: a.corrected(c.name)}))
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
	all := extensionSilences(get(doc, IgnoreExtension))
	for _, kv := range pairs(get(doc, "services")) {
		name, svc := kv[0].Value, kv[1]
		c := container{platform: advice.Docker, file: file, object: "service/" + name, name: name, line: line(kv[0], 1), env: map[string]string{},
			silence: all.with(extensionSilences(get(svc, IgnoreExtension)))}
		if u := get(svc, "user"); u != nil {
			c.userLine = line(u, c.line)
			user := composeUser(str(u))
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
			c.composeMemlock(m)
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

// composeUser is the user part of Compose's `user: USER[:GROUP]`, the
// colon of a variable's default (`${UID:-1000}:${GID:-1000}`) not counted.
func composeUser(s string) string {
	depth := 0
	for i, r := range s {
		switch {
		case r == '{' && i > 0 && s[i-1] == '$':
			depth++
		case r == '}' && depth > 0:
			depth--
		case r == ':' && depth == 0:
			return s[:i]
		}
	}
	return s
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

// composeMemlock reads ulimits.memlock: a number (soft = hard) or {soft,
// hard}, integers or strings of one (Compose casts them), -1 unlimited.
// Compose refuses a file whose value is not an integer or a mapping
// without soft or hard; the runtime hands the values to setrlimit as
// unsigned 64-bit numbers (a negative one below -1 is a limit of about
// 16 EiB, as good as unlimited) and the kernel refuses soft above hard,
// so Docker does not start the container. Either is a finding, and the
// container that does not start gets no other memlock finding.
func (c *container) composeMemlock(m *yaml.Node) {
	ln := line(m, c.line)
	var bad []string
	conv := func(what string, x *yaml.Node) int64 {
		v, ok := int64(0), false
		if n := integer(x); n != nil {
			v, ok = *n, true
		}
		switch {
		case x == nil:
			bad = append(bad, what+" is missing")
		case !ok && str(x) != "":
			bad = append(bad, fmt.Sprintf("%s %q is not an integer", what, truncateKey(str(x))))
		case !ok:
			bad = append(bad, what+" is not an integer")
		}
		return v
	}
	var soft, hard int64
	if deref(m).Kind == yaml.MappingNode {
		soft, hard = conv("soft", get(m, "soft")), conv("hard", get(m, "hard"))
	} else {
		soft = conv("the value", m)
		hard = soft
	}
	if len(bad) > 0 {
		c.composeRejected(ln, fmt.Sprintf("ulimits.memlock of service %s is not what Compose reads (%s), so docker compose refuses the file.", c.name, strings.Join(bad, "; ")))
		return
	}
	if uint64(soft) > uint64(hard) {
		c.composeRejected(ln, fmt.Sprintf("ulimits.memlock of service %s sets soft %s above hard %s, which setrlimit refuses (EINVAL), so Docker does not start the container.", c.name, fmtCompose(soft), fmtCompose(hard)))
		return
	}
	lim := pinrule.Limit{Soft: composeUnlimited(soft), Hard: composeUnlimited(hard)}
	c.memlock, c.memlockLine, c.memlockFrom = &lim, ln, "ulimits.memlock"
}

// composeRejected is the finding of a ulimits.memlock Compose or Docker
// refuses.
func (c *container) composeRejected(ln int, msg string) {
	c.extra = append(c.extra, readFinding(Finding{ID: IDMemlockLimit, File: c.file, Line: ln, Object: c.object, Container: c.name,
		Message: msg, Fix: advice.Manifest(advice.PodMemlock, advice.Docker, advice.Spot{Container: c.name})}))
	c.noStart = true
}

func composeUnlimited(v int64) int64 {
	if v < 0 {
		return pinrule.Unlimited
	}
	return v
}

func fmtCompose(v int64) string {
	if v == -1 {
		return "-1 (unlimited)"
	}
	return strconv.FormatInt(v, 10)
}

// composeGPU: deploy.resources.reservations.devices with the gpu
// capability, the nvidia driver or a CDI GPU, a CDI GPU in `devices:`,
// `gpus:`, or runtime: nvidia.
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
		for _, id := range stringList(get(d, "device_ids")) {
			if cdiGPU(id) {
				return true
			}
		}
	}
	for _, dev := range stringList(get(svc, "devices")) {
		if cdiGPU(dev) {
			return true
		}
	}
	return get(svc, "gpus") != nil || str(get(svc, "runtime")) == "nvidia"
}

// cdiGPU: a CDI device name of a GPU (nvidia.com/gpu=all, amd.com/gpu=0),
// as Compose's devices or a cdi driver's device_ids name it.
func cdiGPU(name string) bool {
	kind, _, ok := strings.Cut(name, "=")
	return ok && strings.HasSuffix(strings.ToLower(kind), "/gpu")
}
