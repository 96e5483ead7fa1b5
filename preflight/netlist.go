package preflight

import (
	"strconv"
	"strings"
)

// Limits of NCCL's lists (src/transport/net_ib: MAX_IB_DEVS; src/misc/socket.cc
// MAX_IFS; struct netIf prefix[64]).
const (
	maxHCAEntries    = 32
	maxIfnameEntries = 16
	maxListName      = 63
)

// ListEntry is one entry of an NCCL_IB_HCA or NCCL_SOCKET_IFNAME list:
// a name (a prefix unless the list is exact) and a port (-1: any port).
type ListEntry struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

// NetList is a parsed NCCL interface or HCA list ("[^][=]name[:port],...").
// The zero value is the empty list, which NCCL treats as "everything".
type NetList struct {
	// Exclude is the leading '^': the entries name what NOT to use.
	Exclude bool `json:"exclude"`
	// Exact is the '=' after the optional '^': names match whole, not as
	// prefixes.
	Exact bool `json:"exact"`
	// Entries are the names in order, at most the list's maximum.
	Entries []ListEntry `json:"entries"`
	// Problems are why the list probably does not do what its author meant
	// (a '^' or '=' inside an entry, where NCCL reads it as part of the
	// name; entries past the maximum; names NCCL cuts short).
	Problems []string `json:"problems,omitempty"`
}

// parseNetList follows NCCL's parseStringList (src/misc/utils.cc): the
// leading '^' and then '=' apply once to the whole list; entries are split
// at ','; ':' ends a name and starts its port (atoi of what follows, up to
// the next ','); empty names are skipped; parsing stops after max entries.
func parseNetList(s string, max int) NetList {
	var l NetList
	if strings.HasPrefix(s, "^") {
		l.Exclude, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		l.Exact, s = true, s[1:]
	}
	total := 0
	for _, raw := range strings.Split(s, ",") {
		name, portStr, hasPort := strings.Cut(raw, ":")
		if name == "" {
			if raw != "" {
				l.Problems = append(l.Problems, "entry "+strconv.Quote(raw)+" has no name and is ignored")
			}
			continue
		}
		total++
		if len(l.Entries) >= max {
			continue
		}
		e := ListEntry{Name: name, Port: -1}
		if hasPort {
			e.Port = atoi(portStr)
		}
		if strings.ContainsAny(name, "^=") {
			l.Problems = append(l.Problems, "entry "+strconv.Quote(name)+" contains '^' or '=': NCCL reads those only at the start of the whole list, so here they are part of a literal name")
		}
		if len(name) > maxListName {
			l.Problems = append(l.Problems, "entry "+strconv.Quote(name)+" is longer than NCCL's 63-character limit")
		}
		l.Entries = append(l.Entries, e)
	}
	if total > max {
		l.Problems = append(l.Problems, "the list has "+strconv.Itoa(total)+" entries; NCCL reads only the first "+strconv.Itoa(max))
	}
	return l
}

// atoi is C's atoi: optional spaces and sign, then digits; 0 when none.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
		if n > 1<<30 {
			break
		}
	}
	if neg {
		return -n
	}
	return n
}

// Match reports whether NCCL would use the device or interface name at port
// (-1: no port, as for interfaces) with this list (matchIfList XOR
// Exclude). An empty list matches everything, also with Exclude.
func (l NetList) Match(name string, port int) bool {
	if len(l.Entries) == 0 {
		return true
	}
	in := false
	for _, e := range l.Entries {
		var nameOK bool
		if l.Exact {
			nameOK = name == e.Name
		} else {
			nameOK = strings.HasPrefix(name, e.Name)
		}
		if nameOK && (e.Port == -1 || port == -1 || e.Port == port) {
			in = true
			break
		}
	}
	return in != l.Exclude
}

// parseHCAList parses an NCCL_IB_HCA value with NCCL's rules:
// "[^][=]hca[:port[:rail[:plane]]],...". '^' (exclude) must come before
// '=' (exact) and both apply to the whole list; without '=' every name is a
// prefix, so "mlx5_1" also matches mlx5_10..mlx5_19; at most 32 entries are
// read. A malformed list such as "^=mlx5_8,^=mlx5_14" parses as NCCL parses
// it (the second name is the literal "^=mlx5_14") and says so in Problems.
func parseHCAList(s string) NetList { return parseNetList(s, maxHCAEntries) }

// parseIfnameList parses an NCCL_SOCKET_IFNAME value with NCCL's rules
// (comma list of prefixes, '^' exclude, '=' exact, at most 16 entries).
func parseIfnameList(s string) NetList { return parseNetList(s, maxIfnameEntries) }

// matchIfname returns, in the order given, the names of ifaces that NCCL
// would consider for the NCCL_SOCKET_IFNAME value spec. A spec of one
// character or less is ignored by NCCL (strlen > 1), and then the default
// order applies: ib*, then anything but docker*, lo and virbr*, then
// docker*, then lo, then virbr*; the first step that finds any interface
// wins. ifaces should hold only the interfaces that are up with an address.
func matchIfname(spec string, ifaces []string) []string {
	if len(spec) > 1 {
		return filterNames(parseIfnameList(spec), ifaces)
	}
	for _, step := range []string{"ib", "^docker,lo,virbr", "docker", "lo", "virbr"} {
		if got := filterNames(parseIfnameList(step), ifaces); len(got) > 0 {
			return got
		}
	}
	return nil
}

func filterNames(l NetList, names []string) []string {
	var out []string
	for _, n := range names {
		if l.Match(n, -1) {
			out = append(out, n)
		}
	}
	return out
}
