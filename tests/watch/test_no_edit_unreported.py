"""No hand edit goes unreported (issue 26, item 8): managed files are edited at random moments
around the agent's start (a root left by `--once-from --skip-reboot`, its reboot still owed),
during each sync and each retarget of the drift monitor; every edit must be reported (a drift
Event or reason naming the path) or repaired by an update, and a node that says Done must hold
its config on disk.

The agent's sync, drift reporter and watchers run in this process on a sandbox root with real
inotify, driven the way the loop drives them (a sync, the watchers after it, then the `drift`
key until it is quiet). Edits are made at instrumented points (every watch the monitor places,
its retarget, the on-disk check, the update's transaction, every write of the Node) with a
seeded probability, and by a thread at random instants. `MCD_DRIFT_PROPERTY_FILES=10000` runs
the 10,000-file workload with more seeds (for CI; a few minutes).
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent.inproc import NODE, MemoryApi
from builders import ign_file, mc_object
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent import errors as agent_errors
from mcd.agent.node_apply import Applied, NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.sync import Result, Syncer
from mcd.agent.watch import driftreport
from mcd.agent.watch.drift import DriftMonitor
from mcd.agent.watch.driftreport import DriftReporter, NodeReporter
from mcd.agent.watch.wiring import Watchers
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig, empty_machineconfig, machineconfig_from_object
from mcd.host import ondisk, state
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.node.annotations import NodeState
from mcd.update.transaction import Host, update

FILES = int(os.environ.get("MCD_DRIFT_PROPERTY_FILES", "120"))
SEEDS = range(int(os.environ.get("MCD_DRIFT_PROPERTY_SEEDS", "16" if FILES <= 1000 else "8")))
DIRS = 12 if FILES <= 1000 else 100
P_EDIT = 0.15  # the chance of an edit at each instrumented point


def _config(name: str, version: int) -> dict[str, Any]:
    """Version 0: FILES files; 1: a tenth of them changed and a new directory with 3 files
    (rebootless: the policy); 2: another tenth changed, the new directory gone again, and a
    file no policy covers changed (a reboot, simulated: the process starts again)."""
    per = FILES // DIRS
    files = []
    for i in range(FILES):
        d = i // per
        text = f"key{i} = {version if (version and i % 10 == version) else 0}\n"
        files.append(ign_file(f"/etc/prop/d{d:03d}/f{i:05d}.conf", text))
    if version == 1:
        files += [ign_file(f"/etc/prop-new/sub/n{i}.conf", f"new {i}\n") for i in range(3)]
    files.append(ign_file("/etc/reboot/r.conf", f"r = {version // 2}\n"))
    return mc_object(name, files=files)


# the changes under /etc/prop and /etc/prop-new need no reboot
POLICIES = {
    "status": {
        "nodeDisruptionPolicyStatus": {
            "clusterPolicies": {
                "files": [{"path": p, "actions": [{"type": "None"}]} for p in ("/etc/prop", "/etc/prop-new")]
            }
        }
    }
}


UPDATES = (
    "rendered-worker-1",
    "rendered-worker-0",
    "rendered-worker-1",
    "rendered-worker-2",
    "rendered-worker-0",
)
CONFIGS = {f"rendered-worker-{v}": _config(f"rendered-worker-{v}", v) for v in range(3)}
# what each config declares, by path
SOURCES = {
    name: {f["path"]: f["contents"]["source"] for f in obj["spec"]["config"]["storage"]["files"]}
    for name, obj in CONFIGS.items()
}


class Editor:
    """Hand edits: at instrumented points with probability `P_EDIT`, and from a thread."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.edits: list[tuple[str, str]] = []  # (where, path)
        self.paths: list[str] = []
        self.hot: list[str] = []
        self.on = False

    def maybe(self, where: str) -> None:
        # more often right around the update's writes and the retarget: the windows are there
        near = "update" in where or "retarget" in where
        if self.on and self.rng.random() < (0.5 if near else P_EDIT):
            self.edit(where, hot=near)

    def pause(self) -> None:
        with self.lock:  # an edit under way is over
            self.on = False

    def edit(self, where: str, *, hot: bool = False) -> None:
        with self.lock:
            if not self.on:
                return
            # half of the edits on the paths the updates write (the windows are theirs)
            paths = self.hot if self.hot and (hot or self.rng.random() < 0.5) else self.paths
            existing = [p for p in paths if (self.root / p.lstrip("/")).is_file()]
            if not existing:
                return
            path = self.rng.choice(existing)
            with (self.root / path.lstrip("/")).open("a") as f:
                f.write(f"# edited by hand at {where}\n")
            self.edits.append((where, path))


EDITORS: list[Editor] = []  # the one editing now, for the instrumented classes


def _maybe(where: str) -> None:
    for editor in EDITORS:
        editor.maybe(where)


