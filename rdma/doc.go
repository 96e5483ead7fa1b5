// Package rdma holds ncclrun's Soft-RoCE suite: Go tests with the build tag
// "rdma" that boot a VM (scripts/rdma-vm.sh: Debian's kernel with rdma_rxe
// and an initramfs of Debian's verbs stack, under qemu's TCG emulation) with
// the static ncclrun inside, and check on real verbs what the other suites
// check with stand-ins: doctor on a real RDMA device's sysfs, real
// ibv_reg_mr failures in the Kubernetes trap state and ncclrun's diagnosis
// of them, the ways out of the trap, and a snapshot read back on the host.
//
// The VM boots once per test binary and runs every scenario of
// testdata/scenarios.sh in that boot; the tests judge the blocks it prints.
//
// Run it with `make rdma` (go test -count=1 -tags rdma ./rdma/). Without
// qemu-system-x86_64, apt-get, dpkg-deb, depmod or cpio the tests skip,
// except under CI=true, where they fail. NCCLRUN_RDMA_BIN=PATH puts a
// static ncclrun built elsewhere in the VM instead of building this tree's.
// docs/rdma.md says what it proves.
package rdma
