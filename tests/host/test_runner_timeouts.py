"""Every command has a timeout by its kind; a command past it is killed with its whole process
group and raises CommandTimeout naming the command and the timeout."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mcd.host import runner
from mcd.host.runner import CommandTimeout, SubprocessRunner, command_timeout, longest_timeout


def test_timeouts_by_command_kind() -> None:
    assert command_timeout(["rpm-ostree", "rebase", "x"]) == runner.COMMAND_TIMEOUTS["rpm-ostree"]
    assert command_timeout(["/usr/bin/rpm-ostree", "status"]) == runner.COMMAND_TIMEOUTS["rpm-ostree"]
    assert command_timeout(["chroot", "/rootfs", "systemctl", "reload", "crio"]) == 300.0
    assert command_timeout(["update-ca-trust"]) == runner.DEFAULT_TIMEOUT
    assert command_timeout([]) == runner.DEFAULT_TIMEOUT
    # rpm-ostree is the longest, and longer than systemctl
    assert longest_timeout() == runner.COMMAND_TIMEOUTS["rpm-ostree"] > command_timeout(["systemctl"])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too (the test process is not its parent, init reaps it)
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.allow_commands
def test_a_hung_rpm_ostree_is_killed_with_its_children_at_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported: no timeouts, so a hung rpm-ostree held the loop (and the watchdog) forever."""
    monkeypatch.setitem(runner.COMMAND_TIMEOUTS, "rpm-ostree", 0.5)
    child_pid = tmp_path / "child.pid"
    tool = tmp_path / "rpm-ostree"
    # a child of its own that also hangs: the kill must reach the whole group
    tool.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {child_pid}\necho pulling\nsleep 30\n")
    tool.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as info:
        SubprocessRunner().run([str(tool), "rebase", "x"])
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "rpm-ostree rebase x" in message and "timed out after 0.5s" in message
    assert info.value.result.stdout == "pulling\n"
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # the kernel delivers SIGKILL to the group at once; reaping may lag
    assert not _pid_alive(pid)


@pytest.mark.allow_commands
def test_a_command_within_its_timeout_is_untouched() -> None:
    result = SubprocessRunner().run(["sh", "-c", "echo ok"], timeout=30)
    assert result.stdout == "ok\n" and result.returncode == 0
