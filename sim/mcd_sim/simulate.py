"""`mcd-sim simulate`: the cluster agent updating one node of an in-process cluster, narrated.

The stand-in API server (`mcd_sim.apiserver`) and the controller stand-in run in this process;
the agent is a real `mcd start --node-name …` process, the same program a node runs, talking
HTTPS to the server through the kubeconfig written in the work directory. The node is a
sandbox root that joins the way a real node does (see `bootstrap_node`).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import yaml

from mcd import policy
from mcd.cli.oncefrom import current_config, run_once_from
from mcd.config.load import load_machineconfig
from mcd.config.overrides import storage_overrides
from mcd.host import state
from mcd.host.atomicfs import atomic_write
from mcd.host.root import HostRoot
from mcd.host.runner import Spawned, SubprocessRunner, spawn
from mcd.node import annotations as ann
from mcd.planner.plantext import plan_text
from mcd.update.transaction import Host, plan_on_host
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.store import WatchEvent
from mcd_sim.controller import ControllerStandIn
from mcd_sim.sandbox import make_sandbox_root

Obj = dict[str, Any]

LAST_APPLIED_DRAIN = ann.PREFIX + "lastAppliedDrain"
NODE_ANNOTATIONS = "etc/machine-config-daemon/node-annotations.json"
# the node annotations an admin follows during an update, in the order they are printed
WATCHED = (
    (ann.DESIRED_CONFIG, "desiredConfig"),
    (ann.CURRENT_CONFIG, "currentConfig"),
    (ann.STATE, "state"),
    (ann.REASON, "reason"),
    (ann.DESIRED_DRAIN, "desiredDrain"),
    (LAST_APPLIED_DRAIN, "lastAppliedDrain"),
)
_LOG_TAIL_LINES = 30


class SimulateError(RuntimeError):
    """The simulated update did not finish (the message says where it stopped)."""


@dataclass(frozen=True)
class SimulateOptions:
    workdir: Path | None
    old: Path
    new: Path
    node: str
    timeout: float


def _now() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]


def load_object(path: Path) -> Obj:
    obj = yaml.safe_load(path.read_text())
    if not isinstance(obj, dict) or not (obj.get("metadata") or {}).get("name"):
        raise ValueError(f"{path}: not a MachineConfig with metadata.name")
    return obj


class Narrator:
    """Collects what happens to the node (annotation changes, Events) as the store commits it,
    and prints it from the main thread: the store's hooks run under its lock, where printing
    (a slow pipe) would hold up the agent's requests."""

    def __init__(self, node: str, out: TextIO) -> None:
        self.node = node
        self.out = out
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self.lines: list[str] = []  # everything printed, for the caller's checks

    def hook(self, event: WatchEvent) -> None:
        kind = event.obj.get("kind")
        if kind == "Node" and event.obj["metadata"]["name"] == self.node:
            self._node_changed(event)
        elif kind == "MachineConfigNode" and event.obj["metadata"]["name"] == self.node:
            self._mcn_changed(event)
        elif kind == "Event" and event.type == "ADDED":
            involved = event.obj.get("involvedObject") or {}
            if involved.get("name") == self.node:
                e = event.obj
                self._add(f"event {e.get('type', 'Normal')} {e.get('reason', '')}: {e.get('message', '')}")

    def _node_changed(self, event: WatchEvent) -> None:
        before = ((event.old or {}).get("metadata") or {}).get("annotations") or {}
        after = event.obj["metadata"].get("annotations") or {}
        # the reason is free text (often empty when cleared): quoted, so it reads as one value
        changes = [
            f"{short}={json.dumps(after.get(key, ''))}"
            if key == ann.REASON
            else f"{short}={after.get(key, '-')}"
            for key, short in WATCHED
            if before.get(key) != after.get(key)
        ]
        was = bool(((event.old or {}).get("spec") or {}).get("unschedulable"))
        now = bool((event.obj.get("spec") or {}).get("unschedulable"))
        if was != now:
            changes.append("cordoned" if now else "uncordoned")
        if changes:
            self._add("node " + " ".join(changes))

    def _mcn_changed(self, event: WatchEvent) -> None:
        """The MachineConfigNode's conditions that changed (the ones a new object starts with,
        not yet reached, are left out)."""

        def conditions(obj: Obj | None) -> dict[str, Obj]:
            return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}

        before, after = conditions(event.old), conditions(event.obj)
        changes = [
            f"{kind}={c['status']}" + (f" ({c['message']})" if c["status"] != "False" else "")
            for kind, c in after.items()
            if c.get("reason") != "NotYetOccurred"
            and (
                kind not in before
                or (before[kind]["status"], before[kind]["message"]) != (c["status"], c["message"])
            )
        ]
        if changes:
            self._add("mcn " + "; ".join(changes))

    def _add(self, text: str) -> None:
        with self._lock:
            self._pending.append(f"  {_now()}  {text}")

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for line in pending:
            self._write(line)

    def say(self, text: str = "") -> None:
        """Print `text` after what happened before it, so the story stays in order."""
        self.flush()
        self._write(text)

    def block(self, text: str) -> None:
        """Print several lines, indented, as one piece: nothing that happens meanwhile splits it."""
        self.flush()
        for line in text.rstrip("\n").splitlines():
            self._write(f"   {line}".rstrip())

    def _write(self, text: str) -> None:
        self.lines.append(text)
        self.out.write(text + "\n")
        self.out.flush()


