#!/usr/bin/env bash
# gpu-hang-check.sh: on a machine with one NVIDIA GPU, PyTorch with CUDA and
# NCCL >= 2.24 (RAS), read a real communicator's RAS status and a real
# flight-recorder dump back through ncclrun, in one call:
#
#   scripts/gpu-hang-check.sh [NCCLRUN_BINARY]
#
# A one-rank NCCL job runs an all_reduce, has torch write its flight
# recorder (torch's own pickler, on demand) to the path ncclrun gave it,
# then falls silent (20 s) until ncclrun's --hang-after capture has read RAS. The
# report must then carry RAS's status of that communicator and the dump's
# summary. Exit 0 when both arrived; 1 with the reason otherwise; 77 when
# there is no GPU or no torch with CUDA (nothing was checked).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
  bin=$(mktemp -d)/ncclrun
  CGO_ENABLED=0 go build -o "$bin" ./cmd/ncclrun
fi
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)' 2>/dev/null || {
  echo "gpu-hang-check: no GPU, or no torch with CUDA and NCCL: nothing checked" >&2
  exit 77
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/rank.py" <<'PY'
import os, sys, time
import torch
import torch.distributed as dist

# Each step prints, so that only the silence at the end reaches --hang-after.
print("rank 0: torch", torch.__version__, flush=True)
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1)
print("rank 0: NCCL", ".".join(map(str, torch.cuda.nccl.version())), flush=True)
x = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
time.sleep(2)  # the watchdog marks the collectives completed
prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
dump = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None) or torch._C._distributed_c10d._dump_nccl_trace
with open(prefix + "0", "wb") as f:
    f.write(dump())
print("rank 0: all_reduce done, flight recorder dumped; now silent", flush=True)
# Silent until ncclrun's capture (--hang-after) has written its evidence.
done = os.path.join(os.path.dirname(prefix), "capture.json")
deadline = time.time() + 60
while not os.path.exists(done) and time.time() < deadline:
    time.sleep(0.2)
dist.destroy_process_group()
print("rank 0: exiting", flush=True)
PY
set +e
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" --hang-after 20s --report "$work/report.json" -- python3 "$work/rank.py"
rc=$?
set -e
echo "gpu-hang-check: ncclrun exited $rc"
python3 - "$work/report.json" "$rc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if sys.argv[2] != "0":
    sys.exit("gpu-hang-check: FAIL: ncclrun exited %s (--on-hang warn keeps CMD's 0)" % sys.argv[2])
h = r.get("hang")
fail = []
if not h:
    sys.exit("gpu-hang-check: FAIL: the report has no hang object")
ras = h.get("ras") or {}
print("RAS:", json.dumps({k: ras.get(k) for k in ("addr", "format", "nccl_version", "error", "communicators", "missing", "behind")}))
if ras.get("error") or not ras.get("format"):
    fail.append("RAS status not read: %s" % ras.get("error"))
elif ras.get("format") == "json" and not ras.get("communicators"):
    fail.append("RAS's JSON status lists no communicator")
frs = h.get("flight_recorder") or []
for d in frs:
    print("flight recorder:", json.dumps({k: d.get(k) for k in ("file", "rank", "version", "entries", "error", "pgs")})[:2000])
if not frs or frs[0].get("error") or not frs[0].get("pgs"):
    fail.append("no flight-recorder dump read back")
elif max(pg["last_completed"] for pg in frs[0]["pgs"]) < 1:
    fail.append("the dump shows no completed collective")
if fail:
    sys.exit("gpu-hang-check: FAIL: " + "; ".join(fail))
print("gpu-hang-check: OK: RAS status and flight-recorder dump reached the report")
PY
