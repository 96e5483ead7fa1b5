# Workers that say "ready" and wait. IGNORE_TERM=1: they ignore SIGTERM,
# so torchrun's shutdown must escalate to SIGKILL after its 30 s.
import os
import signal
import time

if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
# One write(2) for the whole line: print() on a terminal can write the text
# and its newline apart, and the two ranks' lines then interleave
# ("ready 0ready 1"), which the tests cannot read.
os.write(1, f"ready {os.environ.get('RANK')}\n".encode())
while True:
    time.sleep(3600)
