#!/bin/sh
# A remote-shell agent for Open MPI's plm_rsh_agent that, like ssh, passes
# no environment on: $1 is the host name (every "host" is this machine),
# the rest is the command to run there. Each "host" gets a temporary
# directory of its own, as separate machines would (two daemons sharing
# /tmp race for one session directory).
shift
d=$(mktemp -d)
env -i PATH="$PATH" HOME="${HOME:-/}" TMPDIR="$d" sh -c "$*"
rc=$?
rm -rf "$d"
exit $rc
