#!/bin/sh
# Open MPI's plm_rsh_agent for the multi-node suite, standing in for ssh:
# $1 is a host of the suite, the rest the command to run there. It enters
# the host's network namespace (named in $MN_DIR/HOST.netns), takes the
# host's name and /etc/hosts (node-init.sh), and passes no environment on,
# as ssh does. Each host gets a temporary directory of its own.
h=$1
shift
ns=$(cat "$MN_DIR/$h.netns") || exit 255
d=$(mktemp -d)
ip netns exec "$ns" unshare --uts --mount "$(dirname "$0")/node-init.sh" "$h" "$MN_DIR/hosts" \
  env -i PATH="$PATH" HOME=/ TMPDIR="$d" sh -c "$*"
rc=$?
rm -rf "$d"
exit $rc
