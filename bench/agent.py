#!/usr/bin/env python3
"""Agent benchmark: `mcd start` as a real process against a local API server; prints JSON figures.

Workload: the rendered worker config of ../shared/bench/make_workload.py (2,000 files of 1 KiB,
300 units with dropins) laid down on a fresh sandbox root. Each of the N updates (default 50) is
a one-file rebootless change of it: registries.conf gains one more digest-only mirror (a
NodeDisruptionPolicy `Special`: crio reload, no drain). The server is `mcd_sim.apiserver`
(HTTPS, as kube-apiserver) and a controller stand-in answers the uncordon handshake at once.

Each update is made as upstream's controllers make it: the rendered MachineConfig is created
(the render controller), then, `--render-gap-ms` later (default 300), the node's desiredConfig
is patched (the node controller); the timer starts at the patch. The agent's MachineConfig watch
has the config parsed by then and reads nothing from the server for it (the warm path, what a
cluster sees). With `--render-gap-ms 0` the config arrives with the patch: the agent reads it
with a GET and parses it on the update's path (the cold path, the agent's fallback). Figures:
  api_requests_per_update  requests the agent sent per update, by verb and kind, from the
                           desiredConfig patch to state=Done (watch streams and Events apart)
  done_ms_p50 / p99        desiredConfig patch -> the API server stores state=Done
  cpu_ms_per_update        the agent's CPU time (user and system) per update, all its threads:
                           what an update costs the node, whatever else the machine runs
  idle_rss_mb              the agent's resident memory after the updates, idle
  idle_rss_one_held_mb     the same once one more rendered config is made that no desiredConfig
                           names: the MachineConfig watch keeps it parsed (its one entry)
  credentials              how the agent found the API server: "in-cluster" (as in the
                           DaemonSet: a service account token and CA mounted where the pod has
                           them, in a private mount namespace; needs root and unshare) or
                           "kubeconfig" (--kubeconfig, which also loads the kubeconfig
                           machinery of the kubernetes package: requests, oauthlib, pydantic)
  idle_cpu_percent         its CPU use over an idle window (the watch is open, nothing changes)
  setup, verbosity         how the agent ran: from a wheel installed in a virtualenv of its own
                           (default, as the image and the host install run it; --setup dev: the
                           checkout's `python -m mcd`), at the DaemonSet's log level (warnings;
                           --verbosity -v is upstream's --v=2)
  writes_per_update        Node PATCHes, MachineConfigNode writes and Events per update, from one
                           desiredConfig patch to the next (what goes out after Done counted),
                           beside upstream's daemon's for the same update (bench/upstream.py)
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "agent")]

from harness import NODE, Agent, make_root  # noqa: E402
from mcd_sim.apiserver import ApiServer  # noqa: E402
from mcd_sim.apiserver.audit import read_events  # noqa: E402

from bench.startup import installed_venv, setup_argv  # noqa: E402
from bench.upstream import UPSTREAM_REBOOTLESS_WRITES  # noqa: E402
from mcd.host.runner import SubprocessRunner  # noqa: E402
from mcd.node import annotations as ann  # noqa: E402

REG = "/etc/containers/registries.conf"


def _workload(files: int, units: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO.parent / "shared" / "bench"))
    import make_workload  # type: ignore[import-not-found]

    old, _ = make_workload.build(files, units)
    return dict(old)


def _with_mirrors(base: dict[str, Any], name: str, mirrors: int) -> dict[str, Any]:
    mc = copy.deepcopy(base)
    mc["metadata"] = {"name": name}
    reg = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n'
    reg += '[[registry]]\nlocation = "quay.io/openshift"\n'
    for i in range(mirrors + 1):
        reg += f'[[registry.mirror]]\nlocation = "mirror{i}.example.com/openshift"\n'
        reg += 'pull-from-mirror = "digest-only"\n'
    for f in mc["spec"]["config"]["storage"]["files"]:
        if f["path"] == REG:
            f["contents"] = {"source": "data:," + urllib.parse.quote(reg, safe="")}
    return mc


class HandshakeResponder:
    """Only the drain controller's side of the handshake: cordon or uncordon, then confirm.

    Not `mcd_sim.controller.ControllerStandIn`: that one also recomputes the pool status and
    the node disruption policy on every store change, in this process, where it competes with
    the API server for the interpreter and adds some 200 ms per update that are not the agent's.
    """

    def __init__(self, sim: ApiServer) -> None:
        self.sim = sim
        self.patches = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pending(self) -> tuple[str, str] | None:
        node = self.sim.get("Node", NODE) or {}
        a = node.get("metadata", {}).get("annotations") or {}
        want = a.get(ann.DESIRED_DRAIN, "")
        if self._stop.is_set():
            return ("", "")
        return (want, "") if want and want != a.get(ann.LAST_APPLIED_DRAIN) else None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                want, _ = self.sim.wait_for(self._pending, timeout=1.0)
            except TimeoutError:
                continue
            if not want:
                return
            cordon = want.startswith("drain-")
            for patch in ({"spec": {"unschedulable": cordon or None}},
                          {"metadata": {"annotations": {ann.LAST_APPLIED_DRAIN: want}}}):  # fmt: skip
                before = self.sim.store.resource_version
                self.sim.patch("Node", NODE, patch)
                self.patches += self.sim.store.resource_version != before  # a no-op is not committed

    def __enter__(self) -> HandshakeResponder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


SERVICE_ACCOUNT = "/run/secrets/kubernetes.io/serviceaccount"


class InClusterAgent(Agent):
    """`mcd start` without --kubeconfig, finding the API server as in a pod: the service account
    token and CA at their fixed paths (a tmpfs over /run in a mount namespace of its own, so
    the host's /run is untouched) and KUBERNETES_SERVICE_HOST/PORT."""

    def __init__(self, root: Path, sim: ApiServer, log: Path, secrets: Path, setup: Setup) -> None:
        super().__init__(root, Path(), log, verbosity=setup.verbosity)
        self.sim, self.secrets, self.setup = sim, secrets, setup

    def start(self) -> InClusterAgent:
        self.secrets.mkdir(parents=True, exist_ok=True)
        (self.secrets / "token").write_text(self.sim.token)
        assert self.sim.cert is not None
        (self.secrets / "ca.crt").write_bytes(self.sim.cert.cert_pem)
        url = urllib.parse.urlsplit(self.sim.url)
        env = self.setup.env()
        env.update(KUBERNETES_SERVICE_HOST=str(url.hostname), KUBERNETES_SERVICE_PORT=str(url.port))
        agent = [
            *self.setup.mcd, "start", "--root-mount", str(self.root),
            "--metrics-url", self.metrics_url, "--kubelet-healthz-enabled=false", *self.verbosity,
        ]  # fmt: skip
        files = " ".join(shlex.quote(str(self.secrets / name)) for name in ("token", "ca.crt"))
        script = (
            f"mount -t tmpfs tmpfs /run && mkdir -p {SERVICE_ACCOUNT} && cp {files} {SERVICE_ACCOUNT}/ && "
            f"exec {shlex.join(agent)}"
        )
        log = self.log_path.open("ab")
        # unshare execs sh, which execs the agent: the process started is the agent itself
        self.proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script], stdout=log, stderr=log, env=env)
        log.close()
        return self


