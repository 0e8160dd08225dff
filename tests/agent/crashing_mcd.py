"""`python crashing_mcd.py N ARGS...`: run `mcd ARGS...`, SIGKILLed at its N-th crash point.

The crash points are mcd.host.failpoints' (every one of them lies inside an update transaction); a
simulated reboot execs plain `python -m mcd`, so the restarted agent runs without the hook.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from mcd.cli.main import main
from mcd.host import failpoints


def _arm(kill_at: int) -> None:
    lock, count = threading.Lock(), [0]

    def hook(name: str) -> None:
        with lock:  # batched writes pass crash points from worker threads
            count[0] += 1
            kill = count[0] == kill_at
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)

    failpoints.install(hook)


if __name__ == "__main__":
    _arm(int(sys.argv[1]))
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    sys.exit(main())
