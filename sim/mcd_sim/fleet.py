"""`mcd-sim simulate --nodes N`: a pool of N real agents rolled to a new config by a pool controller.

Each node is a sandbox root joined on OLD as `mcd-sim simulate` joins its one node
(`simulate.bootstrap_node`), with its own `mcd start --node-name` process; a reboot is the
agent's simulated one (it re-executes itself and takes the boot path). The pool controller is
pluggable (`PoolController`): today the in-process stand-in (`mcd_sim.controller`, with its
maxUnavailable rollout). An optional replicated workload with a PodDisruptionBudget
(`mcd_sim.workload`) gives the drains pods to evict.

What the result says is measured from the API server's store (every commit, whoever made it,
recorded by a hook), never from the controller's own account: `mcd_sim.timeline`.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mcd.host.atomicfs import atomic_write
from mcd.host.runner import Spawned, spawn
from mcd.node import annotations as ann
from mcd_sim import auditreplay, timeline
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.audit import complete_lines
from mcd_sim.controller import ControllerStandIn, max_unavailable
from mcd_sim.fleetrecord import WORKLOAD, Recorder, budget, in_order, requests_between
from mcd_sim.picture import svg
from mcd_sim.poolcontrollers import (
    CONTROLLERS,
    ROLE_LABEL,
    Change,
    ControllerFactory,
    PoolController,
    set_sources,
)
from mcd_sim.reboots import SlowReboots
from mcd_sim.sandbox import make_sandbox_root
from mcd_sim.simulate import PoolProgress, SimulateError, agent_argv, bootstrap_node, load_object
from mcd_sim.sources import changes
from mcd_sim.timeline import unavailability
from mcd_sim.workload import Workload

Obj = dict[str, Any]


@dataclass(frozen=True)
class FleetOptions:
    workdir: Path | None
    old: Path
    new: Path
    nodes: int
    max_unavailable: int | str  # a count or a percentage, as a pool's spec.maxUnavailable
    timeout: float
    output: str = "text"  # or json
    picture: Path | None = None
    pdb: Obj | None = None  # a PodDisruptionBudget's spec: {"minAvailable": …} or {"maxUnavailable": …}
    replicas: int | None = None  # the workload's pods (default: one per node, when a PDB is given)
    pod_start: float = 2.0  # seconds a replacement pod takes to be Ready
    pool: str = "worker"
    admin: tuple[str, ...] = ()  # the admin's MachineConfigs (files, directories) merged over OLD
    controller: str = "pool-controller"  # or "stand-in"
    reboot_seconds: float = 0.0  # how long a node stays down in its reboot (0: as the process restarts)
    kill_controller_after: int = 0  # kill the controller once this many nodes are Done, start another


def _annotations(sim: ApiServer, node: str) -> dict[str, str]:
    return dict(((sim.get("Node", node) or {}).get("metadata") or {}).get("annotations") or {})


def _joined(sim: ApiServer, names: list[str], config: str) -> Callable[[], bool]:
    """Every node Done on `config` with its first sync finished (the reason cleared last)."""

    def check() -> bool:
        for name in names:
            a = _annotations(sim, name)
            if (
                a.get(ann.STATE) != "Done"
                or a.get(ann.CURRENT_CONFIG) != config
                or a.get("machineconfiguration.openshift.io/reason") != ""
            ):
                return False
        return True

    return check


def _target(sim: ApiServer, pool: str) -> str:
    spec = (sim.get("MachineConfigPool", pool) or {}).get("spec") or {}
    return str((spec.get("configuration") or {}).get("name") or "")


def pool_updated(sim: ApiServer, pool: str, config: str) -> bool:
    status = (sim.get("MachineConfigPool", pool) or {}).get("status") or {}
    updated = any(
        c.get("type") == "Updated" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return updated and (status.get("configuration") or {}).get("name") == config


class Fleet:
    """One run: set up, roll, measure, tear down (`run`)."""

    def __init__(
        self, options: FleetOptions, out: TextIO, controller: ControllerFactory | None = None
    ) -> None:
        self.o = options
        self.out = out
        self.pool = options.pool
        # read first: a missing or bad file stops the run before anything is made
        self.old_obj, self.new_obj = load_object(options.old), load_object(options.new)
        where = (str(options.old), str(options.new))
        self.before, self.after = changes(options.pool, self.old_obj, self.new_obj, options.admin, where)
        self.temporary = options.workdir is None
        self.workdir = options.workdir or Path(tempfile.mkdtemp(prefix="mcd-simulate-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        # bookmarks once a minute as kube-apiserver sends them (the sim's default of one a
        # second would be most of the bytes a long rollout sends)
        self.sim = ApiServer(
            ("127.0.0.1", 0), audit_log_path=self.workdir / "audit.log", bookmark_interval=60.0
        )
        self.recorder = Recorder()
        self.sim.store.add_hook(self.recorder.hook)
        self.reboots = SlowReboots(self.sim, options.reboot_seconds) if options.reboot_seconds > 0 else None
        if self.reboots is not None:
            reboots, pids = self.reboots, self.recorder.pids
            self.recorder.on_reboot = lambda node: reboots.begin(node, pids[node])
        self.make_controller = controller or CONTROLLERS[options.controller]
        self.agents: dict[str, Spawned] = {}
        self.controller: PoolController | None = None
        self.workload: Workload | None = None
        self.names = [f"worker-{i:02d}" for i in range(options.nodes)]
        self.progress = PoolProgress(self.names)  # per node, on stderr
        self.sim.store.add_hook(self.progress.hook)

    def say(self, text: str) -> None:
        if self.o.output == "text":
            self.out.write(text + "\n")
            self.out.flush()

    def run(self) -> int:
        deadline = time.monotonic() + self.o.timeout
        try:
            self.setup(deadline)
            result = self.roll(self.after, self.o.max_unavailable, deadline, picture=self.o.picture)
        except SimulateError as exc:
            self._failed(str(exc))
            return 1
        finally:
            self.teardown()
        self._report(result)
        ok = (
            result["allDone"]
            and result["poolUpdated"]
            and result["pdbViolations"] == 0
            and (result["maxConcurrentlyUnavailable"] <= result["maxUnavailable"])
            and result.get("auditLog", {}).get("maxConcurrentlyUnavailable", 0) <= result["maxUnavailable"]
            and all(moves == 1 for moves in result["desiredConfigSetPerNode"].values())
        )
        if ok and self.temporary:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return 0 if ok else 1

    def setup(self, deadline: float) -> None:
        """The cluster, the pool on OLD, the controller, every agent joined, the workload."""
        self.sim.start()
        kubeconfig = self.sim.write_kubeconfig(self.workdir / "kubeconfig")
        role = {} if self.pool == "worker" else {f"node-role.kubernetes.io/{self.pool}": ""}
        for name in self.names:
            self.sim.add_node(name, **role)
        set_sources(self.sim, self.pool, self.before.sources)
        # the operator's part, MachineConfiguration/cluster and its status, which no pool
        # controller plays: the agents wait for it
        ControllerStandIn(self.sim).reconcile_machineconfiguration()
        controller = self.controller = self.make_controller(self.sim, self.pool, kubeconfig, self.workdir)
        if controller.over_http:
            self._pool(None)  # it renders OLD's MachineConfig and names the result
        else:
            self.sim.put(self.before.rendered)
            self._pool(self.before.rendered["metadata"]["name"])
        controller.start()
        self.say(f"== cluster {self.sim.url}, {controller.description}; KUBECONFIG={kubeconfig}")
        self._wait(lambda: bool(_target(self.sim, self.pool)), deadline, f"the pool {self.pool} rendered")
        old = _target(self.sim, self.pool)
        rendered_old = self.workdir / "rendered-old.json"
        atomic_write(rendered_old, json.dumps(self.sim.get("MachineConfig", old)).encode(), 0o644)
        for name in self.names:
            # the controller named the node's first config when it joined the pool
            self.sim.patch("Node", name, {"metadata": {"annotations": {ann.DESIRED_CONFIG: old}}})
        for name in self.names:
            root = self.workdir / "nodes" / name
            bootstrap_node(make_sandbox_root(root), rendered_old, old)
            agent = spawn(agent_argv(name, kubeconfig, root), output=root.parent / f"{name}.log")
            self.agents[name] = agent
            self.recorder.pids[name] = agent.pid
        # the nodes as in-process writes left them: where the audit log's replay starts
        self.seed = {name: self.sim.get("Node", name) or {} for name in self.names}
        self.say(f"== {len(self.names)} agents started on {old} (logs in {self.workdir / 'nodes'})")
        self._wait(_joined(self.sim, self.names, old), deadline, f"every node Done on {old}")
        if self.o.pdb is not None or self.o.replicas:
            self.workload = Workload(
                self.sim, WORKLOAD, self.o.replicas or len(self.names), start_seconds=self.o.pod_start
            )
            self.workload.create(self.o.pdb)
            self.workload.start()
            self.say(
                f"== workload {WORKLOAD}: {self.workload.replicas} pods, PodDisruptionBudget {self.o.pdb}"
            )

    def roll(
        self, change: Change, limit: int | str, deadline: float, *, picture: Path | None = None
    ) -> dict[str, Any]:
        """Make `change` with maxUnavailable `limit` and wait until the pool names a new config,
        every node is Done on it and the pool Updated; the figures of that rollout."""
        assert self.controller is not None
        was = _target(self.sim, self.pool)
        self.sim.patch("MachineConfigPool", self.pool, {"spec": {"maxUnavailable": limit}})
        names = ", ".join(s["metadata"]["name"] for s in change.sources)
        self.say(f"== pool {self.pool}: MachineConfigs {names}, maxUnavailable {limit}")
        self.recorder.rss.clear()
        t0, bytes0 = time.time(), self.sim.traffic.bytes_sent
        self.controller.roll(change)
        self._wait(
            lambda: _target(self.sim, self.pool) != was, deadline, f"the pool {self.pool} rendered again"
        )
        config = _target(self.sim, self.pool)
        self.progress.target = config
        if config != change.rendered["metadata"]["name"]:
            expected = change.rendered["metadata"]["name"]
            raise SimulateError(f"the pool controller rendered {config}, mcd.render renders {expected}")
        self.say(f"== pool {self.pool} -> {config}")
        if self.o.kill_controller_after > 0:
            self._kill_controller_after(self.o.kill_controller_after, config, deadline)
        joined = _joined(self.sim, self.names, config)
        self._wait(
            lambda: pool_updated(self.sim, self.pool, config) and joined(),
            deadline,
            f"every node Done on {config} and the pool Updated",
        )
        t_end, bytes_sent = time.time(), self.sim.traffic.bytes_sent - bytes0
        for name, agent in self.agents.items():
            self.recorder.peak(name, agent.pid)
        result = self._result(config, limit, t0, t_end, picture)
        result["bytesSentByApiServer"] = bytes_sent
        result["controllerKilledAfterNodes"] = self.o.kill_controller_after
        result["desiredConfigSetPerNode"] = self._moves(config)
        if self.controller.over_http:
            # the same verdict from the audit log alone: what the clients asked the server to do
            lines = complete_lines(self.workdir / "audit.log")
            worst, _, who = unavailability(auditreplay.replay(lines, self.seed, t0))
            result["auditLog"] = {
                "maxConcurrentlyUnavailable": worst,
                "maxConcurrentlyUnavailableNodes": list(who),
            }
        requests = requests_between(self.workdir / "audit.log", t0, t_end)
        result["apiRequests"] = {**requests, "agentsPerNode": round(requests["agents"] / len(self.names), 1)}
        result["peakRssKiB"] = {
            # before the simulated reboot (read as it is announced) and after it, the larger
            "agents": dict(self.recorder.rss),
            "controller": self.controller.peak_rss_kib(),
            # the stand-in runs in this process, beside the API server: an upper bound for it
            "simulator": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
        return result

    def _kill_controller_after(self, done: int, config: str, deadline: float) -> None:
        """SIGKILL the controller once `done` nodes are Done on `config` and start a new one:
        whatever the killed one kept only in memory is lost, the cluster's record is not."""
        assert self.controller is not None

        def enough() -> bool:
            states = [_annotations(self.sim, n) for n in self.names]
            return (
                sum(a.get(ann.CURRENT_CONFIG) == config and a.get(ann.STATE) == "Done" for a in states)
                >= done
            )

        self._wait(enough, deadline, f"{done} nodes Done on {config}")
        self.controller.crash_and_replace()
        self.say(f"== pool controller killed (SIGKILL) after {done} nodes; another one started")

    def _moves(self, config: str) -> dict[str, int]:
        """How many times each node's desiredConfig became `config` (1 each: no node moved twice)."""
        last: dict[str, str | None] = {}
        moves = dict.fromkeys(self.names, 0)
        for _, sample in in_order(self.recorder.nodes):
            desired = sample.annotations.get(ann.DESIRED_CONFIG)
            if desired == config and last.get(sample.name) != config:
                moves[sample.name] = moves.get(sample.name, 0) + 1
            last[sample.name] = desired
        return moves

    def teardown(self) -> None:
        if self.reboots is not None:
            self.reboots.close()  # a stopped agent would not see its SIGTERM
        for agent in self.agents.values():
            agent.terminate()
        for agent in self.agents.values():
            if agent.wait(15) is None:
                agent.kill()
                agent.wait(5)
        if self.workload is not None:
            self.workload.stop()
        if self.controller is not None:
            self.controller.stop()
        self.sim.stop()

    def _pool(self, config: str | None) -> None:
        spec: Obj = {
            "machineConfigSelector": {"matchLabels": {ROLE_LABEL: self.pool}},
            "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{self.pool}": ""}},
            "maxUnavailable": self.o.max_unavailable,
            "paused": False,
        }
        if config is not None:
            spec["configuration"] = {"name": config}
        self.sim.put(
            {
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigPool",
                "metadata": {"name": self.pool},
                "spec": spec,
            }
        )

    def _wait(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        def check() -> bool:
            exited = [n for n, a in self.agents.items() if a.poll() is not None]
            if exited:
                raise SimulateError(f"agent {exited[0]} exited before {what}")
            if self.controller is not None and self.controller.exited() is not None:
                raise SimulateError(f"the pool controller exited before {what} (its log: {self.workdir})")
            self.progress.flush()
            return condition()

        try:
            self.sim.wait_for(check, timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise SimulateError(f"timed out waiting for {what}") from None

    def _result(
        self, target: str, limit_value: int | str, t0: float, t_end: float, picture: Path | None
    ) -> dict[str, Any]:
        samples = [
            timeline.NodeSample(t - t0, s.name, s.annotations, s.ready)
            for t, s in in_order(self.recorder.nodes)
        ]
        pods = [
            timeline.PodSample(t - t0, s.name, s.labels, s.healthy, s.gone)
            for t, s in in_order(self.recorder.pods)
        ]
        tracks = timeline.node_timelines(samples, target, t_end - t0)
        budgets = []
        if self.o.pdb is not None:
            budgets.append(
                timeline.budget_check(budget(self.o.pdb, self.o.replicas or len(self.names)), pods)
            )
        limit = max_unavailable(limit_value, len(self.names))
        updated = pool_updated(self.sim, self.pool, target)
        result = timeline.summary(
            tracks,
            samples,
            target=target,
            limit=limit,
            budgets=budgets,
            total=t_end - t0,
            pool_updated=updated,
        )
        if picture is not None:
            title = f"{len(self.names)} nodes to {target}, maxUnavailable {limit_value}"
            drawing = svg(
                tracks,
                t_end - t0,
                title=title,
                limit=limit,
                result=result,
                series=timeline.unavailable_series(samples),
            )
            atomic_write(picture, drawing.encode(), 0o644)
        return result

    def _report(self, result: dict[str, Any]) -> None:
        if self.o.output == "json":
            self.out.write(json.dumps(result, indent=2) + "\n")
            return
        self.say("== timeline (seconds after the pool was pointed at the new config)")
        self.say(timeline.text(result))
        if "auditLog" in result:
            worst = result["auditLog"]["maxConcurrentlyUnavailable"]
            self.say(f"from the audit log alone: at most {worst} unavailable at once")
        rss = [v for v in result["peakRssKiB"]["agents"].values() if v]
        self.say(
            f"API requests: {result['apiRequests']['agentsPerNode']} per node from the agents; "
            f"{result['bytesSentByApiServer']} bytes sent by the API server; agent peak RSS "
            f"{max(rss, default=0) // 1024} MiB"
        )
        if self.o.picture is not None:
            self.say(f"picture: {self.o.picture}")

    def _failed(self, message: str) -> None:
        self.out.write(f"mcd-sim simulate: {message}\n")
        for name in self.names:
            a = _annotations(self.sim, name)
            self.out.write(
                f"  {name}: {a.get(ann.CURRENT_CONFIG, '-')} {a.get(ann.STATE, '-')} "
                f"desired {a.get(ann.DESIRED_CONFIG, '-')}\n"
            )
        self.out.write(f"(work directory kept: {self.workdir})\n")


def simulate_fleet(options: FleetOptions, out: TextIO | None = None) -> int:
    """Run the rollout; 0 when every node ended Done, the pool Updated, maxUnavailable and the
    budget held; 1 otherwise."""
    return Fleet(options, out or sys.stdout).run()
