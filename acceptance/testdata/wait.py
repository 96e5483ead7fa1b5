# Workers that say "ready" and wait. IGNORE_TERM=1: they ignore SIGTERM,
# so torchrun's shutdown must escalate to SIGKILL after its 30 s.
import os
import signal
import time

if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"ready {os.environ.get('RANK')}", flush=True)
while True:
    time.sleep(3600)