class EditedMonitor(DriftMonitor):
    """The monitor with edits between the watches it places and around its retarget."""

    def _place(self, directory: str) -> None:
        _maybe("before a watch is placed")
        super()._place(directory)

    def retarget(self, config: IgnitionConfig) -> None:
        _maybe("before the retarget")
        super().retarget(config)
        _maybe("after the retarget")


class EditedApplier(NodeApplier):
    def check(self, mc: MachineConfig, *, only: Collection[str] | None = None) -> str | None:
        _maybe("before the on-disk check")
        try:
            return super().check(mc, only=only)
        finally:
            _maybe("after the on-disk check")

    def apply(self, old: MachineConfig, new: MachineConfig, *args: Any, **kwargs: Any) -> Applied:
        _maybe("before the update")
        try:
            return super().apply(old, new, *args, **kwargs)
        finally:
            _maybe("after the update")


class EditedApi(MemoryApi):
    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None:
        return POLICIES

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        _maybe("before a Node write")
        try:
            return super().patch_node(name, patch, status=status)
        finally:
            _maybe("after a Node write")


class Recorder(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, NODE)
        self.recorded: list[tuple[str, str]] = []

    def record(self, etype: str, reason: str, message: str) -> None:
        self.recorded.append((reason, message))


class Agent:
    """The sync and the watchers as the loop drives them; a simulated reboot starts them anew,
    as the process does."""

    def __init__(self, root: Path, applier_class: type[EditedApplier] = EditedApplier) -> None:
        first = "rendered-worker-0"
        self.api = EditedApi({ann.CURRENT_CONFIG: first, ann.DESIRED_CONFIG: first, ann.STATE: "Done"})
        self.api.mcs.update(CONFIGS)
        self.events = Recorder()
        self.changed = threading.Event()
        self.root = root
        self.applier_class = applier_class
        self.reboots = 0
        self._start()

    def _start(self) -> None:
        self.writer = NodeWriter(self.api, NODE)
        self.applier = applier = self.applier_class(HostRoot(self.root), RecordingRunner())
        reporter = NodeReporter(self.writer)
        self.drift = DriftReporter(applier, reporter, self.events, Metrics(), self.changed.set)
        self.watchers = Watchers(applier, self.writer, self.drift, events=self.events, metrics=Metrics())
        self.syncer = Syncer(
            api=self.api,
            writer=self.writer,
            events=self.events,
            metrics=Metrics(),
            applier=applier,
            drainer=_NoDrain(),
            before_update=self.watchers.before_update,
            watch=self.drift,
        )
        self.booted = False

    def sync(self) -> None:
        try:
            result = self.syncer.sync(boot=not self.booted)
            self.booted = True
        except Exception as exc:
            verdict = agent_errors.classify(exc)
            if verdict.state is not None:
                self.writer.set_state(verdict.state, verdict.reason)
            self.watchers.after_sync()
            return
        if result is Result.SIMULATED_REBOOT:
            self.watchers.stop()
            self.reboots += 1
            self._start()
            self.sync()  # the new process's boot sync
            return
        self.watchers.after_sync()

    def settle(self) -> None:
        """The `drift` key until it is quiet; a drift put back asks for a sync, as in the loop."""
        for _ in range(200):
            if self.drift.monitor is not None:
                self.drift.monitor.flush()
            if not self.changed.is_set():
                return
            self.changed.clear()
            if self.drift.handle():
                self.sync()
        raise AssertionError("the drift key never settled")

    def desire(self, name: str) -> None:
        self.api.set(desiredConfig=name)
        self.writer.refresh()

    def reported(self) -> str:
        """Everything the agent said about drift: Events and the node's reasons."""
        texts = [m for _, m in self.events.recorded]
        texts += [a.get(ann.REASON, "") for a in self.api.history]
        return "\n".join(texts)

    def state(self) -> str:
        return self.api.obj["metadata"]["annotations"].get(ann.STATE, "")


class _NoDrain:
    def drain(self, desired: str) -> None:
        pass

    def uncordon(self, config: str) -> None:
        pass


def _left_by_once_from(tmp: Path) -> Path:
    """A root as `mcd start --once-from rendered-worker-0 --skip-reboot` leaves it: the reboot owed."""
    root = make_sandbox_root(tmp / "root")
    mc = machineconfig_from_object(CONFIGS["rendered-worker-0"], "once-from")
    update(
        Host.for_root(HostRoot(root), RecordingRunner()),
        empty_machineconfig(),
        mc,
        legacy=True,
        skip_reboot=True,
    )
    assert state.pending_reboot(HostRoot(root)) is not None
    return root


def _declared(name: str) -> list[str]:
    return [f["path"] for f in CONFIGS[name]["spec"]["config"]["storage"]["files"]]


