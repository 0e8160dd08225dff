"""Run the mcd CLI, pausing once the root's lock is taken (the failpoint `root locked`).

`python tests/lockholder.py READY GO ARGS...`: at the failpoint the process writes a line to
file descriptor READY and blocks reading one byte from GO, so a test holds a real `mcd` process
inside its locked section for exactly as long as it wants, with no sleep.
"""

from __future__ import annotations

import os
import sys

from mcd.cli.main import main
from mcd.host import failpoints


def _pause_at_lock(ready: int, go: int) -> failpoints.Hook:
    def hook(name: str) -> None:
        if name == "root locked":
            failpoints.install(None)  # pause once: nested holds do not hit it anyway
            os.write(ready, b"locked\n")
            os.read(go, 1)

    return hook


if __name__ == "__main__":
    failpoints.install(_pause_at_lock(int(sys.argv[1]), int(sys.argv[2])))
    sys.exit(main(sys.argv[3:]))
