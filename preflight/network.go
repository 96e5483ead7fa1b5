package preflight

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// NetInterface is one network interface as preflight sees it.
type NetInterface struct {
	Name  string   `json:"name"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs,omitempty"`
}

func (i NetInterface) usable() bool { return i.Up && len(i.Addrs) > 0 }

// liveInterfaces lists the interfaces (net.Interfaces) and their
// addresses (liveAddrs: on Linux one dump for all interfaces, where
// Interface.Addrs makes one each); the IPv6 loopback address is left out
// as NCCL leaves it out.
func liveInterfaces() ([]NetInterface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	addrs := liveAddrs(ifs)
	out := make([]NetInterface, 0, len(ifs))
	for _, i := range ifs {
		ni := NetInterface{Name: i.Name, Up: i.Flags&net.FlagUp != 0}
		for _, ip := range addrs[i.Index] {
			if ip.To4() == nil && ip.IsLoopback() {
				continue
			}
			ni.Addrs = append(ni.Addrs, ip.String())
		}
		out = append(out, ni)
	}
	return out, nil
}

// parseIfInet6 maps interface names to their IPv6 addresses from
// /proc/net/if_inet6 ("addr32hex ifindex prefixlen scope flags name").
func parseIfInet6(b []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || len(f[0]) != 32 {
			continue
		}
		raw, err := hex.DecodeString(f[0])
		if err != nil {
			continue
		}
		ip := net.IP(raw)
		if ip.IsLoopback() {
			continue
		}
		out[f[5]] = append(out[f[5]], ip.String())
	}
	return out
}

// parseFibTrieLocal returns the local IPv4 addresses of /proc/net/fib_trie:
// the "|-- a.b.c.d" leaves followed by "/32 host LOCAL".
func parseFibTrieLocal(b []byte) []net.IP {
	var out []net.IP
	seen := map[string]bool{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if ip, ok := strings.CutPrefix(t, "|-- "); ok {
			last = ip
			continue
		}
		if strings.HasPrefix(t, "/32 host LOCAL") && last != "" && !seen[last] {
			if ip := net.ParseIP(last).To4(); ip != nil {
				out = append(out, ip)
				seen[last] = true
			}
		}
	}
	return out
}

type route4 struct {
	iface     string
	dst, mask uint32
}

// parseRoute parses /proc/net/route (hex, host byte order as the kernel
// prints it: little-endian on the machines NCCL runs on).
func parseRoute(b []byte) []route4 {
	var out []route4
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] == "Iface" {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, route4{iface: f[0], dst: uint32(dst), mask: uint32(mask)})
	}
	return out
}

func ipLE(ip net.IP) uint32 { return binary.LittleEndian.Uint32(ip.To4()) }

// snapshotInterfaces lists sys/class/net; an interface is up when its flags
// have IFF_UP (or, without flags, operstate is up or unknown). IPv6
// addresses come from proc/net/if_inet6; IPv4 addresses from the LOCAL
// leaves of proc/net/fib_trie, each given to the interface of the longest
// proc/net/route prefix holding it (127/8 to lo).
func snapshotInterfaces(s sysRoot) ([]NetInterface, error) {
	names, err := s.list("sys/class/net")
	if err != nil {
		return nil, err
	}
	v6 := map[string][]string{}
	if b, err := s.readFile("proc/net/if_inet6"); err == nil {
		v6 = parseIfInet6(b)
	}
	v4 := map[string][]string{}
	var routes []route4
	if b, err := s.readFile("proc/net/route"); err == nil {
		routes = parseRoute(b)
	}
	if b, err := s.readFile("proc/net/fib_trie"); err == nil {
		for _, ip := range parseFibTrieLocal(b) {
			if ip[0] == 127 {
				v4["lo"] = append(v4["lo"], ip.String())
				continue
			}
			best, bestLen := "", -1
			for _, r := range routes {
				if ipLE(ip)&r.mask == r.dst&r.mask {
					if l := onesLE(r.mask); l > bestLen && r.mask != 0 {
						best, bestLen = r.iface, l
					}
				}
			}
			if best != "" {
				v4[best] = append(v4[best], ip.String())
			}
		}
	}
	var out []NetInterface
	for _, n := range names {
		ni := NetInterface{Name: n}
		if f, err := s.readAttr(path.Join("sys/class/net", n, "flags")); err == nil {
			if v, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 32); err == nil {
				ni.Up = v&1 != 0
			}
		} else if o, err := s.readAttr(path.Join("sys/class/net", n, "operstate")); err == nil {
			ni.Up = o == "up" || o == "unknown"
		}
		ni.Addrs = append(v4[n], v6[n]...)
		out = append(out, ni)
	}
	return out, nil
}

