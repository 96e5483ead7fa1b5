package caps

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// threadStatusMask reads one Cap* line of the calling thread's status.
func threadStatusMask(key string) (uint64, error) {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return ParseMask(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no %s line", key)
}
