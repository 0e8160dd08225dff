"""The SSH login monitor reads real journal files: logind "New session" entries of this boot count,
anything else does not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from journals import entry, new_session, write_journal

from mcd.agent.watch.logins import LoginMonitor

pytestmark = pytest.mark.allow_commands


class Logins:
    """The monitor's consumer: takes the new sessions when told, and keeps their total."""

    def __init__(self) -> None:
        self.changed = threading.Event()
        self.total = 0

    def take(self, monitor: LoginMonitor) -> int:
        n = monitor.take()
        self.total += n
        return n

    def wait_count(self, monitor: LoginMonitor, want: int, timeout: float = 5.0) -> int:
        got = 0
        while got < want:
            if not self.changed.wait(timeout):
                break
            self.changed.clear()
            got += self.take(monitor)
        return got


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[tuple[Path, LoginMonitor, Logins]]:
    logins = Logins()
    directory = tmp_path / "journal"
    directory.mkdir()
    monitor = LoginMonitor(logins.changed.set, path=str(directory))
    yield directory, monitor, logins
    monitor.stop()


def test_a_new_session_of_this_boot_counts(watching: tuple[Path, LoginMonitor, Logins]) -> None:
    directory, monitor, logins = watching
    write_journal(directory / "a.journal", [entry("Started foo."), new_session(1), new_session(2)])
    monitor.start()
    assert logins.wait_count(monitor, 2) == 2
    assert logins.take(monitor) == 0
    assert logins.total == 2


def test_no_session_entry_no_login(watching: tuple[Path, LoginMonitor, Logins]) -> None:
    directory, monitor, logins = watching
    other_boot = "0123456789abcdef0123456789abcdef"
    write_journal(directory / "a.journal", [
        entry("Started foo."),
        new_session(1, boot=other_boot),  # an earlier boot
        new_session(2, unit="sshd.service"),  # the message id, but not from logind
        entry("Session 3 logged out.", message_id="3354939424b4456d9802ca8333ed424a", seq=3),
    ])  # fmt: skip
    monitor.start()
    # a later file with a session proves the monitor read past the others
    write_journal(directory / "b.journal", [new_session(4)])
    assert logins.wait_count(monitor, 1) == 1
    assert logins.take(monitor) == 0
    assert logins.total == 1


def test_sessions_after_start_are_followed(watching: tuple[Path, LoginMonitor, Logins]) -> None:
    directory, monitor, logins = watching
    write_journal(directory / "a.journal", [entry("Started foo.")])
    monitor.start()
    write_journal(directory / "b.journal", [new_session(7)])
    assert logins.wait_count(monitor, 1) == 1


def test_a_missing_journal_directory_is_not_watched(tmp_path: Path) -> None:
    monitor = LoginMonitor(lambda: None, path=str(tmp_path / "none"))
    monitor.start()
    monitor.stop()
    assert monitor.take() == 0
