"""Keeping a control plane up for a person until they end it (scripts/kube/cluster.py, demo.py)."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def wait_for_stop_signal() -> None:
    """Wait for Ctrl-C or SIGTERM. Both only end the wait, never raise, so the caller's clean-up
    (stopping the server, removing its files) runs whichever ends it."""
    done = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    done.wait()
