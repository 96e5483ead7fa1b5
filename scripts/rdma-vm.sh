#!/usr/bin/env bash
# A Soft-RoCE test VM made of Debian's packages, booted under qemu (TCG, no
# KVM needed): Debian's kernel with rdma_rxe, and an initramfs of static
# busybox, the verbs stack (rdma-core, libibverbs, the rxe provider,
# ibverbs-utils, perftest), iproute2's ip and rdma, util-linux's setpriv and
# prlimit, and libcap2-bin's setcap, with their libraries. The VM has no
# network card (-nodefaults): its only RDMA device is rxe0 on a dummy
# interface, and nothing in it can reach off the machine.
#
# Usage:
#   scripts/rdma-vm.sh build
#       Download the packages (apt-get download) and assemble the kernel and
#       the initramfs; print the directory that holds vmlinuz and base.cpio.
#       Cached by package versions in $NCCLRUN_RDMA_VM_CACHE (default
#       ${XDG_CACHE_HOME:-~/.cache}/ncclrun/rdma-vm); a second build with the
#       same versions only prints the directory.
#   scripts/rdma-vm.sh run NCCLRUN SCRIPT LOG
#       Boot with the static binary NCCLRUN at /opt/ncclrun and SCRIPT as
#       /scenarios.sh, run as root once the VM is up (rxe0 ACTIVE on dummy0
#       at 192.0.2.1, lo up, /dev/shm and /tmp on tmpfs), then power off.
#       The serial console (kernel and script output) goes to LOG. Exits
#       non-zero when qemu fails or the VM runs past $RDMA_VM_TIMEOUT seconds
#       (default 900).
#
# Needs: apt-get (Debian bookworm's archive), dpkg-deb, depmod (kmod), cpio,
# qemu-system-x86_64.
set -euo pipefail

cache="${NCCLRUN_RDMA_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclrun/rdma-vm}"

die() { echo "rdma-vm: $*" >&2; exit 1; }

need() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null 2>&1 || die "needs $t on PATH"; done
}

# The kernel package linux-image-amd64 points at (linux-image-6.1.0-N-amd64).
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

# Packages whose files go into the VM. The libraries are those the binaries
# below link (checked after assembly: a missing one fails the build).
packages() {
  echo "$1" busybox-static rdma-core ibverbs-providers libibverbs1 ibverbs-utils \
    perftest librdmacm1 libibumad3 libpci3 iproute2 util-linux libcap2-bin \
    libc6 libcap2 libcap-ng0 libnl-3-200 libnl-route-3-200 libbpf1 libbsd0 libmd0 \
    libelf1 libmnl0 libsmartcols1 libudev1 zlib1g libselinux1 libpcre2-8-0 \
    libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 \
    libcom-err2 libssl3 libxtables12 libdb5.3 libblkid1 libmount1 libsystemd0 \
    libzstd1 liblzma5 liblz4-1 libgcrypt20 libgpg-error0 libcap2 | tr ' ' '\n' | sort -u
}

# Modules loaded at boot, with what modules.dep says they need. crc32_generic
# is named by no dependency list, but rdma_rxe cannot add a link without it
# ("failed to init crc32 algorithm").
MODULES="dummy crc32_generic ib_core ib_uverbs rdma_rxe"

# The binaries the scenarios run; each must find its libraries in the tree.
BINARIES="usr/bin/busybox usr/bin/ibv_rc_pingpong usr/bin/ibv_devinfo usr/bin/ib_write_bw
usr/bin/rdma usr/bin/ip usr/bin/setpriv usr/bin/prlimit usr/sbin/setcap usr/sbin/getcap
usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"

