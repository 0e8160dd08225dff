"""An API server outage under a deployed agent, on a RealCluster: liveness must hold throughout.

`run_outage` deploys mcd as tests/kube/deployment.py does (one node, its agent as the DaemonSet
runs it, two pool controller replicas), waits for Done, then stops kube-apiserver for
`outage_seconds` and polls the agent's `/healthz` (liveness: what the DaemonSet's probe and the
unit's watchdog follow) and `/readyz` every `poll_seconds`. Then it starts the server again, waits
for `/readyz` to come back, and rolls one more MachineConfig through the node, to show the agent
that lived through the outage still works. The caller asserts on the `Outage` it returns:
`/healthz` never anything but 200, `/readyz` 503 once the outage outlasted the agent's
`--api-unreachable-limit`, the agent's process the same one throughout.

Used by scripts/kube/outage.py (the 10-minute proof, default limit) and
tests/kube/test_outage.py (the same, shortened). Nothing here belongs to the product.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deployment import (
    DRAIN_FILE,
    Kubelet,
    Processes,
    deploy,
    done_on,
    machineconfig,
    pool_target,
    wait,
)
from realcluster import RealCluster

NODE = "outage-node"
AGENT = f"agent-{NODE}"


@dataclass
class Outage:
    """What the agent said while the API server was away (times in seconds from its SIGTERM)."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, /healthz, /readyz)
    outage_seconds: float = 0.0  # how long the server was really down
    stopped_after: float = 0.0  # from the SIGTERM until the server had exited (its graceful drain)
    readyz_failed_after: float | None = None  # the first /readyz that was not 200
    readyz_back_after: float = 0.0  # after the server's start, until /readyz was 200 again
    agent_pid_before: int = 0
    agent_pid_after: int = 0
    agent_exit: int | None = None  # None: still running at the end
    converged_after: float = 0.0  # the MachineConfig after the outage, until the node was Done

    def healthz_failures(self) -> list[tuple[float, int, int]]:
        return [s for s in self.samples if s[1] != 200]


def probe(port: int, path: str) -> int:
    """The status of GET path on the agent's plain endpoint (0: no answer at all)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _metrics_port(procs: Processes) -> int:
    found = re.search(r"metrics listening on 127\.0\.0\.1:(\d+)", procs.log(AGENT))
    return int(found[1]) if found else 0


def run_outage(
    cluster: RealCluster,
    work: Path,
    *,
    outage_seconds: float,
    poll_seconds: float,
    unreachable_limit: float | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> Outage:
    """The scenario above; `unreachable_limit` None keeps the agent's default (300 s)."""
    result = Outage()
    procs = Processes(work)
    kubelet = Kubelet(cluster, "web", [NODE], min_available=0)
    extra: tuple[str, ...] = ("--metrics-url", "127.0.0.1:0")
    if unreachable_limit is not None:
        extra += ("--api-unreachable-limit", str(unreachable_limit))
    try:
        old, _ = deploy(cluster, work, procs, kubelet, [NODE], agent_extra=extra)
        kubelet.start()
        wait("the agent's metrics port in its log", lambda: _metrics_port(procs) > 0, 30, procs)
        port = _metrics_port(procs)
        wait("/readyz 200 before the outage", lambda: probe(port, "/readyz") == 200, 30, procs)
        result.agent_pid_before = procs.procs[AGENT].pid
        say(f"node {NODE} Done on {old}; /healthz and /readyz 200; stopping kube-apiserver")
        _outage(cluster, procs, port, seconds=outage_seconds, poll=poll_seconds, result=result, say=say)
        result.agent_exit = procs.procs[AGENT].poll()
        result.agent_pid_after = procs.procs[AGENT].pid
        # and the agent still works: one more change, through its drain, to Done
        began = time.monotonic()
        after = machineconfig("60-worker-after", DRAIN_FILE, "after")
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(after))
        wait("the pool rendered again", lambda: pool_target(cluster) not in ("", old), 120, procs)
        new = pool_target(cluster)
        wait(f"{NODE} Done on {new}", lambda: done_on(cluster, NODE, new), 180, procs)
        result.converged_after = time.monotonic() - began
        say(f"after the outage: {NODE} Done on {new} in {result.converged_after:.1f} s")
        result.agent_exit = procs.procs[AGENT].poll()
    finally:
        kubelet.stop()
        procs.stop()
    return result


def _outage(
    cluster: RealCluster,
    procs: Processes,
    port: int,
    *,
    seconds: float,
    poll: float,
    result: Outage,
    say: Callable[[str], None],
) -> None:
    # the outage begins with the SIGTERM: kube-apiserver closes its watches and listener at once,
    # then drains its requests in flight before it exits, which may take seconds
    began = time.monotonic()
    cluster.stop_apiserver()
    result.stopped_after = time.monotonic() - began
    next_say = 0.0
    try:
        # a poll every `poll` seconds for `seconds` once the server has exited
        while (t := time.monotonic() - began) < result.stopped_after + seconds:
            healthz, readyz = probe(port, "/healthz"), probe(port, "/readyz")
            result.samples.append((round(t, 1), healthz, readyz))
            if readyz != 200 and result.readyz_failed_after is None:
                result.readyz_failed_after = t
            if healthz != 200 or t >= next_say:
                say(f"t={t:6.1f} s  /healthz {healthz}  /readyz {readyz}  agent {_alive(procs)}")
                next_say = t + 60
            time.sleep(max(0.0, min(poll, result.stopped_after + seconds - (time.monotonic() - began))))
    finally:
        result.outage_seconds = time.monotonic() - began
        cluster.start_apiserver()
    back = time.monotonic()
    say(f"kube-apiserver back after {result.outage_seconds:.0f} s; waiting for /readyz 200")
    wait("/readyz 200 after the outage", lambda: probe(port, "/readyz") == 200, 120, procs)
    result.readyz_back_after = time.monotonic() - back
    result.samples.append((round(time.monotonic() - began, 1), probe(port, "/healthz"), 200))


def _alive(procs: Processes) -> str:
    code = procs.procs[AGENT].poll()
    return "running" if code is None else f"exited {code}"
