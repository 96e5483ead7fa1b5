#!/bin/sh
# mktrees.sh regenerates the fake system trees preflight's tests read with
# Options.Root. Run it from preflight/testdata; the trees are committed.
set -eu
cd "$(dirname "$0")"

w() { # w FILE CONTENT...: write a file, creating its directory
	mkdir -p "$(dirname "$1")"
	f=$1; shift
	printf '%s\n' "$@" >"$f"
}

proc() { # proc TREE UID INH PRM EFF BND AMB NNP SOFT HARD UIDMAP
	t=$1
	w "$t/proc/self/status" "Name:	python3" "Umask:	0022" "State:	R (running)" \
		"Tgid:	1" "Pid:	1" "PPid:	0" \
		"Uid:	$2	$2	$2	$2" "Gid:	$2	$2	$2	$2" "FDSize:	64" \
		"VmLck:	       0 kB" "VmPin:	       0 kB" "Threads:	1" \
		"CapInh:	$3" "CapPrm:	$4" "CapEff:	$5" "CapBnd:	$6" "CapAmb:	$7" \
		"NoNewPrivs:	$8" "Seccomp:	2"
	w "$t/proc/self/limits" \
		"Limit                     Soft Limit           Hard Limit           Units     " \
		"Max cpu time              unlimited            unlimited            seconds   " \
		"Max open files            1048576              1048576              files     " \
		"Max locked memory         $9 ${10} bytes     " \
		"Max address space         unlimited            unlimited            bytes     "
	w "$t/proc/self/uid_map" "${11}"
	w "$t/etc/passwd" "root:x:0:0:root:/root:/bin/bash" "trainer:x:1000:1000::/home/trainer:/bin/bash"
	w "$t/etc/group" "root:x:0:" "trainer:x:1000:"
}

shm() { # shm TREE SIZEOPT
	w "$1/proc/self/mountinfo" \
		"620 540 0:55 / / rw,relatime master:300 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w" \
		"626 620 0:59 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755" \
		"630 626 0:61 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=$2"
	w "$1/proc/meminfo" "MemTotal:       2113464000 kB" "MemFree:        2000000000 kB"
}

ibdev() { # ibdev TREE DEV N LINKLAYER RATE STATE PHYS PRESENT
	b=$1/sys/class/infiniband/$2
	w "$b/ports/1/state" "$6"
	w "$b/ports/1/phys_state" "$7"
	w "$b/ports/1/link_layer" "$4"
	w "$b/ports/1/rate" "$5"
	w "$b/fw_ver" "28.39.1002"
	w "$b/device/infiniband_verbs/uverbs$3/ibdev" "$2"
	w "$1/sys/class/infiniband_verbs/uverbs$3/ibdev" "$2"
	if [ "$8" = yes ]; then w "$1/dev/infiniband/uverbs$3" ""; fi
}

gpus() { # gpus TREE N
	i=0
	while [ "$i" -lt "$2" ]; do
		w "$1/dev/nvidia$i" ""
		w "$1/proc/driver/nvidia/gpus/0000:$((0x18 + i * 16)):00.0/information" "Model: 		 NVIDIA H100 80GB HBM3"
		i=$((i + 1))
	done
	w "$1/dev/nvidiactl" ""
	w "$1/proc/driver/nvidia/version" \
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 21:10:01 UTC 2025" \
		"GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)"
}

