"""`python crashing_mcd.py N ARGS...`: run `mcd ARGS...`, SIGKILLed at its N-th crash point.

The crash points are mcd.failpoints' (every one of them lies inside an update transaction); a
simulated reboot execs plain `python -m mcd`, so the restarted agent runs without the hook.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from mcd import failpoints
from mcd.cli import main


def _arm(kill_at: int) -> None:
    install = getattr(failpoints, "install", None)
    if install is None:
        failpoints.arm(kill_at)
        return
    lock, count = threading.Lock(), [0]

    def hook(name: str) -> None:
        with lock:  # batched writes pass crash points from worker threads
            count[0] += 1
            kill = count[0] == kill_at
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)

    install(hook)


if __name__ == "__main__":
    _arm(int(sys.argv[1]))
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    sys.exit(main())
