#!/bin/sh
# node-init.sh HOST HOSTS CMD...: make this process host HOST of the
# multi-node suite, then exec CMD. It runs in UTS and mount namespaces of
# its own (unshare), inside the node's network namespace: the hostname is
# HOST and the file HOSTS is /etc/hosts (every node's name and address).
hostname "$1" && mount --bind "$2" /etc/hosts || exit 125
shift 2
exec "$@"
