"""The pool controllers `mcd-sim simulate --nodes` runs: `mcd pool-controller` as a process of its
own over HTTPS (the default: the real one, as on a cluster without the operator), or the
in-process controller stand-in.

A change reaches them as a cluster gets it: the pool's MachineConfigs after the change
(`Change.sources`), which the real controller renders itself, and for the stand-in, which does
not render, the rendered config too (`Change.rendered`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mcd.host.runner import Spawned, spawn
from mcd_sim.apiserver import ApiServer
from mcd_sim.controller import ControllerStandIn

Obj = dict[str, Any]
ROLE_LABEL = "machineconfiguration.openshift.io/role"
LEASE_NAMESPACE = "openshift-machine-config-operator"


@dataclass(frozen=True)
class Change:
    sources: tuple[Obj, ...]  # the pool's MachineConfigs
    rendered: Obj  # the rendered config they make (mcd.render): the stand-in's input


class PoolController(Protocol):
    """What `mcd-sim simulate` needs of a pool controller."""

    description: str
    over_http: bool  # its writes are in the audit log (else the verdict is the store's alone)

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def crash_and_replace(self) -> None:
        """Kill it without a goodbye (no Lease release, no cleanup) and start a new one."""

    def roll(self, change: Change) -> None:
        """Make the change; the pool's spec.configuration then names the rendered config."""

    def exited(self) -> int | None:
        """Its exit code once it has stopped on its own (None while it runs, or in process)."""

    def peak_rss_kib(self) -> int | None:
        """Its peak resident memory, or None when it is not a process of its own."""


def set_sources(sim: ApiServer, pool: str, sources: Sequence[Obj]) -> None:
    """The pool's MachineConfigs become `sources`: created or replaced, the others deleted."""
    wanted = {s["metadata"]["name"] for s in sources}
    for source in sources:
        sim.put(source)
    for mc in sim.objects("MachineConfig"):
        labels = mc["metadata"].get("labels") or {}
        if labels.get(ROLE_LABEL) == pool and mc["metadata"]["name"] not in wanted:
            sim.delete("MachineConfig", mc["metadata"]["name"])


class StandInController:
    """The in-process controller stand-in with its maxUnavailable rollout."""

    description = "controller stand-in (in process)"
    over_http = False

    def __init__(self, sim: ApiServer, pool: str, kubeconfig: Path, workdir: Path) -> None:
        del kubeconfig, workdir  # it works on the store, in this process
        self.sim, self.pool = sim, pool
        self.inner = ControllerStandIn(sim, pool, rollout=True)

    def start(self) -> None:
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()

    def crash_and_replace(self) -> None:
        self.inner.stop()
        self.inner = ControllerStandIn(self.sim, self.pool, rollout=True)
        self.inner.start()

    def roll(self, change: Change) -> None:
        set_sources(self.sim, self.pool, change.sources)
        self.sim.put(change.rendered)
        name = change.rendered["metadata"]["name"]
        self.sim.patch("MachineConfigPool", self.pool, {"spec": {"configuration": {"name": name}}})

    def exited(self) -> int | None:
        return None

    def peak_rss_kib(self) -> int | None:
        return None


def peak_rss_kib(pid: int) -> int | None:
    """VmHWM of a live process (since its last exec)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class ProcessController:
    """`python -m mcd pool-controller --kubeconfig …`: renders the pool's MachineConfigs, moves
    the nodes and answers their drains over HTTPS."""

    description = "mcd pool-controller (a process, over HTTPS)"
    over_http = True
    INTERVAL = "1"  # seconds between its resyncs from its caches (its default is 2)
    # a killed leader's Lease expires after this (its default is 15): a shorter takeover
    LEASE_DURATION = "6"
    EVICTION_RETRY = "1"  # an eviction a budget refused is tried again after this (its default is 5)

    def __init__(self, sim: ApiServer, pool: str, kubeconfig: Path, workdir: Path) -> None:
        self.sim, self.pool = sim, pool
        self.argv = [
            sys.executable,
            "-m",
            "mcd",
            "pool-controller",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            LEASE_NAMESPACE,
            "--interval",
            self.INTERVAL,
            "--lease-duration",
            self.LEASE_DURATION,
            "--eviction-retry",
            self.EVICTION_RETRY,
        ]
        self.log = workdir / "pool-controller.log"
        self.process: Spawned | None = None
        self.rss: int | None = None

    def start(self) -> None:
        self.process = spawn(self.argv, output=self.log)

    def stop(self) -> None:
        if self.process is None:
            return
        self.rss = self.peak_rss_kib()
        self.process.terminate()
        if self.process.wait(15) is None:
            self.process.kill()
            self.process.wait(5)
        self.process = None

    def crash_and_replace(self) -> None:
        if self.process is not None:
            self.process.kill()  # SIGKILL: the Lease stays held until it expires
            self.process.wait(5)
        self.process = spawn(self.argv, output=self.log)  # a new replica, a new identity

    def roll(self, change: Change) -> None:
        set_sources(self.sim, self.pool, change.sources)  # it renders them itself

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def peak_rss_kib(self) -> int | None:
        if self.process is None:
            return self.rss
        return peak_rss_kib(self.process.pid)


ControllerFactory = Callable[[ApiServer, str, Path, Path], PoolController]
CONTROLLERS: dict[str, ControllerFactory] = {
    "pool-controller": ProcessController,
    "stand-in": StandInController,
}
