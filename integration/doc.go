// Package integration holds ncclrun's container suite: Go tests with the
// build tag "integration" that run ncclrun and a raw probe (testdata/capprobe)
// in real Docker containers and check what the runtime really gives a
// process (memlock, capability sets, no_new_privs, file capabilities) and
// what ncclrun makes of it (doctor's verdicts, run's diagnosis, PID 1
// behaviour).
//
// The CRI suite (cri_harness_test.go, cri_test.go) does the same on the
// Kubernetes path: a private containerd with its CRI plugin, which it
// starts and stops itself, driven by crictl as a kubelet drives it.
//
// Run it with `make integration` (go test -count=1 -tags integration
// ./integration/...). Without a Docker engine the Docker tests skip, and
// without root, containerd, runc, ctr or crictl the CRI tests skip, except
// under CI=true, where they fail. Set NCCLRUN_INTEGRATION_TABLE=FILE to have the
// suite write the observed scenario table (docs/containers.md) to FILE.
//
// There is no registry: every image is built FROM scratch or from a root
// file system the suite assembles from host binaries and `docker import`s.
// Containers and images carry the label ncclrun.integration=<run id> and are
// removed when the suite ends.
package integration
