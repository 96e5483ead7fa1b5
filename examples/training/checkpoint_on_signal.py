# A training loop that saves when told: run it with
#   ncclrun --stop-grace 120s --checkpoint-signal SIGUSR1 -- torchrun ... checkpoint_on_signal.py
# On SIGTERM ncclrun sends SIGUSR1 to each worker, which finishes its step,
# saves and exits; torchrun gets SIGTERM once every worker has exited.
import os, signal, time
import torch

stop = []
signal.signal(signal.SIGUSR1, lambda signum, frame: stop.append(signum))
rank, step = int(os.environ.get("RANK", "0")), 0
os.write(1, f"rank {rank}: training\n".encode())  # one write: two ranks' lines never interleave
while not stop:
    step += 1  # one training step
    time.sleep(0.1)
path = os.path.join(os.environ.get("CHECKPOINT_DIR", "."), f"rank{rank}.pt")
torch.save({"step": step}, path + ".tmp")
os.replace(path + ".tmp", path)  # a reader never sees half a checkpoint