build() {
  need apt-get apt-cache dpkg-deb depmod cpio sha256sum
  local kpkg
  kpkg="$(kernel_package)"
  [ -n "$kpkg" ] || die "apt-cache knows no linux-image-amd64 (apt-get update?)"
  local pkgs versions key out
  pkgs="$(packages "$kpkg")"
  # shellcheck disable=SC2086 # one word per package
  versions="$(apt-cache show --no-all-versions $pkgs 2>/dev/null |
    awk '/^Package:/ { p = $2 } /^Version:/ && p != "" { print p "=" $2; p = "" }' | sort -u)"
  local missing=()
  for p in $pkgs; do
    grep -q "^$p=" <<<"$versions" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] || die "apt-cache knows no version of: ${missing[*]}"
  key="$( (echo "$MODULES"; echo "$versions"; sha256sum "$0" | cut -d' ' -f1) | sha256sum | cut -c1-16)"
  out="$cache/$key"
  if [ -s "$out/base.cpio" ] && [ -s "$out/vmlinuz" ]; then
    echo "$out"
    return
  fi
  mkdir -p "$cache/debs"
  missing=()
  for pv in $versions; do
    local p="${pv%%=*}" v="${pv#*=}"
    compgen -G "$cache/debs/${p}_${v//:/%3a}_*.deb" >/dev/null || missing+=("$p=$v")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    (cd "$cache/debs" && apt-get download -q "${missing[@]}" >&2) || die "apt-get download failed"
  fi

  local stage root
  work="$(mktemp -d "$cache/build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  stage="$work/stage"
  root="$work/root"
  mkdir -p "$stage" "$root"
  for pv in $versions; do
    local p="${pv%%=*}" v="${pv#*=}"
    dpkg-deb -x "$cache/debs/${p}_${v//:/%3a}_"*.deb "$stage"
  done

  local kver
  kver="$(ls "$stage/lib/modules")"
  [ "$(wc -w <<<"$kver")" = 1 ] || die "expected one kernel in $kpkg, found: $kver"
  cp "$stage/boot/vmlinuz-$kver" "$work/vmlinuz"
  depmod -b "$stage" "$kver"

  # The root: merged /usr, as Debian's packages expect.
  mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib" "$root/usr/lib64" "$root/etc" \
    "$root/lib/modules/$kver"
  for d in bin sbin lib lib64; do
    [ -d "$stage/$d" ] && [ ! -L "$stage/$d" ] && cp -a "$stage/$d/." "$root/usr/$d/"
  done
  rm -rf "${root:?}/lib"
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
  cp -a "$stage/usr/bin/." "$root/usr/bin/"
  cp -a "$stage/usr/sbin/." "$root/usr/sbin/"
  cp -a "$stage/usr/lib/x86_64-linux-gnu" "$root/usr/lib/"
  [ -d "$stage/usr/lib64" ] && cp -a "$stage/usr/lib64/." "$root/usr/lib64/"
  cp -a "$stage/etc/libibverbs.d" "$root/etc/"
  rm -rf "$root/usr/lib/modules"
  mkdir -p "$root/usr/lib/modules/$kver"

  # The modules and, depth first, what they depend on.
  local order=() seen=" "
  add_module() {
    local rel dep
    rel="$(awk -v m="$1" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*$/, "", n); gsub(/-/, "_", n) } n == m { print $1; exit }' \
      "$stage/lib/modules/$kver/modules.dep")"
    [ -n "$rel" ] || die "no module $1 in $kpkg"
    case "$seen" in *" $rel "*) return ;; esac
    seen+="$rel "
    # shellcheck disable=SC2013 # modules.dep's dependencies are words
    for dep in $(awk -v r="$rel" -F: '$1 == r { print $2; exit }' "$stage/lib/modules/$kver/modules.dep"); do
      add_module "$(basename "$dep" | sed 's/\.ko.*$//; s/-/_/g')"
    done
    order+=("$rel")
  }
  for m in $MODULES; do add_module "$m"; done
  for rel in "${order[@]}"; do
    mkdir -p "$root/usr/lib/modules/$kver/$(dirname "$rel")"
    cp "$stage/lib/modules/$kver/$rel" "$root/usr/lib/modules/$kver/$rel"
  done
  cp "$stage/lib/modules/$kver/modules.order" "$stage/lib/modules/$kver/modules.builtin" \
    "$stage/lib/modules/$kver/modules.builtin.modinfo" "$root/usr/lib/modules/$kver/"
  depmod -b "$root" "$kver"
  mkdir -p "$root/etc/rdma-vm"
  printf '%s\n' "${order[@]}" | sed "s|^|/lib/modules/$kver/|" >"$root/etc/rdma-vm/modules"

  # Every binary the scenarios run must find its libraries here.
  local ld="$root/usr/lib64/ld-linux-x86-64.so.2" libpath="$root/usr/lib/x86_64-linux-gnu"
  [ -e "$ld" ] || ld="$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
  for b in $BINARIES; do
    [ -e "$root/$b" ] || die "$b is in none of the packages"
    case "$b" in usr/bin/busybox) continue ;; esac
    if "$ld" --library-path "$libpath" --list "$root/$b" 2>&1 | grep 'not found'; then
      die "$b needs a library that is in none of the packages above"
    fi
  done

  printf 'root:x:0:0:root:/root:/bin/sh\ntrainer:x:1000:1000:trainer:/home/trainer:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\ntrainer:x:1000:\n' >"$root/etc/group"
  echo rdma-vm >"$root/etc/hostname"
  ln -sf busybox "$root/usr/bin/sh"
  cat >"$root/init" <<'EOF'
