// Package lint judges Kubernetes manifests and Docker Compose files before
// they run: will each training container be able to pin memory for NCCL?
//
// Each container is turned into the credential description of
// internal/pinrule (the state its first process and ncclrun will have,
// derived with the runtime's and the kernel's exec rules) and decided by
// the same rule table doctor uses on a live pod, so the two never disagree
// for the same state. What a manifest cannot tell (the image's user and
// entrypoint, whether the image's ncclrun carries its file capability, the
// node's memlock limit) is assumed, and each finding says what was assumed
// and how to check (`ncclrun doctor` in the pod).
//
// Only cmd/ncclrun's lint command imports this package: `run` never pays
// for the YAML parser (docs/lint.md has the measurements).
package lint
