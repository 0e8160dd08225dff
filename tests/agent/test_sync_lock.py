"""The root's lock and the drain in the cluster agent (in process, on a sandbox root): the lock is not
held while the drain waits; a second mcd on the root that applied the config meanwhile is not
followed by a second update and reboot; a Node created again during the wait is asked again."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders import ign_file, mc_object
from harness import make_root
from inproc import NODE, MemoryApi, syncer
from recording import RecordingRunner

from mcd.agent.drain import HandshakeDrainer
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.agent.sync import Result
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.update.transaction import Host, update

CONF = "/etc/mcd-test/a.conf"  # a change of it needs a reboot, hence a drain
OLD = mc_object("rendered-worker-a", files=[ign_file(CONF, "a=1\n")])
NEW = mc_object("rendered-worker-b", files=[ign_file(CONF, "a=2\n")])


class _Drainer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock_free: list[bool] = []

    def drain(self, config: str) -> None:
        # what `mcd check-disk` does: a shared lock of its own (another open file description)
        fd = os.open(self.root / "run/mcd.lock", os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            self.lock_free.append(True)
        except BlockingIOError:
            self.lock_free.append(False)
        finally:
            os.close(fd)

    def uncordon(self, config: str) -> None:
        pass


def _setup(tmp_path: Path) -> tuple[Path, MemoryApi]:
    root = make_root(tmp_path, OLD)
    api = MemoryApi(
        {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-b", ann.STATE: "Done"}
    )
    api.mcs["rendered-worker-b"] = NEW
    return root, api


def test_the_roots_lock_is_not_held_while_the_drain_waits(tmp_path: Path) -> None:
    """Reported: the exclusive lock was held through the whole drain wait (up to an hour), so
    check-disk, --once-from and firstboot blocked behind it."""
    root, api = _setup(tmp_path)
    s = syncer(root, api)
    s.drainer = drainer = _Drainer(root)
    assert s.sync(boot=False) is Result.SIMULATED_REBOOT
    assert drainer.lock_free == [True]


class _OtherAgent(_Drainer):
    """While this agent waits for its drain, a second mcd on the root applies the same update."""

    def drain(self, config: str) -> None:
        def mc(obj: dict[str, Any]) -> MachineConfig:
            return machineconfig_from_object(json.loads(json.dumps(obj)), "test")

        host = Host.for_root(HostRoot(self.root), RecordingRunner())
        update(host, mc(OLD), mc(NEW), legacy=False, skip_reboot=True)


def test_two_agents_on_one_root_make_one_reboot_per_update(tmp_path: Path) -> None:
    """Reported: the agent that waited for the lock re-applied the update and rebooted again."""
    root, api = _setup(tmp_path)
    s = syncer(root, api)
    s.drainer = _OtherAgent(root)
    assert s.sync(boot=False) is Result.IDLE  # no second reboot: the other one's is owed
    assert state.pending_reboot(HostRoot(root)) is not None
    assert (root / CONF.lstrip("/")).read_text() == "a=2\n"


def test_a_node_created_again_during_the_drain_wait_is_asked_again(tmp_path: Path) -> None:
    """Reported: a Node deleted and created again while the agent waited for its drain lost the
    desiredDrain request; the agent waited for --drain-timeout (an hour by default)."""
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-b"})
    writer = NodeWriter(api, NODE)
    stop = threading.Event()
    drainer = HandshakeDrainer(
        writer, EventRecorder(None, NODE), None, stop, drain_timeout=20, uncordon_timeout=20
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            drainer.drain("rendered-worker-b")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        _until(lambda: api.obj["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == "drain-rendered-worker-b")
        # deleted and created again (by the machine API, say): the request is gone
        api.obj["metadata"]["annotations"] = {ann.DESIRED_CONFIG: "rendered-worker-b"}
        api.rv += 10
        api.obj["metadata"]["resourceVersion"] = str(api.rv)
        writer.observe(api.get_node(NODE))  # what the watch sees
        _until(lambda: api.obj["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == "drain-rendered-worker-b")
        api.set(lastAppliedDrain="drain-rendered-worker-b")  # the controller answers
        writer.observe(api.get_node(NODE))
        thread.join(10)
        assert not thread.is_alive() and errors == []
    finally:
        stop.set()
        thread.join(10)


def _until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
