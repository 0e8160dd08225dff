"""Helpers for the drift monitor tests: a root laid down from a config, and waiting on inotify."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent.watch.drift import DriftMonitor
from mcd.config.machineconfig import MachineConfig, empty_machineconfig, machineconfig_from_object
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.update.transaction import Host, update


def parse(obj: dict[str, Any]) -> MachineConfig:
    return machineconfig_from_object(json.loads(json.dumps(obj)), "test")


def laid_down(tmp: Path, obj: dict[str, Any]) -> tuple[Path, MachineConfig]:
    """A sandbox root holding config `obj` as a finished update leaves it."""
    root = make_sandbox_root(tmp / "root")
    mc = parse(obj)
    host = Host.for_root(HostRoot(root), RecordingRunner().expect(["systemctl"]))
    update(host, empty_machineconfig(), mc, legacy=True, skip_reboot=True)
    state.clear_reboot(HostRoot(root))
    return root, mc


class Collector:
    """Gathers the paths a monitor reports; `wait` returns once a predicate holds on them."""

    def __init__(self) -> None:
        self.changed = threading.Event()
        self.seen: list[str] = []

    def on_change(self) -> None:
        self.changed.set()

    def wait(self, monitor: DriftMonitor, want: str, timeout: float = 5.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while want not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"monitor never reported {want}; saw {self.seen}")
            self.changed.wait(left)
            self.changed.clear()
            taken = monitor.take()
            self.seen += monitor.ordered(taken)
            monitor.commit(taken)
        return self.seen

    def settle(self, monitor: DriftMonitor, marker: Path) -> list[str]:
        """Everything reported before an event on `marker` (a managed path the test touches last)."""
        marker.touch()
        return self.wait(monitor, "/" + str(marker).split("/root/", 1)[1])
