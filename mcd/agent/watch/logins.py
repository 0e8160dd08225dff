"""The SSH login monitor: follow the journal for logind's "New session" entries of this boot.

Upstream ran `journalctl -b -f -u systemd-logind.service MESSAGE_ID=8d45620c…` and annotated
the node `machineconfiguration.openshift.io/ssh=accessed` on each line, until it dropped the
monitor in OCP 4.14; admins still read the annotation. This one reads the journal through
`systemd.journal.Reader` (no process to keep alive), matches the same message id from the
same unit, this boot only, and counts new sessions; the daemon's loop does the reporting.
It is the one importer of `systemd.journal`. The follower runs under the agent's guard: a
journal read that fails reopens the journal after a backoff and goes on after the last entry
it counted (its cursor), so no session is counted twice or lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import systemd.journal as sd_journal

from mcd.host.root import HostRoot
from mcd.runtime import guard

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
        self._reader: sd_journal.Reader | None = None
        self._cursor = ""  # the last entry counted: a reopened journal goes on after it

    def start(self) -> None:
        if self._thread is not None:
            return
        if self.path is not None and not Path(self.path).is_dir():
            LOG.info("no journal at %s: SSH logins are not watched", self.path)
            return
        self._reader = self._open()
        self._stop.clear()
        self._thread = guard.spawn("login-monitor", self._follow, self._stop, on_restart=self._reopen)

    def _open(self) -> sd_journal.Reader:
        reader = sd_journal.Reader(path=self.path) if self.path else sd_journal.Reader()
        reader.this_boot()
        reader.add_match(MESSAGE_ID=NEW_SESSION, _SYSTEMD_UNIT=LOGIND_UNIT)
        if self._cursor:
            reader.seek_cursor(self._cursor)
            reader.get_next()  # the entry at the cursor was counted already
        return reader

    def _reopen(self) -> None:
        old, self._reader = self._reader, None
        if old is not None:
            old.close()
        self._reader = self._open()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def take(self) -> int:
        """Sessions started since the last call."""
        with self._lock:
            n, self._new = self._new, 0
        return n

    def _follow(self) -> None:
        reader = self._reader
        assert reader is not None
        while not self._stop.is_set():
            n = 0
            for entry in reader:  # every entry of this boot so far, then only new ones
                n += 1
                self._cursor = str(entry.get("__CURSOR", "")) or self._cursor
            if n:
                with self._lock:
                    self._new += n
                LOG.info("%d new login session(s) in the journal", n)
                self._on_login()
            reader.wait(_WAIT_SECONDS)
