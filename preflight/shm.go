package preflight

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/units"
)

// shmSegmentBytes is the size of one NCCL SHM transport segment per channel
// per peer (e.g. "/dev/shm/nccl-WU88OE (size 9637888)", nccl-messages.md §3.4).
const shmSegmentBytes = 9637888

// shmChannels is the number of SHM channels the estimate assumes per peer.
const shmChannels = 2

// dockerDefaultShm is the /dev/shm size of Docker and Kubernetes containers
// without --shm-size or a memory-backed emptyDir.
const dockerDefaultShm = 64 << 20

// recommendedShm is NVIDIA's recommendation (`--shm-size=1g`).
const recommendedShm = 1 << 30

// shmEstimate is what NCCL's SHM transport needs for n local GPUs: each GPU
// receives from every other one on shmChannels channels.
func shmEstimate(n int) int64 {
	if n < 2 {
		n = 2
	}
	return int64(n) * int64(n-1) * shmChannels * shmSegmentBytes
}

// parseSizeOption parses a tmpfs size= value (mm/shmem.c, memparse: k, m, g,
// t, p, e binary suffixes, or N% of memTotal). It returns false for values
// it cannot turn into bytes (a percentage without memTotal).
func parseSizeOption(v string, memTotal int64) (int64, bool, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, fmt.Errorf("%w: empty size option", ErrMalformed)
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("%w: size option %q", ErrMalformed, v)
		}
		if memTotal <= 0 {
			return 0, false, nil
		}
		return int64(float64(memTotal) * float64(n) / 100), true, nil
	}
	mult := int64(1)
	last := v[len(v)-1]
	if idx := strings.IndexByte("kKmMgGtTpPeE", last); idx >= 0 {
		mult = 1 << (10 * (idx/2 + 1))
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: size option %q", ErrMalformed, v)
	}
	if n > uint64(math.MaxInt64/mult) {
		return 0, false, fmt.Errorf("%w: size option %q too large", ErrMalformed, v)
	}
	return int64(n) * int64(mult), true, nil
}

// unescapeMount undoes the octal escapes of mount paths (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOptions finds the last mount of mountpoint in a mountinfo
// (proc(5) /proc/pid/mountinfo) or mounts (fstab-like) file and returns its
// filesystem type and options (super options for mountinfo).
func mountOptions(r io.Reader, mountpoint string, mountinfo bool) (fstype, opts string, found bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if mountinfo {
			sep := -1
			for i, x := range f {
				if x == "-" && i >= 6 {
					sep = i
					break
				}
			}
			if sep < 0 || len(f) < sep+4 || len(f) < 5 {
				continue
			}
			if unescapeMount(f[4]) == mountpoint {
				fstype, opts, found = f[sep+1], f[sep+3], true
			}
			continue
		}
		if len(f) < 4 {
			continue
		}
		if unescapeMount(f[1]) == mountpoint {
			fstype, opts, found = f[2], f[3], true
		}
	}
	return fstype, opts, found
}

func memTotal(s sysRoot) int64 {
	b, err := s.readFile("proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}

// shmSize finds the size of dev/shm: statfs on the live system; under a
// snapshot the tmpfs size= option of proc/self/mountinfo or proc/mounts,
// else statfs of Root/dev/shm.
func shmSize(s sysRoot) (size int64, source string, err error) {
	if s.live {
		n, err := s.statfsSize("dev/shm")
		return n, "statfs", err
	}
	for _, f := range []struct {
		rel  string
		info bool
	}{{"proc/self/mountinfo", true}, {"proc/mounts", false}} {
		b, err := s.readFile(f.rel)
		if err != nil {
			continue
		}
		fstype, opts, found := mountOptions(bytes.NewReader(b), "/dev/shm", f.info)
		if !found {
			continue
		}
		if fstype != "tmpfs" {
			return 0, f.rel, fmt.Errorf("%s: /dev/shm is %s, not tmpfs", f.rel, fstype)
		}
		total := memTotal(s)
		for _, o := range strings.Split(opts, ",") {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				n, known, err := parseSizeOption(v, total)
				if err != nil {
					return 0, f.rel, fmt.Errorf("%s: %w", f.rel, err)
				}
				if known {
					return n, f.rel, nil
				}
			}
		}
		if total > 0 { // tmpfs default: half of RAM
			return total / 2, f.rel + " (tmpfs default: half of MemTotal)", nil
		}
		return 0, f.rel, fmt.Errorf("%s: /dev/shm has no size= option and MemTotal is unknown", f.rel)
	}
	n, err := s.statfsSize("dev/shm")
	if absent(err) {
		return 0, "", fmt.Errorf("no /dev/shm mount in proc/self/mountinfo or proc/mounts and no dev/shm directory")
	}
	return n, "statfs", err
}

func shmFix(kind Platform) string {
	return advice.Text(advice.ShmSize, advice.Platform(kind), advice.Who{})
}

// checkShm returns the shm check and the size of /dev/shm (0: unknown).
// With no local GPU the size is reported, not judged (Skip).
func checkShm(s sysRoot, gpus int, kind Platform) (Result, int64) {
	size, source, err := shmSize(s)
	if err != nil {
		return Result{ID: IDShm, Status: Warn, Summary: fmt.Sprintf("The size of /dev/shm could not be determined: %v", err),
			Details: map[string]any{"error": err.Error()}}, 0
	}
	if gpus == 0 {
		// NCCL's SHM transport carries data between local GPUs: with none
		// there is nothing to judge the size against.
		return Result{ID: IDShm, Status: Skip,
			Summary: fmt.Sprintf("/dev/shm is %s; no local GPU found, so NCCL's SHM transport needs none of it here", units.FormatSize(size)),
			Details: map[string]any{"size_bytes": size, "source": source, "gpus": 0, "recommended_bytes": int64(recommendedShm)}}, size
	}
	need := shmEstimate(gpus)
	d := map[string]any{"size_bytes": size, "source": source, "estimate_bytes": need, "gpus": gpus, "recommended_bytes": int64(recommendedShm)}
	r := Result{ID: IDShm, Details: d}
	gpuWord := fmt.Sprintf("%d local GPUs", gpus)
	if gpus == 1 {
		// One GPU has no local peer; the estimate is that of the smallest
		// job that uses the SHM transport.
		gpuWord = "2 local GPUs (1 found)"
	}
	switch {
	case size >= recommendedShm:
		r.Status = OK
		r.Summary = fmt.Sprintf("/dev/shm is %s, at least NVIDIA's recommended 1 GiB", units.FormatSize(size))
	case size < need && size <= dockerDefaultShm:
		r.Status = Fail
		r.Summary = fmt.Sprintf("/dev/shm is %s (the container default) and cannot hold the about %s NCCL's SHM transport needs for %s", units.FormatSize(size), units.FormatSize(need), gpuWord)
		r.Fix = shmFix(kind)
	case size < need:
		r.Status = Warn
		r.Summary = fmt.Sprintf("/dev/shm is %s, less than the about %s NCCL's SHM transport may need for %s", units.FormatSize(size), units.FormatSize(need), gpuWord)
		r.Fix = shmFix(kind)
	default:
		r.Status = Warn
		r.Summary = fmt.Sprintf("/dev/shm is %s, enough for NCCL's SHM segments for %s but below NVIDIA's recommended 1 GiB", units.FormatSize(size), gpuWord)
		r.Fix = shmFix(kind)
	}
	return r, size
}
