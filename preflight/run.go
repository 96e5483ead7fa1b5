package preflight

import "context"

// Run performs every check and returns the report. It never exits or prints.
// (Stub: being written; returns no checks.)
func Run(ctx context.Context, opts Options) Report {
	return Report{Environment: Environment{Kind: "host", Reason: "not yet detected"}}
}

// SuggestEnv returns the NCCL_IB_* variables the report proves right for this
// node (e.g. NCCL_IB_HCA narrowed to usable HCAs). Variables the caller has
// already set are the launcher's business, not this function's.
func SuggestEnv(r Report) []EnvSuggestion { return nil }

// NCCLConfig reads NCCL's own configuration files under root
// (NCCL_CONF_FILE from env, else ~/.nccl.conf, and /etc/nccl.conf) and returns
// the variables they set, and the files that were read.
func NCCLConfig(root string, env []string) (vars map[string]string, files []string) {
	return map[string]string{}, nil
}
