"""Issue 8.2: one update per root at a time, with two real `mcd` processes.

The first process is paused right after taking the root's lock (failpoint `root locked`,
`tests/lockholder.py`), synchronised through pipes: no sleeps. The second must wait or fail
cleanly and never touch the first one's work; afterwards the node is consistent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import walk

from mcd.agent.node_apply import NodeApplier
from mcd.host.root import HostRoot
from mcd.host.rootlock import RootLockError, hold
from mcd.host.runner import SubprocessRunner

pytestmark = pytest.mark.allow_commands

HOLDER = Path(__file__).resolve().parent.parent / "lockholder.py"
UNIT = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"


def config(tmp: Path, name: str, path: str) -> str:
    obj: dict[str, Any] = mc_object(
        name,
        files=[{"path": path, "contents": {"source": data_url(f"{name}\n")}, "mode": 0o644}],
        units=[{"name": f"{name}.service", "enabled": True, "contents": UNIT}],
    )
    out = tmp / f"{name}.json"
    out.write_text(json.dumps(obj))
    return str(out)


def once_from(root: Path, tmp: Path, name: str, path: str) -> list[str]:
    """`mcd start --once-from` of config `name` (writing `path`) on `root`, no reboot."""
    return ["start", "--once-from", config(tmp, name, path), "--root-mount", str(root), "--skip-reboot"]


def mcd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcd", *argv], capture_output=True, text=True, timeout=300, check=False
    )


class Paused:
    """A real `mcd` process stopped inside its locked section until `release`."""

    def __init__(self, *argv: str) -> None:
        ready_r, self._ready_w = os.pipe()
        self._go_r, go_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, str(HOLDER), str(self._ready_w), str(self._go_r), *argv],
            pass_fds=(self._ready_w, self._go_r),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(self._ready_w)
        os.close(self._go_r)
        self._go = go_w
        with os.fdopen(ready_r) as ready:
            line = ready.readline()  # returns once the lock is held (or "" if the process died)
        assert line == "locked\n", self.proc.communicate()

    def release(self) -> tuple[int, str, str]:
        os.write(self._go, b"x")
        os.close(self._go)
        out, err = self.proc.communicate(timeout=300)
        return self.proc.returncode, out, err


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_sandbox_root(tmp_path / "root")


@pytest.fixture
def first(root: Path, tmp_path: Path) -> Iterator[Paused]:
    paused = Paused(
        *once_from(root, tmp_path, "first", "/etc/first"),
    )
    yield paused
    if paused.proc.returncode is None:
        paused.proc.kill()
        paused.proc.communicate()


def recorded(root: Path) -> str:
    current = json.loads((root / "etc/machine-config-daemon/currentconfig").read_text())
    name: str = current["metadata"]["name"]
    return name


def assert_consistent(root: Path, name: str) -> None:
    assert recorded(root) == name
    check = mcd("check-disk", "--root-mount", str(root))
    assert (check.returncode, check.stdout) == (0, f"on-disk state matches {name}\n"), check.stderr
    assert (root / f"etc/{name}").read_text() == f"{name}\n"
    assert (root / f"etc/systemd/system/multi-user.target.wants/{name}.service").is_symlink()


def test_a_second_update_fails_at_once_and_touches_nothing(root: Path, tmp_path: Path, first: Paused) -> None:
    before = walk(root)
    second = mcd(
        *once_from(root, tmp_path, "second", "/etc/second"),
        "--lock-timeout",
        "0",
    )
    assert second.returncode == 1
    assert second.stdout == ""
    # the last line is the failure (the lines before it are once-from's phases, in klog's shape)
    assert second.stderr.splitlines()[-1] == (
        f"mcd: another mcd is updating {root} (held by pid {first.proc.pid}): "
        "gave up waiting for /run/mcd.lock after 0 s (--lock-timeout)"
    )
    assert walk(root) == before
    assert first.release()[0] == 0
    assert_consistent(root, "first")
    assert not (root / "etc/second").exists()


def test_a_second_update_waits_and_applies_on_top_of_the_first(
    root: Path, tmp_path: Path, first: Paused
) -> None:
    second = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcd",
            *once_from(root, tmp_path, "second", "/etc/second"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert second.stderr is not None
    # the second announces it waits (after once-from's first phases): only then let the first go
    waiting = second.stderr.readline()
    while waiting and "waiting for the lock" not in waiting:
        waiting = second.stderr.readline()
    assert waiting.startswith("W")  # klog's shape: W1128 12:00:00.123456   PID rootlock.py:LINE] …
    assert waiting.split("] ", 1)[1] == f"waiting for the lock on {root} (held by pid {first.proc.pid})\n"
    assert first.release()[0] == 0
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert json.loads(out)["from"] == "first"  # it read the node's config after the first committed
    assert_consistent(root, "second")
    assert not (root / "etc/first").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ("check-disk",),
        ("plan", "NEW"),
        (
            "firstboot-complete-machineconfig",
            "--machineconfig-file",
            "/etc/encapsulated.json",
            "--skip-reboot",
        ),
    ],
)
def test_readers_and_firstboot_take_the_lock_too(
    root: Path, tmp_path: Path, first: Paused, argv: tuple[str, ...]
) -> None:
    new = config(tmp_path, "other", "/etc/other")
    (root / "etc/encapsulated.json").write_text(Path(new).read_text())
    before = walk(root)
    args = [new if a == "NEW" else a for a in argv]
    result = mcd(*args, "--root-mount", str(root), "--lock-timeout", "0")
    assert result.returncode == 1
    assert result.stderr.startswith(f"mcd: another mcd is updating {root} (held by pid {first.proc.pid})")
    assert walk(root) == before
    assert first.release()[0] == 0
    assert_consistent(root, "first")


def test_the_agents_recovery_takes_the_lock(root: Path, first: Paused) -> None:
    applier = NodeApplier(HostRoot(root), SubprocessRunner(), lock_timeout=0)
    with pytest.raises(RootLockError, match=f"held by pid {first.proc.pid}"):
        applier.recover()
    assert first.release()[0] == 0


def test_a_lock_left_by_a_killed_process_does_not_block(root: Path, tmp_path: Path) -> None:
    code = (
        "import fcntl, os, signal, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(root / "run/mcd.lock")], check=False)
    assert killed.returncode == -signal.SIGKILL
    result = mcd(
        *once_from(root, tmp_path, "first", "/etc/first"),
        "--lock-timeout",
        "0",
    )
    assert result.returncode == 0, result.stderr
    assert_consistent(root, "first")


def test_the_lock_nests_in_one_process_and_a_reader_cannot_upgrade(root: Path) -> None:
    host_root = HostRoot(root)
    with hold(host_root), hold(host_root, timeout=0), hold(host_root, shared=True, timeout=0):
        pass
    with hold(host_root, shared=True), pytest.raises(RootLockError, match="shared lock"), hold(host_root):
        pass
