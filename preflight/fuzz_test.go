package preflight

import (
	"bytes"
	"strings"
	"testing"
)

// The fuzz targets check that parsers never panic on hostile input and keep
// their invariants. Seeds are the kernel's and NCCL's real formats plus the
// garbled forms seen in testdata/garbled.

func FuzzParseHCAList(f *testing.F) {
	for _, s := range []string{"", "mlx5_0", "=mlx5_0:1,mlx5_1:1", "^=mlx5_8,^=mlx5_14", "^mlx5", ":1,,", "=^x:-3", strings.Repeat("a,", 40)} {
		f.Add(s, "mlx5_1", 1)
	}
	f.Fuzz(func(t *testing.T, list, dev string, port int) {
		l := parseHCAList(list)
		if len(l.Entries) > maxHCAEntries {
			t.Fatalf("%d entries", len(l.Entries))
		}
		for _, e := range l.Entries {
			if e.Name == "" || strings.ContainsAny(e.Name, ",:") {
				t.Fatalf("bad entry %+v", e)
			}
		}
		got := l.Match(dev, port)
		if len(l.Entries) == 0 && !got {
			t.Fatalf("empty list must match everything")
		}
		// Exclude is the exact negation of the same list without '^'.
		if l.Exclude && len(l.Entries) > 0 {
			inc := l
			inc.Exclude = false
			if inc.Match(dev, port) == got {
				t.Fatalf("exclude is not the negation for %q", list)
			}
		}
	})
}

func FuzzMatchIfname(f *testing.F) {
	for _, s := range []string{"", "e", "eth", "=eth0", "^docker0", "^=eth0,ib", "en,eth1", "^", "=,", "::"} {
		f.Add(s, "lo,eth0,ib0,docker0")
	}
	f.Fuzz(func(t *testing.T, spec, ifaces string) {
		names := strings.Split(ifaces, ",")
		got := matchIfname(spec, names)
		in := map[string]bool{}
		for _, n := range names {
			in[n] = true
		}
		for _, g := range got {
			if !in[g] {
				t.Fatalf("%q is not among the interfaces", g)
			}
		}
		if len(spec) <= 1 && len(got) == 0 {
			for _, n := range names {
				if n != "" {
					t.Fatalf("default order found nothing among %q", names)
				}
			}
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n")
	f.Add("Uid:\tabc\nCapEff:\tzzzz\n")
	f.Add("CapPrm:\t00000000000000000\n")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStatus(strings.NewReader(s))
		if err == nil && (st.UID < 0 || st.GID < 0) {
			t.Fatalf("negative id %+v", st)
		}
	})
}

func FuzzParseMemlockLimits(f *testing.F) {
	f.Add("Max locked memory         65536                65536                bytes\n")
	f.Add("Max locked memory unlimited unlimited bytes")
	f.Add("Max locked memory lots 65536 bytes")
	f.Add("Max locked memory 18446744073709551615 1 bytes")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseMemlockLimits(strings.NewReader(s))
		if err == nil && (r.Soft < Unlimited || r.Hard < Unlimited) {
			t.Fatalf("bad limit %+v", r)
		}
	})
}

func FuzzParseUIDMap(f *testing.F) {
	for _, s := range []string{"         0          0 4294967295\n", "0 100000 65536", "", "x y", "0 0 4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseUIDMap([]byte(s))
	})
}

func FuzzSysfsValues(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "1: DOWN", "", ":", "x: y", "ACTIVE", "5: LinkUp\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSysfsState(s)
		if err == nil && v == "" {
			t.Fatalf("empty state without error for %q", s)
		}
		_, _ = kernelAtLeast(s, 5, 12)
		_, _ = parseDriverVersion(s)
	})
}

func FuzzParseSizeOption(f *testing.F) {
	for _, s := range []string{"65536k", "1g", "50%", "", "k", "0x10m", "99999999999999999999e", "9999999999e"} {
		f.Add(s, int64(8<<30))
	}
	f.Fuzz(func(t *testing.T, s string, total int64) {
		n, known, err := parseSizeOption(s, total)
		if err == nil && known && n < 0 && total >= 0 {
			t.Fatalf("negative size %d for %q", n, s)
		}
	})
}

func FuzzMountinfo(f *testing.F) {
	f.Add("630 626 0:61 / /dev/shm rw,nosuid - tmpfs shm rw,size=65536k\n", true)
	f.Add("shm /dev/shm tmpfs rw,size=64m 0 0\n", false)
	f.Add("garbage line\n- - -\n", true)
	f.Fuzz(func(t *testing.T, s string, info bool) {
		_, _, _ = mountOptions(strings.NewReader(s), "/dev/shm", info)
		_ = unescapeMount(s)
	})
}

func FuzzNetFiles(f *testing.F) {
	f.Add("fe800000000000000000000000000005 02 40 20 80     eth0\n", "|-- 10.0.0.5\n/32 host LOCAL\n", "eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
	f.Add("zz 01 80 10 80 eth0", "|-- 999.1.1.1\n/32 host LOCAL", "eth0 XYZ")
	f.Fuzz(func(t *testing.T, inet6, trie, route string) {
		_ = parseIfInet6([]byte(inet6))
		for _, ip := range parseFibTrieLocal([]byte(trie)) {
			if ip.To4() == nil {
				t.Fatalf("non-IPv4 %v", ip)
			}
		}
		_ = parseRoute([]byte(route))
		vars := map[string]string{}
		parseNCCLConf([]byte(inet6+"\n"+trie), vars)
		for k := range vars {
			if k == "" || bytes.ContainsRune([]byte(k), '=') {
				t.Fatalf("bad key %q", k)
			}
		}
	})
}
