"""The SSH login monitor: follow the journal for logind's "New session" entries of this boot.

Upstream ran `journalctl -b -f -u systemd-logind.service MESSAGE_ID=8d45620c…` and annotated
the node `machineconfiguration.openshift.io/ssh=accessed` on each line, until it dropped the
monitor in OCP 4.14; admins still read the annotation. This one reads the journal through
`systemd.journal.Reader` (no process to keep alive), matches the same message id from the
same unit, this boot only, and counts new sessions; the daemon's loop does the reporting.
It is the one importer of `systemd.journal`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import systemd.journal as sd_journal

from mcd.host.root import HostRoot

LOG = logging.getLogger(__name__)

# sd-messages.h SD_MESSAGE_SESSION_START: "New session %s of user %s."
NEW_SESSION = "8d45620c1a4348dbb17410da57c60c66"
LOGIND_UNIT = "systemd-logind.service"
SSH_ANNOTATION = "machineconfiguration.openshift.io/ssh"
SSH_ACCESSED = "accessed"
# how often the follower looks at its stop flag when the journal is quiet
_WAIT_SECONDS = 0.5


def journal_dir(root: HostRoot) -> str | None:
    """Where the node's journal is: None for the live root (the system journal), else the root's
    persistent journal, or its volatile one when it has no persistent one."""
    if root.is_live:
        return None
    for sub in ("var/log/journal", "run/log/journal"):
        candidate = Path(root.prefix) / sub
        if candidate.is_dir():
            return str(candidate)
    return str(Path(root.prefix) / "var/log/journal")


class LoginMonitor:
    """Counts logind "New session" entries of this boot; `on_login` is called when new ones arrive."""

    def __init__(self, on_login: Callable[[], None], *, path: str | None = None) -> None:
        self._on_login = on_login
        self.path = path
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._new = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        if self.path is not None and not Path(self.path).is_dir():
            LOG.info("no journal at %s: SSH logins are not watched", self.path)
            return
        reader = sd_journal.Reader(path=self.path) if self.path else sd_journal.Reader()
        reader.this_boot()
        reader.add_match(MESSAGE_ID=NEW_SESSION, _SYSTEMD_UNIT=LOGIND_UNIT)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._follow, args=(reader,), name="login-monitor", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def take(self) -> int:
        """Sessions started since the last call."""
        with self._lock:
            n, self._new = self._new, 0
        return n

    def _follow(self, reader: sd_journal.Reader) -> None:
        try:
            while not self._stop.is_set():
                n = sum(1 for _ in reader)  # every entry of this boot so far, then only new ones
                if n:
                    with self._lock:
                        self._new += n
                    LOG.info("%d new login session(s) in the journal", n)
                    self._on_login()
                reader.wait(_WAIT_SECONDS)
        except OSError as exc:  # a journal that went away: logins are not watched any more
            LOG.error("reading the journal for SSH logins failed: %s", exc)
        finally:
            reader.close()