class PoolProgress:
    """`mcd-sim simulate --nodes N`'s progress, one line per node each time its state, current
    or desired config or its cordon changes, with how many nodes are Done on the pool's target:
    `[  12.3 s] worker-01 Working current=A desired=B cordoned  (Done on B: 1/4)`. Collected by a
    store hook (under the store's lock) and written by `flush` from the thread that waits, to
    stderr by default, so the JSON of `-o json` on stdout stays whole."""

    def __init__(
        self, nodes: list[str], out: TextIO | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.nodes = set(nodes)
        self.out = out
        self.target = ""  # the config "Done on" counts; "" until the pool names one
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, str, str, bool]] = {}
        self._pending: list[str] = []
        self.lines: list[str] = []  # everything written, for the caller's checks

    def hook(self, event: WatchEvent) -> None:
        if event.obj.get("kind") != "Node" or event.type == "DELETED":
            return
        name = event.obj["metadata"]["name"]
        if name not in self.nodes:
            return
        a = event.obj["metadata"].get("annotations") or {}
        cordoned = bool((event.obj.get("spec") or {}).get("unschedulable"))
        state, current, desired = (a.get(k, "-") for k in (ann.STATE, ann.CURRENT_CONFIG, ann.DESIRED_CONFIG))
        now = (state, current, desired, cordoned)
        with self._lock:
            if self._seen.get(name) == now:
                return
            self._seen[name] = now
            line = (
                f"[{self._clock() - self._started:7.1f} s] {name} {now[0]} current={now[1]} desired={now[2]}"
            )
            line += " cordoned" if now[3] else ""
            if self.target:  # the count as of this change, not as of the flush
                done = sum(s[0] == "Done" and s[1] == self.target for s in self._seen.values())
                line += f"  (Done on {self.target}: {done}/{len(self.nodes)})"
            self._pending.append(line)

    def flush(self) -> None:
        with self._lock:
            lines, self._pending = self._pending, []
        out = self.out or sys.stderr
        for line in lines:
            self.lines.append(line)
            out.write(line + "\n")
        if lines:
            out.flush()


