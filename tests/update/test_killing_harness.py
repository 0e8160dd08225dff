"""The crash tests' harness (tests/killing.py): a killed update leaves nothing running that could
still change the tree while it is inspected, commands in sessions of their own included (the
runner starts each in one, so that a timeout kills its whole group)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from killing import in_child


@pytest.mark.allow_commands
def test_a_killed_childs_commands_in_their_own_sessions_die_with_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    def update() -> None:
        # as mcd.host.runner starts a command: its own session; then the daemon dies mid-command
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        pidfile.write_text(str(proc.pid))
        os.kill(os.getpid(), signal.SIGKILL)

    assert in_child(update, None) == signal.SIGKILL
    orphan = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(orphan, 0)  # killed and reaped: not even a zombie is left
