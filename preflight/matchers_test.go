package preflight

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The hand-written matchers of the start path against the regular
// expressions they replace (the expressions as they were before).
var (
	kubeletPodDirRe = regexp.MustCompile(`/pods/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/(containers|volumes|etc-hosts)`)
	podHostnameRe   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	nvidiaDevRe     = regexp.MustCompile(`^nvidia[0-9]+$`)
)

const uid = "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b"

var podDirCases = []string{
	"", "/", "/pods/", "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~empty-dir/shm",
	"/var/lib/kubelet/pods/" + uid + "/containers/main/0", "/var/lib/kubelet/pods/" + uid + "/etc-hosts",
	"/pods/" + uid + "/etc-host", "/pods/" + uid + "/volume", "/pods/" + uid + "volumes",
	"/pods/" + strings.ToUpper(uid) + "/volumes", "/pods/" + uid[:35] + "/volumes", "/pods/" + uid + "0/volumes",
	"/pods/pods/" + uid + "/volumes", "/pods//pods/" + uid + "/containers", "/pods/x/pods/" + uid + "/etc-hosts/x",
	"/pods/" + strings.Replace(uid, "-", "x", 1) + "/volumes", "/pods/" + strings.Replace(uid, "a", "g", 1) + "/volumes",
	"pods/" + uid + "/volumes", "/pod/" + uid + "/volumes", "/pods/" + uid + "/volumes" + "/pods/",
	"/pods/" + uid + "/x/pods/" + uid + "/containers", "/pods/" + uid,
}

var hostnameCases = []string{
	"", "-", "train-7f9d8-x2b4z", "train-x2b4z", "a-bcdfg", "-bcdfg", "a--bcdfg", "a-b-bcdfg", "ab-bcdfg",
	"A-bcdfg", "a-bcdfa", "a-bcdf0", "a-bcdf1", "a-bcdf3", "a-bcdf2", "a-bcdf9", "a-bcdfgh", "a-bcdf",
	"abcdfg", "a_b-bcdfg", "a.b-bcdfg", "9-22222", "a9-zzzzz", "ab--bcdfg", "-a-bcdfg", "a-", "a-bcdfg\n",
	"worker-0-bcdfg", "\xff-bcdfg", "a-bcdf\xff",
}

var devCases = []string{"", "nvidia", "nvidia0", "nvidia12", "nvidiactl", "nvidia-uvm", "nvidia0a", "xnvidia0", "nvidia-caps", "Nvidia0", "nvidia٣"}

func TestHandMatchersAgreeWithTheirExpressions(t *testing.T) {
	for _, c := range podDirCases {
		assert.Equal(t, kubeletPodDirRe.MatchString(c), inKubeletPodDir(c), "%q", c)
	}
	for _, c := range hostnameCases {
		assert.Equal(t, podHostnameRe.MatchString(c), isPodHostname(c), "%q", c)
	}
	for _, c := range devCases {
		assert.Equal(t, nvidiaDevRe.MatchString(c), isNvidiaDev(c), "%q", c)
	}
	// the cases are not all one answer
	assert.True(t, inKubeletPodDir(podDirCases[3]))
	assert.True(t, isPodHostname("train-7f9d8-x2b4z"))
	assert.True(t, isNvidiaDev("nvidia0"))
}

func FuzzHandMatchers(f *testing.F) {
	for _, c := range append(append(append([]string{}, podDirCases...), hostnameCases...), devCases...) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if kubeletPodDirRe.MatchString(s) != inKubeletPodDir(s) {
			t.Fatalf("inKubeletPodDir(%q) = %v", s, inKubeletPodDir(s))
		}
		if podHostnameRe.MatchString(s) != isPodHostname(s) {
			t.Fatalf("isPodHostname(%q) = %v", s, isPodHostname(s))
		}
		if nvidiaDevRe.MatchString(s) != isNvidiaDev(s) {
			t.Fatalf("isNvidiaDev(%q) = %v", s, isNvidiaDev(s))
		}
	})
}
