#!/usr/bin/env bash
# Reproduce the production failure on a workstation: run a command under a
# default container's locked-memory limit (64 KiB) and without
# CAP_IPC_LOCK, as Docker and Kubernetes start it, and let ncclrun diagnose.
#
#   examples/local/reproduce-memlock.sh                      # fake NCCL, no GPU
#   examples/local/reproduce-memlock.sh torchrun --nproc-per-node=2 train.py
#
# NCCLRUN=path/to/ncclrun overrides the binary (default: ncclrun on PATH,
# else bin/ncclrun of this checkout). MEMLOCK=8MiB reproduces the 8 MiB
# systemd/kernel default instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ncclrun="${NCCLRUN:-}"
if [ -z "$ncclrun" ]; then
	if command -v ncclrun >/dev/null 2>&1; then
		ncclrun="$(command -v ncclrun)"
	else
		ncclrun="$here/../../bin/ncclrun"
	fi
fi
memlock="${MEMLOCK:-64KiB}"

if [ "$#" -eq 0 ]; then
	set -- "$ncclrun" fake-nccl --ranks 2 --pin 16MiB
fi

exec "$ncclrun" run --memlock "$memlock" --drop-cap IPC_LOCK -- "$@"