def _written(agent: Agent, name: str) -> list[str]:
    """The paths the update to `name` writes (or removes)."""
    disk = agent.applier.disk_config()
    now = _sources(disk.name if disk is not None else "rendered-worker-0")
    new = _sources(name)
    return sorted(p for p in now.keys() | new.keys() if now.get(p) != new.get(p))


def _sources(name: str) -> dict[str, str]:
    return SOURCES[name]


def _same(path: str, name: str) -> bool:
    """Whether config `name` declares `path` as the first config does."""
    return _sources(name).get(path) == _sources("rendered-worker-0").get(path)


def _never_done_while_drifted(agent: Agent, root: Path) -> None:
    agent.settle()
    disk = agent.applier.disk_config()
    assert disk is not None and disk.config is not None
    if agent.state() == NodeState.DONE.value:
        assert ondisk.first_error(HostRoot(root), disk.config) is None, "Done while drifted"


def _all_named(agent: Agent, editor: Editor, root: Path) -> None:
    """Every edit so far was named by the agent, or repaired (written over by an update)."""
    said = agent.reported()
    for where, path in editor.edits:
        on_disk = root / path.lstrip("/")
        repaired = not on_disk.exists() or "edited by hand" not in on_disk.read_text()
        assert repaired or f'"{path}"' in said, f"an edit of {path} {where} was never reported"


def _put_back(agent: Agent, editor: Editor, root: Path) -> None:
    """The admin puts back, as the config on disk declares them, the paths the agent named,
    until the node is Done: a drifted path the agent never names keeps it from Done."""
    for _ in range(40):
        if agent.state() == NodeState.DONE.value:
            return
        disk = agent.applier.disk_config()
        assert disk is not None and disk.config is not None
        said = agent.reported()
        for f in disk.config.files:
            target = root / f.path.lstrip("/")
            if f'"{f.path}"' in said and target.is_file() and target.read_bytes() != f.data:
                target.write_bytes(f.data)
        agent.settle()
        if agent.state() != NodeState.DONE.value:
            agent.sync()  # the loop's retry
            agent.settle()
    raise AssertionError(f"never Done again: {agent.api.states()[-3:]}")


@pytest.fixture
def editing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setattr(driftreport, "DriftMonitor", EditedMonitor)
    yield _left_by_once_from(tmp_path)
    EDITORS.clear()


def _background(editor: Editor, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.wait(rng.uniform(0.0, 0.05)):
        if rng.random() < 0.1:
            editor.edit("at a random moment")


@pytest.mark.parametrize("seed", list(SEEDS))
def test_every_edit_is_reported_or_repaired(editing: Path, seed: int) -> None:
    root = editing
    editor = Editor(root, seed)
    editor.paths = sorted({p for name in CONFIGS for p in _declared(name)})
    editor.hot = [p for p in editor.paths if len({SOURCES[n].get(p) for n in CONFIGS}) > 1]
    EDITORS[:] = [editor]
    agent = Agent(root)
    stop = threading.Event()
    thread = threading.Thread(target=_background, args=(editor, stop, seed), daemon=True)
    editor.on = True
    thread.start()
    try:
        agent.sync()  # the boot sync: the monitor starts, the disk is checked, the reboot still owed
        # the owed reboot (a new process), rebootless retargets, then reboots again
        for name in (*UPDATES, ""):
            agent.settle()
            editor.pause()
            _never_done_while_drifted(agent, root)
            _put_back(agent, editor, root)
            _all_named(agent, editor, root)
            if not name:
                break
            editor.on = True
            editor.hot = _written(agent, name)
            agent.desire(name)
            agent.sync()  # the update, and the monitor retargeted to its config before Done
    finally:
        stop.set()
        thread.join()
        editor.pause()
        agent.watchers.stop()


class EditsNewFileAfterUpdate(EditedApplier):
    def apply(self, old: MachineConfig, new: MachineConfig, *args: Any, **kwargs: Any) -> Applied:
        applied = super().apply(old, new, *args, **kwargs)
        if new.name == "rendered-worker-1":
            self.root.join("/etc/prop-new/sub/n1.conf").write_text("edited after the update wrote it\n")
        return applied


def test_an_edit_in_a_directory_the_update_created_is_reported(tmp_path: Path) -> None:
    root = _left_by_once_from(tmp_path)
    state.clear_reboot(HostRoot(root))  # rebooted since: the update is rebootless (the policy)
    agent = Agent(root, EditsNewFileAfterUpdate)
    try:
        agent.sync()
        agent.desire("rendered-worker-1")
        agent.sync()
        agent.settle()
        assert agent.reboots == 0
        assert agent.api.states()[-1] == ("Degraded", 'content mismatch for file "/etc/prop-new/sub/n1.conf"')
    finally:
        agent.watchers.stop()
