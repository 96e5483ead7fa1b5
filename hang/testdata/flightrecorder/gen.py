#!/usr/bin/env python3
"""Writes the flight-recorder dumps the hang package's tests read.

These dumps were NOT produced by PyTorch. They are written from the schema
of PyTorch's flight recorder (torch/csrc/distributed/c10d/FlightRecorder*.hpp
and the older TraceUtils.h; the flight recorder tutorial's example): a dict
of "version", "pg_config", "pg_status" and "entries", pickled with protocol 2
as torch::jit::Pickler writes it. What changed between torch releases is
modelled as follows (the "version" string is the format's, not torch's):

  torch 2.3  format "2.3"   entries carry seq_id (no collective/p2p split), no pg_status
  torch 2.4  format "2.4"   collective_seq_id / p2p_seq_id, input/output dtypes, pg_status
  torch 2.5  format "2.5"   + is_p2p, timeout_ms
  torch 2.6  format "2.5"
  torch 2.7  format "2.7"   + duration_ms
  torch 2.8  format "2.7"
  torch 2.9  format "2.7"
  torch 2.10 format "2.10"  + last_started_collective, thread_id/thread_name, comm_lib_version

From 2.7 on, typed int lists are written as torch.jit._pickle.build_intlist
calls; in 2.9 and 2.10 every entry is also wrapped in restore_type_tag, as
the jit pickler does with type tags on.

Every dump is rank 1 of a two-rank job whose PG 0 completed all_reduce 1..5,
then got stuck in all_reduce 6 (1024 floats) with a broadcast 7 queued after it.

Also written: a truncated dump and small hostile pickles (lengths past the
end of the data, a huge frame, a malformed SETITEMS, a pickle that is not a
dump), which the reader must refuse in bounded time and memory. The large
hostile inputs (deep marks, allocation bombs, a long of a million digits)
are made by the Go tests themselves rather than committed.

Run it from this directory: python3 gen.py
"""
import pickle
import struct
import sys
import types

# torch::jit::Pickler writes typed int lists as a call of
# torch.jit._pickle.build_intlist; a stand-in module lets pickle name it.
jit = types.ModuleType("torch.jit._pickle")


def build_intlist(xs):
    return xs


build_intlist.__module__ = "torch.jit._pickle"
jit.build_intlist = build_intlist
for name in ("torch", "torch.jit", "torch.jit._pickle"):
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules["torch.jit._pickle"] = jit


class IntList(list):
    def __reduce__(self):
        return (build_intlist, (list(self),))


def restore_type_tag(value, type_str):
    return value


restore_type_tag.__module__ = "torch.jit._pickle"
jit.restore_type_tag = restore_type_tag


class TaggedDict(dict):
    """A dict as torch::jit::Pickler writes one with its type tag."""

    def __reduce__(self):
        return (restore_type_tag, (dict(self), "Dict[str, Any]"))


FORMATS = {
    "2.3": "2.3", "2.4": "2.4", "2.5": "2.5", "2.6": "2.5",
    "2.7": "2.7", "2.8": "2.7", "2.9": "2.7", "2.10": "2.10",
}


def newer(torch, than):
    return tuple(map(int, torch.split("."))) >= tuple(map(int, than.split(".")))


def entry(torch, rid, seq, op, state, numel, p2p=False, p2p_seq=0):
    shape = IntList([numel]) if newer(torch, "2.7") else [numel]
    e = {
        "record_id": rid,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "profiling_name": op,
        "time_created_ns": 1733500000000000000 + rid * 1000,
        "input_sizes": [shape],
        "output_sizes": [shape],
        "state": state,
        "time_discovered_started_ns": None if state == "scheduled" else 1733500000000000500 + rid * 1000,
        "time_discovered_completed_ns": 1733500000000000900 + rid * 1000 if state == "completed" else None,
        "retired": state == "completed",
        "frames": [
            {"name": "all_reduce", "filename": "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", "line": 2050},
            {"name": "train_step", "filename": "/work/train.py", "line": 42},
        ],
    }
    if newer(torch, "2.4"):
        e["collective_seq_id"] = 0 if p2p else seq
        e["p2p_seq_id"] = p2p_seq if p2p else 0
        e["op_id"] = rid + 1
        e["input_dtypes"] = ["Float"]
        e["output_dtypes"] = ["Float"]
    else:
        e["seq_id"] = seq
    if newer(torch, "2.5"):
        e["is_p2p"] = p2p
        e["timeout_ms"] = 600000
    if newer(torch, "2.7"):
        e["duration_ms"] = 1.5 if state == "completed" else None
    if newer(torch, "2.10"):
        e["thread_id"] = 140000000000001
        e["thread_name"] = "pt_main_thread"
    if newer(torch, "2.9"):
        return TaggedDict(e)
    return e


def dump(torch):
    es = []
    rid = 0
    for seq in range(1, 6):
        es.append(entry(torch, rid, seq, "nccl:all_reduce", "completed", 1024))
        rid += 1
    if newer(torch, "2.4"):
        es.append(entry(torch, rid, 0, "nccl:send 1->0", "completed", 16, p2p=True, p2p_seq=1))
        rid += 1
    es.append(entry(torch, rid, 6, "nccl:all_reduce", "scheduled", 1024))
    es.append(entry(torch, rid + 1, 7, "nccl:broadcast", "scheduled", 8))
    d = {
        "version": FORMATS[torch],
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "entries": es,
    }
    if newer(torch, "2.4"):
        st = {"last_enqueued_collective": 7, "last_completed_collective": 5}
        st["last_started_collective"] = 6 if newer(torch, "2.10") else -1
        d["pg_status"] = {"0": st}
    if newer(torch, "2.10"):
        d["comm_lib_version"] = "2.27.5"
    return d


def main():
    for torch in FORMATS:
        with open(f"torch-{torch}_rank_1", "wb") as f:
            pickle.dump(dump(torch), f, protocol=2)
    whole = pickle.dumps(dump("2.10"), protocol=2)
    with open("truncated_rank_1", "wb") as f:
        f.write(whole[: len(whole) * 2 // 3])
    hostile = {
        # BINUNICODE claiming 4 GiB
        "hostile-length": b"\x80\x02X\xf0\xff\xff\xff" + b"abc",
        # BINUNICODE8 claiming 2^63 bytes
        "hostile-length8": b"\x80\x04\x8d" + struct.pack("<Q", 1 << 63) + b"abc.",
        # a frame larger than the data
        "hostile-frame": b"\x80\x04\x95" + struct.pack("<Q", 1 << 40) + b"N.",
        # a SETITEMS with an odd number of items
        "hostile-setitems": b"\x80\x02}(N" + b"u.",
        # not a dump: a bare string
        "hostile-string": pickle.dumps("not a dump", protocol=2),
    }
    for name, data in hostile.items():
        with open(name, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
