# shellcheck shell=sh disable=SC2086,SC3043
# (the commands below are words on purpose; busybox's sh has local)
# The scenarios of the Soft-RoCE suite, run as root by the VM's init
# (scripts/rdma-vm.sh run) once rxe0 is ACTIVE on dummy0. Each scenario
# prints, on the serial console:
#
#   @@@ BEGIN <name>
#   @@@ PART <part>        stdout, stderr, report (ncclrun --report), b64 ...
#   <the part's bytes>
#   @@@ END <name> rc=<exit status>
#
# rdma/rdma_test.go parses these blocks and judges them; this script judges
# nothing. busybox's sh runs its own applets before PATH, so the real tools
# are called by full path.

N=/opt/ncclrun
W=/tmp/w
mkdir -p $W
chmod 777 $W

# 64 KiB, soft and hard: the limit containerd and Docker pass on, below any
# registration the scenarios make (128 KiB for pingpong, 1 MiB for perftest).
LIM="/usr/bin/prlimit --memlock=65536:65536"
# The Kubernetes trap: uid 1000, IPC_LOCK added to the container (so in the
# bounding set), nothing else.
TRAP="/usr/bin/setpriv --reuid 1000 --regid 1000 --clear-groups --inh-caps=-all --bounding-set -all,+ipc_lock"
PP="/usr/bin/ibv_rc_pingpong -d rxe0 -g 1 -s 131072 -n 3"
WB="/usr/bin/ib_write_bw -d rxe0 -x 1 -s 1048576 -n 5"

# emit NAME RC PART...: print $W/NAME.PART for each part that exists.
emit() {
  local name=$1 rc=$2 p
  shift 2
  echo "@@@ BEGIN $name"
  for p in "$@"; do
    [ -e "$W/$name.$p" ] || continue
    echo "@@@ PART $p"
    cat "$W/$name.$p"
    echo
  done
  echo "@@@ END $name rc=$rc"
}

# one NAME CMD...: run CMD; %R in it is NAME's report file.
one() {
  local name=$1 cmd
  shift
  cmd=$(echo "$*" | sed "s|%R|$W/$name.report|g")
  eval "timeout 120 $cmd" >"$W/$name.stdout" 2>"$W/$name.stderr"
  emit "$name" $? stdout stderr report
}

# listening PID PORT: wait until PID listens on TCP PORT (true) or has
# exited (false).
listening() {
  local hex
  hex=$(printf '%04X' "$2")
  while kill -0 "$1" 2>/dev/null; do
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 && return 0
    usleep 20000
  done
  return 1
}

# pair NAME PORT CMD...: run CMD as the server, then, once it listens (or
# has failed), CMD 127.0.0.1 as the client; %R is each one's report file.
pair() {
  local name=$1 port=$2 s c spid crc src
  shift 2
  s=$(echo "$* -p $port" | sed "s|%R|$W/$name-server.report|g")
  c=$(echo "$* -p $port 127.0.0.1" | sed "s|%R|$W/$name-client.report|g")
  eval "timeout 180 $s" >"$W/$name-server.stdout" 2>"$W/$name-server.stderr" &
  spid=$!
  listening $spid "$port"
  eval "timeout 180 $c" >"$W/$name-client.stdout" 2>"$W/$name-client.stderr"
  crc=$?
  wait $spid
  src=$?
  emit "$name-server" $src stdout stderr report
  emit "$name-client" $crc stdout stderr report
}

# doctor on the live system, as root and in the trap state, and a snapshot
# of each, read back on the host.
one doctor-root $N doctor --json
one doctor-trap $LIM $TRAP $N doctor --json
$N snapshot -o - >$W/snapshot-root.tgz 2>$W/snapshot-root.stderr
rc=$?
base64 $W/snapshot-root.tgz >$W/snapshot-root.b64
emit snapshot-root $rc stderr b64
$LIM $TRAP $N snapshot -o - >$W/snapshot-trap.tgz 2>$W/snapshot-trap.stderr
rc=$?
base64 $W/snapshot-trap.tgz >$W/snapshot-trap.b64
emit snapshot-trap $rc stderr b64

# The trap: real registrations fail, under ncclrun and without it.
pair pingpong-trap 18515 $LIM $TRAP $N --report %R -- $PP
pair writebw-trap 18516 $LIM $TRAP $N --report %R -- $WB
pair pingpong-trap-plain 18517 $LIM $TRAP $PP
pair writebw-trap-plain 18518 $LIM $TRAP $WB
# At 32 KiB or less libibverbs also warns about RLIMIT_MEMLOCK.
one pingpong-32k /usr/bin/prlimit --memlock=32768:32768 $TRAP $N --report %R -- $PP -p 18519
one pingpong-32k-plain /usr/bin/prlimit --memlock=32768:32768 $TRAP $PP -p 18520

# The ways out, each under the same 64 KiB limit.
# (a) root keeping IPC_LOCK, SETUID and SETGID drops to the user itself.
pair way-user 18521 $LIM /usr/bin/setpriv --inh-caps=-all --bounding-set -all,+ipc_lock,+setuid,+setgid \
  $N --report %R --user=1000:1000 -- $PP
one way-user-dump $LIM /usr/bin/setpriv --inh-caps=-all --bounding-set -all,+ipc_lock,+setuid,+setgid \
  $N --user=1000:1000 -- /usr/bin/setpriv --dump
# (b) the cap_ipc_lock+p binary exec'd by uid 1000 under no_new_privs, as a
# runtime does for allowPrivilegeEscalation: false (setpriv, like runc's
# init, still holds IPC_LOCK in its permitted set when it execs).
cp $N /opt/ncclrun-cap
/usr/sbin/setcap cap_ipc_lock+p /opt/ncclrun-cap
one getcap /usr/sbin/getcap /opt/ncclrun-cap
pair way-filecap 18522 $LIM $TRAP --no-new-privs /opt/ncclrun-cap --report %R -- $PP
# ... and the same behind a shell, which holds nothing to pass on.
one way-filecap-shell $LIM $TRAP --no-new-privs /bin/sh -c "'/opt/ncclrun-cap --report %R -- $PP -p 18523'"
one doctor-filecap-shell $LIM $TRAP --no-new-privs /bin/sh -c "'/opt/ncclrun-cap doctor --json'"
# (c) a raised limit: a hard limit above the need, which ncclrun raises the
# soft one to.
pair way-raise 18524 /usr/bin/prlimit --memlock=65536:unlimited $TRAP $N --report %R -- $PP

dmesg >$W/dmesg.stdout
emit dmesg 0 stdout
