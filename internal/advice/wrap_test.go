package advice

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlatformLines(t *testing.T) {
	all := AllPlatforms(RaiseMemlock)
	lines := PlatformLines("Raise the limit. " + all)
	assert.Equal(t, "Raise the limit.", lines[0])
	var labels []string
	for _, l := range lines[1:] {
		label, _, ok := strings.Cut(l, ": ")
		assert.True(t, ok, l)
		labels = append(labels, label)
	}
	assert.Equal(t, strings.Join(lines[1:], " "), all, "nothing lost or added but the line breaks")
	assert.Subset(t, []string{"Docker", "Kubernetes", "Slurm", "hosts", "Slurm, hosts", "Docker, Kubernetes"}, labels)
	assert.Equal(t, []string{"Docker: a;", "Kubernetes: b.", "Slurm, hosts: c; d"}, PlatformLines("Docker: a; Kubernetes: b. Slurm, hosts: c; d"))
	assert.Equal(t, []string{"no platform; Dockerfile: x"}, PlatformLines("no platform; Dockerfile: x"))
}

func TestWrap(t *testing.T) {
	assert.Equal(t, []string{"ab cd", "ef", "toolongword", "g"}, Wrap("ab cd ef toolongword g", 5))
	assert.Equal(t, []string{""}, Wrap("", 5))
}