net() { # net TREE: lo, eth0 10.0.0.5/24 (+ link-local v6), ib0 192.168.1.5/24, docker0 down
	for i in lo eth0 ib0 docker0; do
		case $i in docker0) fl=0x1002 op=down ;; lo) fl=0x9 op=unknown ;; *) fl=0x1003 op=up ;; esac
		w "$1/sys/class/net/$i/flags" "$fl"
		w "$1/sys/class/net/$i/operstate" "$op"
	done
	w "$1/proc/net/if_inet6" \
		"00000000000000000000000000000001 01 80 10 80       lo" \
		"fe800000000000000000000000000005 02 40 20 80     eth0"
	w "$1/proc/net/route" \
		"Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT" \
		"eth0	00000000	0100000A	0003	0	0	0	00000000	0	0	0" \
		"eth0	0000000A	00000000	0001	0	0	0	00FFFFFF	0	0	0" \
		"ib0	0001A8C0	00000000	0001	0	0	0	00FFFFFF	0	0	0"
	w "$1/proc/net/fib_trie" \
		"Main:" "  +-- 0.0.0.0/0 3 0 5" "     |-- 0.0.0.0" "        /0 universe UNICAST" \
		"     +-- 10.0.0.0/24 2 0 2" "        |-- 10.0.0.0" "           /24 link UNICAST" \
		"        |-- 10.0.0.5" "           /32 host LOCAL" \
		"     +-- 192.168.1.0/24 2 0 2" "        |-- 192.168.1.5" "           /32 host LOCAL" \
		"Local:" "  +-- 0.0.0.0/0 3 0 5" "     +-- 127.0.0.0/8 2 0 2" "        |-- 127.0.0.1" "           /32 host LOCAL" \
		"        |-- 10.0.0.5" "           /32 host LOCAL"
}

common() { # common TREE KERNEL
	w "$1/proc/sys/kernel/osrelease" "$2"
	w "$1/proc/1/cgroup" "0::/"
	net "$1"
}

FULL=000001ffffffffff
DOCKER=00000000a80425fb
IPC=0000000000004000
ZERO=0000000000000000
IDMAP="         0          0 4294967295"
NDR="400 Gb/sec (4X NDR)"
ACTIVE="4: ACTIVE"
LINKUP="5: LinkUp"

rm -rf ib-node roce-node port-down missing-uverbs shm-64m no-peermem k8s-trap docker-root slurm slurm-slurmd slurm-login slurm-lowered slurm-container userns nnp vm-root garbled k8s-cgroup-only k8s-kubelet-mounts

# ib-node: bare-metal root, memlock unlimited, 4 NDR HCAs, peermem, 8 GPUs.
t=ib-node
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 16777216k
for n in 0 1 2 3; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" yes; done
w $t/dev/infiniband/rdma_cm ""
gpus $t 8
w $t/sys/module/nvidia_peermem/version "570.86.15"
common $t 5.15.0-131-generic

# roce-node: docker root with --cap-add IPC_LOCK --ulimit memlock=-1, RoCE, nv_mem.
t=roce-node
proc $t 0 $ZERO 00000000a80465fb 00000000a80465fb 00000000a80465fb $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 1g
for n in 0 1; do ibdev $t mlx5_$n $n Ethernet "200 Gb/sec (4X HDR)" "$ACTIVE" "$LINKUP" yes; done
w $t/dev/infiniband/rdma_cm ""
gpus $t 4
w $t/sys/kernel/mm/memory_peers/nv_mem/version "1.3-0"
w $t/.dockerenv ""
common $t 6.8.0-49-generic

# port-down: like ib-node, mlx5_1's port is down.
t=port-down
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 16777216k
for n in 0 2 3; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" yes; done
ibdev $t mlx5_1 1 InfiniBand "10 Gb/sec (4X SDR)" "1: DOWN" "3: Disabled" yes
gpus $t 8
w $t/sys/module/nvidia_peermem/version "570.86.15"
common $t 5.15.0-131-generic

# missing-uverbs: a pod that got only two of four verbs nodes.
t=missing-uverbs
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 1g
for n in 0 1; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" yes; done
for n in 2 3; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" no; done
gpus $t 8
w $t/sys/module/nvidia_peermem/version "570.86.15"
w $t/var/run/secrets/kubernetes.io/serviceaccount/token "x"
common $t 5.15.0-131-generic

# shm-64m: docker root, default 64 MiB /dev/shm, 8 GPUs, no RDMA.
t=shm-64m
proc $t 0 $ZERO 00000000a80465fb 00000000a80465fb 00000000a80465fb $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 65536k
gpus $t 8
w $t/.dockerenv ""
common $t 6.8.0-49-generic

# no-peermem: IB + GPUs, no peer-memory module, kernel too old for DMA-BUF.
t=no-peermem
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 unlimited unlimited "$IDMAP"
shm $t 16777216k
for n in 0 1; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" yes; done
gpus $t 8
common $t 5.4.0-150-generic

