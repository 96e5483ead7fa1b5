// Package examples holds no code: it is the home of the manifests and
// scripts users copy (Kubernetes, Docker, Slurm, a local reproduction) and
// of the tests that keep every one of them valid and true to what
// docs/examples.md claims.
package examples