class Setup:
    """How the agent is run: `installed` (mcd from its wheel in a virtualenv of its own, as the
    image and the host install have it; bench/startup.py's) or `dev` (`python -m mcd` of the
    checkout's editable install, whose import hooks load modules the installed mcd does not),
    at the DaemonSet's log level (none: warnings) unless told."""

    def __init__(self, name: str, verbosity: tuple[str, ...]) -> None:
        self.name, self.verbosity = name, verbosity
        _, self.mcd = setup_argv(name, installed_venv(REPO) if name == "installed" else None)

    def env(self) -> dict[str, str]:
        env = dict(os.environ, NODE_NAME=NODE)
        env.pop("NOTIFY_SOCKET", None)
        if self.name == "dev":
            env["PYTHONPATH"] = str(REPO)
        return env


def _settled(pid: int, quiet: float, timeout: float) -> None:
    """Wait until the agent used CPU (it took the config from its watch) and then none for
    `quiet` seconds (it hands the decoding's memory back after 1 s idle); at most `timeout`."""
    deadline = time.monotonic() + timeout
    start = _cpu_seconds(pid)
    while _cpu_seconds(pid) == start and time.monotonic() < deadline:
        time.sleep(0.05)
    last, since = _cpu_seconds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = _cpu_seconds(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def _in_cluster_possible() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


def _done(sim: ApiServer, name: str) -> bool:
    a = (sim.get("Node", NODE) or {}).get("metadata", {}).get("annotations") or {}
    return a.get(ann.STATE) == "Done" and a.get(ann.CURRENT_CONFIG) == name


def _reported(sim: ApiServer) -> bool:
    """Whether the agent reported its node up to date on its MachineConfigNode (Updated True)."""
    mcn = sim.get("MachineConfigNode", NODE) or {}
    conditions = (mcn.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Updated" and c.get("status") == "True" for c in conditions)


def _stamp(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def _requests_per_update(audit: Path, marks: list[tuple[float, float]]) -> list[dict[str, int]]:
    """The agent's requests received between each desiredConfig patch and Done, by verb and resource."""
    entries = read_events(audit)
    mine = [e for e in entries if e["userAgent"].startswith("machine-config-daemon/")]
    out = []
    for start, end in marks:
        counts: dict[str, int] = {}
        for e in mine:
            if start <= _stamp(e["requestReceivedTimestamp"]) <= end:
                key = f"{e['verb']} {(e.get('objectRef') or {}).get('resource', '?')}"
                counts[key] = counts.get(key, 0) + 1
        out.append(counts)
    return out


def _writes(per_update: list[dict[str, int]]) -> dict[str, dict[str, float]]:
    """The agent's writes per update by kind, beside upstream's daemon's for the same update."""

    def mean(*keys: str) -> float:
        return round(statistics.mean(sum(c.get(k, 0) for k in keys) for c in per_update), 1)

    mcd = {
        "node_patches": mean("patch nodes"),
        "machineconfignode_writes": mean(
            "update machineconfignodes", "create machineconfignodes", "patch machineconfignodes"
        ),
        "events": mean("create events", "patch events"),
    }
    return {"mcd": mcd, "upstream": dict(UPSTREAM_REBOOTLESS_WRITES)}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=50)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--units", type=int, default=300)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument(
        "--render-gap-ms",
        type=float,
        default=300.0,
        help="from the MachineConfig's creation to the desiredConfig patch (0: the cold path)",
    )
    ap.add_argument(
        "--kubeconfig",
        action="store_true",
        help="credentials from a kubeconfig (default: in-cluster when root with unshare)",
    )
    ap.add_argument(
        "--setup",
        choices=("installed", "dev"),
        default="installed",
        help="the agent from a wheel install (default, as users run it) or the checkout's dev venv",
    )
    ap.add_argument(
        "--verbosity",
        choices=("", "-v", "-vv"),
        default="",
        help="the agent's log level, given as --verbosity=-v (default none: warnings only, as "
        "manifests/04-daemonset.yaml runs it)",
    )
    args = ap.parse_args()
    in_cluster = not args.kubeconfig and _in_cluster_possible()
    setup = Setup(args.setup, (args.verbosity,) if args.verbosity else ())

    base = _with_mirrors(_workload(args.files, args.units), "rendered-worker-0", 0)
    with tempfile.TemporaryDirectory(prefix="mcd-bench-agent-") as tmp:
        tmp_path = Path(tmp)
        root = make_root(tmp_path, base, SubprocessRunner())
        sim = ApiServer(audit_log_path=tmp_path / "audit.log").start()
        try:
            sim.put(base)
            sim.add_node(NODE)
            first = "rendered-worker-0"
            boot = {ann.CURRENT_CONFIG: first, ann.DESIRED_CONFIG: first, ann.STATE: "Done"}
            sim.patch("Node", NODE, {"metadata": {"annotations": boot}})
            kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
            with HandshakeResponder(sim):
                if in_cluster:
                    agent: Agent = InClusterAgent(root, sim, tmp_path / "agent.log", tmp_path / "sa", setup)
                else:
                    agent = Agent(
                        root, kubeconfig, tmp_path / "agent.log", verbosity=setup.verbosity, command=setup.mcd
                    )
                agent.start()
                assert agent.proc is not None
                # Done on the config it booted in: its boot path ran (the node's state is already
                # Done, so the sign is the MachineConfigNode it reports that on)
                sim.wait_for(lambda: _reported(sim), timeout=120)
                times: list[float] = []
                marks: list[tuple[float, float]] = []
                cpu_start = _cpu_seconds(agent.proc.pid)
                for i in range(1, args.updates + 1):
                    name = f"rendered-worker-{i}"
                    sim.put(_with_mirrors(base, name, i))
                    # the node controller names the config once the render controller made it
                    time.sleep(args.render_gap_ms / 1000)
                    start = time.monotonic()
                    sim.patch("Node", NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: name}}})
                    sim.wait_for(lambda name=name: _done(sim, name), timeout=120)
                    end = time.monotonic()
                    times.append((end - start) * 1000)
                    marks.append((time.time() - (end - start), time.time()))
                pid = agent.proc.pid
                cpu_updates = _cpu_seconds(pid) - cpu_start
                time.sleep(1.0)  # let the last Events go out before the idle window
                cpu0, t0 = _cpu_seconds(pid), time.monotonic()
                time.sleep(args.idle_seconds)
                cpu1, t1 = _cpu_seconds(pid), time.monotonic()
                rss = _rss_mb(pid)
                # one more rendered config that no desiredConfig names: the watch keeps it parsed
                held = f"rendered-worker-{args.updates + 1}"
                sim.put(_with_mirrors(base, held, args.updates + 1))
                _settled(pid, quiet=2.0, timeout=60)
                rss_held = _rss_mb(pid)
                agent.stop()
        finally:
            sim.stop()
        per_update = _requests_per_update(tmp_path / "audit.log", marks)
        # each update's whole share, what went out after Done (Events, the last MachineConfigNode
        # writes) included: from its desiredConfig patch to the next one's
        ends = [start for start, _ in marks[1:]] + [marks[-1][1] + 1.0]
        whole = [(start, end) for (start, _), end in zip(marks, ends, strict=True)]
        writes = _writes(_requests_per_update(tmp_path / "audit.log", whole))
    keys = sorted({k for c in per_update for k in c})
    result = {
        "updates": args.updates,
        "files": args.files,
        "units": args.units,
        "render_gap_ms": args.render_gap_ms,
        "api_requests_per_update": {k: statistics.mean(c.get(k, 0) for c in per_update) for k in keys},
        "done_ms_p50": round(_pct(times, 0.5), 1),
        "done_ms_p99": round(_pct(times, 0.99), 1),
        "done_ms_max": round(max(times), 1),
        "cpu_ms_per_update": round(1000 * cpu_updates / args.updates, 1),
        "idle_rss_mb": round(rss, 1),
        "idle_rss_one_held_mb": round(rss_held, 1),
        "credentials": "in-cluster" if in_cluster else "kubeconfig",
        "setup": setup.name,
        "verbosity": args.verbosity or "none",
        "idle_cpu_percent": round(100 * (cpu1 - cpu0) / (t1 - t0), 2),
        "writes_per_update": writes,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
