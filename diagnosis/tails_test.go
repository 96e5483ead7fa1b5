package diagnosis

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTailMemoSameAnswer: remembered answers are the expression's, for
// lines that share a tail under other prefixes, expressions that share
// a tail, a prefix that occurs twice, and tails too long to remember.
func TestTailMemoSameAnswer(t *testing.T) {
	res := []*regexp.Regexp{
		regexp.MustCompile(`ibv_modify_qp failed with error (?:-?110\b|Connection timed out)`),
		regexp.MustCompile(`ibv_modify_qp failed with error (?:-?19\b|No such device)`),
		regexp.MustCompile(`ibv_\w+ failed`),
		regexp.MustCompile(`(?:a|b)c`), // no literal prefix: not remembered
	}
	lines := []string{
		"node-a:1:2 [0] x.cc:1 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
		"node-b:3:4 [1] x.cc:1 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
		"node-b:3:4 [1] x.cc:1 NCCL WARN Call to ibv_modify_qp failed with error No such device",
		"node-b:3:4 [1] x.cc:1 NCCL WARN ibv_modify_qp Call to ibv_modify_qp failed with error -19",
		"ibv_modify_qp failed with error -110",
		"xibv_modify_qp failed with error -110x",
		"ac bc ibv_reg_mr failed",
		"node-c:5:6 [2] NCCL WARN Call to ibv_modify_qp failed with error " + strings.Repeat("Connection timed out ", 20),
		"no literal here",
	}
	var tm tailMemo
	for round := 0; round < 2; round++ {
		for _, l := range lines {
			for _, re := range res {
				pre, _ := re.LiteralPrefix()
				var p []byte
				if pre != "" {
					p = []byte(pre)
				}
				assert.Equal(t, re.MatchString(l), tm.match(re, p, []byte(l)), "%q on %q", re, l)
			}
		}
	}
}
