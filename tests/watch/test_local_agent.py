"""`mcd start --config-dir` without a cluster, in process on a sandbox root: the directory's desired
config is applied, a burst of updates within the grace period is one update with at most one
reboot, and the state goes to the records `mcd status` reads."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from atomicwriter import publish
from builders import ign_file, mc_object
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent.applied import Applied
from mcd.agent.local import LocalAgent
from mcd.agent.node_apply import NodeApplier
from mcd.config.machineconfig import MachineConfig
from mcd.host.root import HostRoot
from mcd.host.status import read_status

A = "/etc/mcd-test/a.conf"


def _version(name: str, text: str) -> dict[str, str]:
    return {"config.json": json.dumps(mc_object(name, files=[ign_file(A, text)])), "desiredConfig": name}


def _eventually(pred: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class CountingApplier(NodeApplier):
    """A NodeApplier that keeps the name of every config it applied and counts the reboots asked of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.applied: list[str] = []  # oldest first
        self.reboots = 0

    def apply(self, old: MachineConfig, new: MachineConfig, *args: Any, **kwargs: Any) -> Applied:
        done = super().apply(old, new, *args, **kwargs)
        self.applied.append(new.name)
        return done

    def reboot(self, reason: str) -> bool:
        self.reboots += 1
        return super().reboot(reason)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, Path, LocalAgent]]:
    root = make_sandbox_root(tmp_path / "root")
    cm = tmp_path / "cm"
    publish(cm, _version("rendered-a", "a=1\n"))
    applier = CountingApplier(HostRoot(root), RecordingRunner().expect(["systemctl"]))
    agent = LocalAgent(applier, cm, grace=0.5)
    thread = threading.Thread(target=agent.run)
    thread.start()
    yield root, cm, agent
    agent.request_stop()
    thread.join(10)
    assert not thread.is_alive()


def _in(root: Path, name: str) -> Callable[[], bool]:
    def pred() -> bool:
        s = read_status(HostRoot(root))
        return s.current_config == name and s.state == "Done"

    return pred


def test_the_desired_config_is_applied_and_recorded(running: tuple[Path, Path, LocalAgent]) -> None:
    root, _, agent = running
    _eventually(_in(root, "rendered-a"), "rendered-a applied")
    assert (root / A.lstrip("/")).read_text() == "a=1\n"
    assert _counted(agent).applied == ["rendered-a"]


def test_a_burst_of_five_updates_is_one_update_with_one_reboot(
    running: tuple[Path, Path, LocalAgent],
) -> None:
    root, cm, agent = running
    _eventually(_in(root, "rendered-a"), "rendered-a applied")
    reboots = _counted(agent).reboots
    for n in range(1, 6):
        publish(cm, _version(f"rendered-b{n}", f"a={n + 1}\n"))
    _eventually(_in(root, "rendered-b5"), "the last of the burst applied")
    assert (root / A.lstrip("/")).read_text() == "a=6\n"
    assert _counted(agent).applied == ["rendered-a", "rendered-b5"]  # only the last of the burst
    assert _counted(agent).reboots - reboots <= 1
    assert agent.source.due_in() is None


def test_drift_degrades_and_putting_it_back_is_done(running: tuple[Path, Path, LocalAgent]) -> None:
    root, _, _ = running
    _eventually(_in(root, "rendered-a"), "rendered-a applied")
    _eventually(lambda: _monitoring(running[2]), "the drift monitor")
    (root / A.lstrip("/")).write_text("a=9\n")
    _eventually(lambda: read_status(HostRoot(root)).state == "Degraded", "Degraded recorded")
    assert read_status(HostRoot(root)).reason == f'content mismatch for file "{A}"'
    (root / A.lstrip("/")).write_text("a=1\n")
    _eventually(_in(root, "rendered-a"), "Done again")


def _counted(agent: LocalAgent) -> CountingApplier:
    assert isinstance(agent.applier, CountingApplier)
    return agent.applier


def _monitoring(agent: LocalAgent) -> bool:
    return agent.drift.monitor is not None