def bootstrap_node(root: Path, old_file: Path, old_name: str) -> None:
    """Bring a fresh sandbox root to OLD as a new node gets there.

    A real node is installed from the Machine Config Server's Ignition, which writes the rendered
    config's files (what `--once-from` does here with the executor, the same transaction and
    on-disk record) and `node-annotations.json` naming that config; the node then reboots into
    it and the daemon's first start copies those annotations to the Node. Both halves are done
    here, so the agent starts on exactly the path a joining node takes (`checkStateOnFirstRun`:
    bootstrap annotations, then the on-disk check), rather than on annotations set by hand.
    """
    run_once_from(Host.for_root(HostRoot(root), SubprocessRunner()), str(old_file), skip_reboot=True)
    state.clear_reboot(HostRoot(root))  # the node booted into OLD
    bootstrap = {ann.CURRENT_CONFIG: old_name, ann.DESIRED_CONFIG: old_name, ann.STATE: "Done"}
    target = root / NODE_ANNOTATIONS
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps(bootstrap).encode(), 0o644)


def agent_argv(node: str, kubeconfig: Path, root: Path) -> list[str]:
    """The agent as a node runs it (`mcd start --node-name`), on the sandbox root `root`."""
    return [
        sys.executable,
        "-m",
        "mcd",
        "start",
        "--node-name",
        node,
        "--kubeconfig",
        str(kubeconfig),
        "--root-mount",
        str(root),
        "--metrics-url",
        "127.0.0.1:0",  # any free port: several runs may share a machine
        "--kubelet-healthz-enabled=false",  # no kubelet next to a sandbox
        "-v",
    ]


def agent_plan(sim: ApiServer, root: Path, new_file: Path) -> str:
    """The plan the agent computes for this node: its on-disk config to NEW, with the cluster's
    node disruption policy and storage overrides (not `--once-from`'s legacy table)."""
    host = Host.for_root(HostRoot(root), SubprocessRunner())
    new = load_machineconfig(new_file.read_bytes(), str(new_file))
    obj = sim.get("MachineConfiguration", "cluster")
    policies: policy.ClusterPolicies = policy.DEFAULT_POLICIES
    overrides: tuple[str, ...] = ()
    if obj is not None:
        policies = policy.policies_from_machineconfiguration(obj)
        found, _bad = storage_overrides(obj)
        overrides = tuple(found)
    p = plan_on_host(
        host,
        current_config(host.root),
        new,
        legacy=False,
        policies=policies,
        skip_certificate_write=True,
        storage_overrides=overrides,
    )
    return plan_text(p)


