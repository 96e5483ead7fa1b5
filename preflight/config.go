package preflight

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// parseNCCLConf parses an NCCL configuration file as NCCL's setEnvFile
// (src/misc/param.cc) does: a line starting with '#' is a comment; the name
// is everything before the first '=' and the value everything after it, both
// untrimmed; a line without '=' is ignored. A name set twice keeps its first
// value (NCCL calls setenv without overwriting).
func parseNCCLConf(b []byte, into map[string]string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			continue
		}
		if _, set := into[k]; !set {
			into[k] = v
		}
	}
}

// ncclConfig reads NCCL's own configuration files under s: the file
// named by NCCL_CONF_FILE in env, else $HOME/.nccl.conf (HOME from env),
// and then etc/nccl.conf. It returns the variables they set, a variable
// set in both keeping the first file's value as NCCL does (the environment
// itself wins over both: that is the caller's merge), and the files read.
// Missing files are skipped. Report.NCCLConf carries the variables.
func ncclConfig(s sysRoot, env []string) (vars map[string]string, files []string) {
	e := environ.Map(env)
	vars = map[string]string{}
	var cands []string
	if f := e["NCCL_CONF_FILE"]; f != "" {
		cands = append(cands, f)
	} else if h := e["HOME"]; h != "" {
		cands = append(cands, path.Join(h, ".nccl.conf"))
	}
	cands = append(cands, "/etc/nccl.conf")
	for _, c := range cands {
		rel := strings.TrimPrefix(path.Clean("/"+c), "/")
		b, err := s.readConf(rel)
		if err != nil {
			continue
		}
		parseNCCLConf(b, vars)
		files = append(files, c)
	}
	return vars, files
}

// SuggestEnv returns the NCCL_IB_* variables the report proves right for
// this node: NCCL_IB_HCA limited by exact match ("=mlx5_0:1,mlx5_1:1") to
// the usable HCA ports (verbs node present, port ACTIVE) when sysfs also
// shows ports that are not usable, and at least one is. It suggests nothing
// else: NCCL detects the GID index and the socket interface better by itself.
// Variables the caller has already set are the launcher's business, not
// this function's. It reads Report.Facts.
func SuggestEnv(r Report) []EnvSuggestion {
	devs := r.Facts.RDMA
	var usable, unusable []string
	for _, d := range devs {
		if len(d.Ports) == 0 && !d.UverbsPresent {
			unusable = append(unusable, d.Name)
		}
		for _, p := range d.Ports {
			id := fmt.Sprintf("%s:%d", d.Name, p.Port)
			if d.usable(p) {
				usable = append(usable, id)
			} else {
				unusable = append(unusable, id)
			}
		}
	}
	if len(usable) == 0 || len(unusable) == 0 || len(usable) > maxHCAEntries {
		return nil
	}
	sort.Strings(unusable)
	return []EnvSuggestion{{
		Name:   "NCCL_IB_HCA",
		Value:  "=" + strings.Join(usable, ","),
		Reason: "sysfs shows HCA ports that are not usable here (" + strings.Join(unusable, ", ") + ": no verbs node or port not ACTIVE); limiting NCCL to " + strings.Join(usable, ", "),
	}}
}