# k8s-trap: runAsUser 1000 + capabilities.add [IPC_LOCK], memlock 64 KiB.
t=k8s-trap
proc $t 1000 $ZERO $ZERO $ZERO 00000000a80465fb $ZERO 0 65536 65536 "$IDMAP"
shm $t 1g
for n in 0 1; do ibdev $t mlx5_$n $n InfiniBand "$NDR" "$ACTIVE" "$LINKUP" yes; done
gpus $t 8
w $t/sys/module/nvidia_peermem/version "570.86.15"
w $t/var/run/secrets/kubernetes.io/serviceaccount/token "x"
w $t/proc/1/cgroup "0::/kubepods/besteffort/pod1234/cri-containerd-abcd"
w $t/proc/sys/kernel/osrelease "5.15.0-131-generic"
net $t

# docker-root: docker run as root with default capabilities, memlock 64 KiB.
t=docker-root
proc $t 0 $ZERO $DOCKER $DOCKER $DOCKER $ZERO 0 65536 65536 "$IDMAP"
shm $t 65536k
w $t/.dockerenv ""
common $t 6.8.0-49-generic

# slurm: uid 1000 task, soft 64 KiB propagated from the login node, hard unlimited.
t=slurm
proc $t 1000 $ZERO $ZERO $ZERO $FULL $ZERO 0 65536 unlimited "$IDMAP"
shm $t 131981768k
gpus $t 4
common $t 5.14.0-427.el9.x86_64

# stepd TREE SOFT HARD: ncclrun's parent is slurmstepd (pid 4242), whose
# parent is slurmd; slurmstepd holds slurmd's memlock limit SOFT/HARD.
stepd() {
	w "$1/proc/self/stat" "4300 (ncclrun) S 4242 4300 4300 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"
	w "$1/proc/4242/stat" "4242 (slurmstepd) S 4200 4242 4200 0 -1 1077936448 0 0 0 0 0 0 0 0 20 0 4 0 90 0 0"
	w "$1/proc/4200/stat" "4200 (slurmd) S 1 4200 4200 0 -1 1077936384 0 0 0 0 0 0 0 0 20 0 2 0 10 0 0"
	w "$1/proc/4242/limits" \
		"Limit                     Soft Limit           Hard Limit           Units     " \
		"Max locked memory         $2 $3 bytes     "
}

# slurm-slurmd: uid 1000 task under a slurmd started with a 64 KiB memlock
# limit (no LimitMEMLOCK=infinity): slurmstepd holds 64 KiB too.
t=slurm-slurmd
proc $t 1000 $ZERO $ZERO $ZERO $FULL $ZERO 0 65536 65536 "$IDMAP"
stepd $t 65536 65536
shm $t 131981768k
common $t 5.14.0-427.el9.x86_64

# slurm-login: slurmd unlimited, the task's soft 64 KiB propagated from the
# login node's shell.
t=slurm-login
proc $t 1000 $ZERO $ZERO $ZERO $FULL $ZERO 0 65536 unlimited "$IDMAP"
stepd $t unlimited unlimited
shm $t 131981768k
common $t 5.14.0-427.el9.x86_64

# slurm-lowered: slurmd unlimited, the task's hard limit 64 KiB: set after
# slurmstepd (a job script's ulimit), since Slurm propagates soft limits only.
t=slurm-lowered
proc $t 1000 $ZERO $ZERO $ZERO $FULL $ZERO 0 65536 65536 "$IDMAP"
stepd $t unlimited unlimited
shm $t 131981768k
common $t 5.14.0-427.el9.x86_64

# slurm-container: a task in a container with a PID namespace of its own
# (pyxis/enroot): its parent is the namespace's init, no slurmstepd seen.
t=slurm-container
proc $t 1000 $ZERO $ZERO $ZERO $FULL $ZERO 0 65536 65536 "$IDMAP"
w $t/proc/self/stat "7 (ncclrun) S 1 7 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"
shm $t 131981768k
common $t 5.14.0-427.el9.x86_64

# userns: rootless container, root with all capabilities inside its namespace.
t=userns
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 8388608 8388608 "         0     100000      65536"
shm $t 65536k
w $t/.dockerenv ""
common $t 6.8.0-49-generic

