"""sd_notify through systemd-python, only when systemd started us with a notify socket."""

from __future__ import annotations

import logging
import os

import systemd.daemon as sd_daemon

LOG = logging.getLogger(__name__)


def notify(message: str) -> None:
    """Send `message` (READY=1, WATCHDOG=1 …) to systemd; nothing outside a notify service."""
    if not os.environ.get("NOTIFY_SOCKET"):
        return
    try:
        sd_daemon.notify(message)
    except OSError as exc:
        LOG.warning("sd_notify %s failed: %s", message, exc)


def watchdog_interval() -> float | None:
    """Half the watchdog period systemd asks for (WATCHDOG_USEC), or None without a watchdog."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2e6