func onesLE(m uint32) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// multiNode says whether the environment shows a job of several nodes.
func multiNode(env map[string]string) (multi bool, why string) {
	for _, k := range []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES", "PET_NNODES", "NNODES", "OMPI_MCA_orte_num_nodes"} {
		if v, ok := env[k]; ok {
			lo, _, _ := strings.Cut(v, ":") // torchrun accepts MIN:MAX
			if n, err := strconv.Atoi(lo); err == nil && n > 1 {
				return true, k + "=" + v
			}
		}
	}
	ws, err1 := strconv.Atoi(env["WORLD_SIZE"])
	lws, err2 := strconv.Atoi(env["LOCAL_WORLD_SIZE"])
	if err1 == nil && err2 == nil && ws > lws {
		return true, fmt.Sprintf("WORLD_SIZE=%d > LOCAL_WORLD_SIZE=%d", ws, lws)
	}
	if a := env["MASTER_ADDR"]; a != "" && a != "localhost" && !strings.HasPrefix(a, "127.") && a != "::1" {
		return true, "MASTER_ADDR=" + a
	}
	return false, ""
}

func localOnly(name string) bool {
	return strings.HasPrefix(name, "lo") || strings.HasPrefix(name, "docker") || strings.HasPrefix(name, "virbr")
}

// interfaces lists the interfaces: liveInterfaces on the live system,
// snapshotInterfaces under any other root.
func interfaces(s sysRoot) ([]NetInterface, error) {
	if s.live {
		return liveInterfaces()
	}
	return snapshotInterfaces(s)
}

// checkNetwork judges the interfaces (interfaces' answer) against the
// socket variables.
func checkNetwork(ifs []NetInterface, err error, env map[string]string) Result {
	if err != nil {
		return Result{ID: IDNetwork, Status: Skip, Summary: fmt.Sprintf("Network interfaces could not be listed: %v", err)}
	}
	var usable, shown []string
	for _, i := range ifs {
		if i.usable() {
			usable = append(usable, i.Name)
			shown = append(shown, i.Name+" "+strings.Join(i.Addrs, " "))
		}
	}
	d := map[string]any{"interfaces": ifs}
	r := Result{ID: IDNetwork, Status: OK, Details: d}
	spec, set := env["NCCL_SOCKET_IFNAME"]
	selected := matchIfname(spec, usable)
	d["selected"] = selected
	upText := listOrNothing(usable)
	var warns []string
	switch {
	case set && len(spec) > 1:
		d["nccl_socket_ifname"] = parseIfnameList(spec)
		l := parseIfnameList(spec)
		if len(selected) == 0 {
			r.Status = Fail
			r.Summary = fmt.Sprintf("NCCL_SOCKET_IFNAME=%q matches no interface that is up with an address (those are: %s): NCCL fails with \"Bootstrap : no socket interface found\"", spec, upText)
			r.Fix = "set NCCL_SOCKET_IFNAME to one of the interfaces above, a prefix common to all nodes (e.g. `en`), or a list (`enp4s0,enp6s0`); `^` excludes and `=` asks exact names, once at the start"
			return r
		}
		if len(l.Problems) > 0 {
			warns = append(warns, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q is malformed (%s) and selects %s", spec, l.Problems[0], strings.Join(selected, ", ")))
		}
	case set && spec != "":
		warns = append(warns, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q is ignored by NCCL (it needs at least 2 characters), so NCCL picks %s by itself", spec, listOrNothing(selected)))
	}
	if len(selected) == 0 {
		r.Status = Fail
		r.Summary = "No network interface is up with an address: NCCL fails with \"Bootstrap : no socket interface found\""
		r.Fix = "bring an interface up with an address (container: attach a network, do not use --network=none)"
		return r
	}
	if g, ok := env["GLOO_SOCKET_IFNAME"]; ok && g != "" {
		var missing []string
		for _, n := range strings.Split(g, ",") {
			if strings.ContainsAny(n, "^=") {
				warns = append(warns, fmt.Sprintf("GLOO_SOCKET_IFNAME=%q: Gloo takes exact interface names, not NCCL's '^'/'=' syntax", g))
				break
			}
			if !contains(usable, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			r.Status = Fail
			r.Summary = fmt.Sprintf("GLOO_SOCKET_IFNAME=%q names %s, which is not up with an address (those are: %s): torch.distributed fails before NCCL starts", g, strings.Join(missing, ", "), upText)
			r.Fix = "set GLOO_SOCKET_IFNAME to exact interface names from the list above"
			return r
		}
	}
	allLocal := true
	for _, n := range selected {
		if !localOnly(n) {
			allLocal = false
		}
	}
	multi, why := multiNode(env)
	if allLocal {
		d["local_only"] = true
		if multi {
			warns = append(warns, fmt.Sprintf("NCCL would use only %s, which other nodes cannot reach, for a multi-node job (%s)", strings.Join(selected, ", "), why))
		}
	}
	if len(warns) > 0 {
		r.Status = Warn
		r.Summary = warns[0]
		if len(warns) > 1 {
			d["warnings"] = warns
		}
		r.Fix = "set NCCL_SOCKET_IFNAME to the interface that connects the nodes, e.g. one of: " + strings.Join(shown, "; ")
		return r
	}
	r.Summary = fmt.Sprintf("NCCL will use %s", strings.Join(selected, ", "))
	if set && len(spec) > 1 {
		r.Summary += fmt.Sprintf(" (NCCL_SOCKET_IFNAME=%q)", spec)
	}
	return r
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