# vm-root: root on a VM with every capability (CAP_SYS_RESOURCE among them) and
# the distribution's 8 MiB memlock, Soft-RoCE, no GPU: ncclrun raises the hard
# limit too, so CMD gets unlimited.
t=vm-root
proc $t 0 $ZERO $FULL $FULL $FULL $ZERO 0 8388608 8388608 "$IDMAP"
shm $t 1g
ibdev $t rxe0 0 Ethernet "10 Gb/sec (1X QDR)" "$ACTIVE" "$LINKUP" yes
w $t/dev/infiniband/rdma_cm ""
common $t 6.12.57+deb13-amd64

# nnp: uid 1000, allowPrivilegeEscalation false, IPC_LOCK in bounding only.
t=nnp
proc $t 1000 $ZERO $ZERO $ZERO $IPC $ZERO 1 8388608 8388608 "$IDMAP"
shm $t 1g
w $t/var/run/secrets/kubernetes.io/serviceaccount/token "x"
common $t 5.15.0-131-generic

# k8s-cgroup-only: the trap in a pod with automountServiceAccountToken: false
# and no KUBERNETES_* variables (cgroup v1, cgroupfs driver, as the CRI suite
# runs it): only proc/self/cgroup says kubepods.
t=k8s-cgroup-only
proc $t 1000 $ZERO $ZERO $ZERO $IPC $ZERO 1 65536 65536 "$IDMAP"
shm $t 1g
common $t 6.1.0-28-amd64
w $t/proc/self/cgroup \
	"4:memory:/kubepods/besteffort/pod4e45e509-a4f7-0b51-8a53-ab62bfeb1475/e8565882751f" \
	"1:cpu:/kubepods/besteffort/pod4e45e509-a4f7-0b51-8a53-ab62bfeb1475/e8565882751f" \
	"0::/kubepods/besteffort/pod4e45e509-a4f7-0b51-8a53-ab62bfeb1475/e8565882751f"

# k8s-kubelet-mounts: a pod on cgroup v2 with a cgroup namespace (cgroup
# says 0::/), no service account: the kubelet's bind mounts remain.
t=k8s-kubelet-mounts
proc $t 1000 $ZERO $ZERO $ZERO $IPC $ZERO 1 65536 65536 "$IDMAP"
w $t/proc/self/mountinfo \
	"620 540 0:55 / / rw,relatime master:300 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w" \
	"626 620 0:59 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755" \
	"630 626 0:61 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=1g" \
	"631 620 259:1 /var/lib/kubelet/pods/0c6f3a52-9d1e-4f7b-a5b8-2e41b7a3c9d0/etc-hosts /etc/hosts rw,relatime - ext4 /dev/nvme0n1p1 rw" \
	"632 626 259:1 /var/lib/kubelet/pods/0c6f3a52-9d1e-4f7b-a5b8-2e41b7a3c9d0/containers/trainer/3f2a9c1e /dev/termination-log rw,relatime - ext4 /dev/nvme0n1p1 rw"
w $t/proc/meminfo "MemTotal:       2113464000 kB" "MemFree:        2000000000 kB"
w $t/proc/self/cgroup "0::/"
common $t 6.1.0-28-amd64

# garbled: every file preflight reads, broken.
t=garbled
mkdir -p $t/proc/self
printf 'Uid:\tabc\nCapEff:\tzzzz\n' >$t/proc/self/status
printf 'Max locked memory         lots                 65536 bytes\n' >$t/proc/self/limits
printf 'x y\n' >$t/proc/self/uid_map
printf 'garbage line\n- - -\n' >$t/proc/self/mountinfo
w $t/sys/class/infiniband/mlx5_0/ports/1/state ""
w $t/sys/class/infiniband/mlx5_0/ports/1/link_layer ""
w $t/sys/class/infiniband/mlx5_0/ports/x/state "4: ACTIVE"
w $t/dev/nvidia0 ""
w $t/proc/driver/nvidia/version "not a driver"
w $t/proc/sys/kernel/osrelease "banana"
w $t/sys/class/net/eth0/flags "0xZZ"
w $t/proc/net/if_inet6 "zz 01 80 10 80 eth0"
w $t/proc/net/fib_trie "|-- 999.1.1.1" "/32 host LOCAL"
w $t/proc/net/route "eth0 XYZ"