#!/usr/bin/busybox sh
# PID 1 of the Soft-RoCE VM (scripts/rdma-vm.sh).
bb=/usr/bin/busybox
$bb mkdir -p /proc /sys /dev /tmp /run /opt /bb /root /home/trainer
$bb --install -s /bb
export PATH=/usr/sbin:/usr/bin:/bb HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=755 opt /opt
chown 1000:1000 /home/trainer
hostname rdma-vm
for m in $(cat /etc/rdma-vm/modules); do insmod "$m" || echo "@@@ SETUP insmod $m failed"; done
/usr/bin/ip link set lo up
# dummy.ko makes dummy0 itself (numdummies=1).
[ -e /sys/class/net/dummy0 ] || /usr/bin/ip link add dummy0 type dummy
/usr/bin/ip addr add 192.0.2.1/24 dev dummy0
/usr/bin/ip link set dummy0 up
/usr/bin/rdma link add rxe0 type rxe netdev dummy0 || echo "@@@ SETUP rdma link add failed"
cp /ncclrun /opt/ncclrun
chmod 755 /opt/ncclrun
echo "@@@ READY"
sh /scenarios.sh
echo "@@@ DONE rc=$?"
sync
poweroff -f
EOF
  chmod 755 "$root/init"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >"$work/base.cpio")

  mkdir -p "$out"
  mv "$work/vmlinuz" "$work/base.cpio" "$out/"
  echo "$versions" >"$out/versions"
  # Builds for other versions are of no further use.
  find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name debs ! -name "$key" ! -name 'build.*' -exec rm -rf {} +
  echo "$out"
}

run() {
  [ $# -eq 3 ] || die "usage: $0 run NCCLRUN SCRIPT LOG"
  local bin="$1" script="$2" log="$3"
  [ -f "$bin" ] || die "$bin: no such file"
  [ -f "$script" ] || die "$script: no such file"
  need qemu-system-x86_64 cpio timeout
  local dir
  dir="$(build)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/overlay"
  cp "$bin" "$tmp/overlay/ncclrun"
  cp "$script" "$tmp/overlay/scenarios.sh"
  chmod 755 "$tmp/overlay/ncclrun"
  # The kernel unpacks concatenated cpio archives in turn.
  (cd "$tmp/overlay" && find . | cpio -o -H newc -R 0:0 --quiet >"$tmp/overlay.cpio")
  cat "$dir/base.cpio" "$tmp/overlay.cpio" >"$tmp/initrd.cpio"
  timeout "${RDMA_VM_TIMEOUT:-900}" qemu-system-x86_64 -nodefaults -machine accel=tcg -cpu max \
    -smp 2 -m 512M -display none -no-reboot -monitor none \
    -serial "file:$log" \
    -kernel "$dir/vmlinuz" -initrd "$tmp/initrd.cpio" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3"
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  *) die "usage: $0 build | run NCCLRUN SCRIPT LOG" ;;
esac