def _annotations(sim: ApiServer, node: str) -> dict[str, str]:
    obj = sim.get("Node", node) or {}
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _done_on(sim: ApiServer, node: str, config: str) -> Callable[[], bool]:
    """Done on `config`, and the sync that got there finished: the bootstrap annotations alone
    say Done on OLD before the agent's first sync has checked the disk and posted NodeDone."""
    message = f"currentConfig {config} to Done"

    def done() -> bool:
        a = _annotations(sim, node)
        # the first sync clears the reason last (after NodeDone): waiting for it keeps its line
        # out of what is printed next
        if a.get(ann.STATE) != "Done" or a.get(ann.CURRENT_CONFIG) != config or a.get(ann.REASON) != "":
            return False
        return any(
            e.get("reason") == "NodeDone"
            and (e.get("involvedObject") or {}).get("name") == node
            and message in str(e.get("message", ""))
            for e in sim.events()
        )

    return done


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no agent log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def simulate(options: SimulateOptions, out: TextIO | None = None) -> int:
    """Run the whole scenario; 0 when the node reached Done on NEW, 1 otherwise. `out` defaults
    to the sys.stdout of the call, not of the import (a test's captured stream is gone later)."""
    out = out or sys.stdout
    started = time.monotonic()
    deadline = started + options.timeout
    # a temporary work directory goes once the run succeeded; on failure it keeps the agent's log
    temporary = options.workdir is None
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="mcd-simulate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    old_obj, new_obj = load_object(options.old), load_object(options.new)
    old_name, new_name = old_obj["metadata"]["name"], new_obj["metadata"]["name"]
    node = options.node
    say = Narrator(node, out)

    sim = ApiServer(("127.0.0.1", 0), audit_log_path=workdir / "audit.log").start()
    agent: Spawned | None = None
    try:
        kubeconfig = sim.write_kubeconfig(workdir / "kubeconfig")
        sim.store.add_hook(say.hook)
        sim.add_node(node)
        sim.put(old_obj)
        sim.put(new_obj)
        with ControllerStandIn(sim) as controller:
            controller.step()  # the operator's part: MachineConfiguration/cluster with its defaults
            say.say(f"== cluster: {sim.url} (in-process API server and controller stand-in)")
            say.say(f"   node {node}, MachineConfigs {old_name} and {new_name}, MachineConfiguration/cluster")
            say.say(f"   follow it: KUBECONFIG={shlex.quote(str(kubeconfig))} kubectl get node {node} -w")

            root = make_sandbox_root(workdir / "root")
            bootstrap_node(root, options.old, old_name)
            controller.set_desired_config(old_name, [node])
            say.say(f"== node root {root}: {old_name} written as at install,")
            say.say(f"   {NODE_ANNOTATIONS} left for the agent's first start")

            log_path = workdir / "agent.log"
            argv = agent_argv(node, kubeconfig, root)
            agent = spawn(argv, output=log_path)
            say.say(f"== agent started (pid {agent.pid}, log {log_path}): python {shlex.join(argv[1:])}")

            _wait(sim, say, agent, node=node, config=old_name, deadline=deadline)
            say.say(f"== node {node} is Done on {old_name}; the agent's plan for {new_name}:")
            say.block(agent_plan(sim, root, options.new))

            say.say(f"== controller: desiredConfig={new_name}")
            controller.set_desired_config(new_name, [node])
            _wait(sim, say, agent, node=node, config=new_name, deadline=deadline)
            took = time.monotonic() - started
            say.say(f"== node {node} is Done on {new_name} ({took:.1f} s after the start)")
            _show_kubectl(kubeconfig, node, say)
    except SimulateError as exc:
        say.flush()
        say.say(f"mcd-sim simulate: {exc}")
        if agent is not None:
            say.say(f"-- last lines of the agent's log ({agent.output}):")
            say.say(_tail(agent.output))
        if temporary:
            say.say(f"(work directory kept: {workdir})")
        return 1
    finally:
        if agent is not None:
            agent.terminate()
            if agent.wait(15) is None:
                agent.kill()
                agent.wait(5)
        sim.stop()
    say.say("== agent stopped (SIGTERM), server stopped")
    if temporary:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _wait(sim: ApiServer, say: Narrator, agent: Spawned, *, node: str, config: str, deadline: float) -> None:
    """Wait for the node to be Done on `config`, printing what happens meanwhile; the server
    wakes us on every commit, so nothing polls."""
    done = _done_on(sim, node, config)
    what = f"Done on {config}"
    stopped: list[int] = []

    def check() -> bool:
        say.flush()
        code = agent.poll()
        if code is not None:
            stopped.append(code)
            return True
        return done()

    try:
        sim.wait_for(check, timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        raise SimulateError(f"timed out waiting for {what}") from None
    say.flush()
    if stopped:
        raise SimulateError(f"the agent exited ({stopped[0]}) before {what}")


def _show_kubectl(kubeconfig: Path, node: str, say: Narrator) -> None:
    """What `kubectl` shows of the node, when it is installed (the server is real enough for it)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    jsonpath = (
        "{.metadata.annotations.machineconfiguration\\.openshift\\.io/currentConfig} "
        "{.metadata.annotations.machineconfiguration\\.openshift\\.io/state}"
    )
    argv = [kubectl, "--kubeconfig", str(kubeconfig), "get", "node", node, "-o", f"jsonpath={jsonpath}"]
    result = SubprocessRunner().run(argv, check=False, timeout=30)
    if result.returncode == 0:
        say.say(f"   kubectl get node {node} -o jsonpath=…: {result.stdout.strip()}")
