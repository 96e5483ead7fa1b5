#!/usr/bin/env bash
# docker run lines for NCCL training with ncclrun as the image's ENTRYPOINT
# (Dockerfile.base: ENTRYPOINT ["/usr/local/bin/ncclrun", "--"]), so the
# arguments after the image are the training command. Pick one.
#
#   ./docker-run.sh unlimited   # any user: no memlock limit (NCCL's docs)
#   ./docker-run.sh cap         # root in the container: keep CAP_IPC_LOCK
#   ./docker-run.sh user        # root that drops to uid 1000 with CAP_IPC_LOCK
#   ./docker-run.sh reproduce   # the production failure: 64 KiB, no IPC_LOCK
set -euo pipefail

IMAGE="${IMAGE:-registry.example.com/ml/trainer:2026.05}"

case "${1:-unlimited}" in
unlimited)
	# The fix that works for every user: lift the limit itself.
	docker run --rm --gpus all --ulimit memlock=-1:-1 --shm-size=16g \
		"$IMAGE" torchrun --nproc-per-node=8 train.py
	;;
cap)
	# Root in the container: CAP_IPC_LOCK bypasses the limit. It does nothing
	# for --user N (only the bounding set gets it); use "user" for that.
	docker run --rm --gpus all --cap-add IPC_LOCK --shm-size=16g \
		"$IMAGE" torchrun --nproc-per-node=8 train.py
	;;
user)
	# Root container with only IPC_LOCK, SETUID, SETGID; ncclrun runs the
	# trainer as uid 1000 with CAP_IPC_LOCK in its ambient set.
	docker run --rm --gpus all --cap-drop ALL --cap-add IPC_LOCK --cap-add SETUID --cap-add SETGID \
		--security-opt no-new-privileges --shm-size=16g \
		--entrypoint /usr/local/bin/ncclrun \
		"$IMAGE" --user=1000:1000 -- torchrun --nproc-per-node=8 train.py
	;;
reproduce)
	# A default container's memlock and capabilities, to see the failure and
	# ncclrun's diagnosis (no GPU needed: the entrypoint ncclrun runs its own
	# fake NCCL workload).
	docker run --rm --ulimit memlock=65536:65536 --cap-drop IPC_LOCK --shm-size=1g \
		"$IMAGE" /usr/local/bin/ncclrun fake-nccl --ranks 2 --pin 16MiB
	;;
*)
	echo "usage: $0 unlimited|cap|user|reproduce" >&2
	exit 2
	;;
esac
