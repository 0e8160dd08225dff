#!/usr/bin/env python3
"""Fleet benchmark: N real agents rolled by `mcd pool-controller` (a process) under a
PodDisruptionBudget; prints JSON.

For each size N (`--sizes` or `--nodes`, default 50), one `mcd-sim simulate` cluster (`mcd_sim.fleet`): N
`mcd start` processes on sandbox roots joined on examples/old.yaml, a workload of one pod per
node under a budget (`--pdb`: its maxUnavailable, default 1 pod), then:
  idle      `--idle` seconds (default 30) with nothing to do: the controller's requests per minute
  rollout   to examples/reboot.yaml with maxUnavailable `--max-unavailable` (default 10%): each
            node drained and (simulated) rebooted
Per size:
  seconds, bound_seconds, ratio   pool pointed at the config -> every node Done and the pool
                                  Updated, against the longer of two bounds (`bounds`, `bound_by`):
                                  ceil(N / maxUnavailable) x the median seconds one node took (what
                                  maxUnavailable and one update imply), and ceil(N / the budget's
                                  pods) x the seconds a replacement pod takes to be Ready (what the
                                  budget, `--pdb`, default 1 pod, implies)
  per_node_per_update             the agents' requests per node: all, Node PATCHes, Events posted,
                                  MachineConfigNode writes (from the audit log)
  controller_requests_per_minute  idle and during the rollout
  max_unavailable_seen, pdb_violations
  rss_mib                         agents' peaks (max, mean) and their mean at the end of the idle
                                  window, the controller's peak, this process (API server)
  phases                          from the Node PATCHes: target to the agent's drain request, the
                                  drain (desiredDrain to lastAppliedDrain), the rest of each
                                  node's update, how long a freed slot waited for the controller
                                  to target the next node
  load, uptime                    the machine's load averages before and after
"""

from __future__ import annotations

import argparse
import calendar
import io
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from mcd_sim.apiserver.audit import read_events  # noqa: E402
from mcd_sim.fleet import Fleet, FleetOptions  # noqa: E402
from mcd_sim.room import fleet_room  # noqa: E402
from mcd_sim.simulate import SimulateError  # noqa: E402

OLD, NEW = REPO / "examples" / "old.yaml", REPO / "examples" / "reboot.yaml"
AGENT_UA, CONTROLLER_UA = "machine-config-daemon/", "machine-config-controller/"


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def _audit(path: Path, since: float, until: float) -> list[dict[str, Any]]:
    first, last = _stamp(since), _stamp(until)
    # read while the API server writes (the idle window): complete lines only
    return [e for e in read_events(path) if first <= e["requestReceivedTimestamp"] <= last]


def _resource(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    return str(ref.get("resource", "")) + ("/" + ref["subresource"] if ref.get("subresource") else "")


def _agent_writes(events: list[dict[str, Any]], nodes: int) -> dict[str, float]:
    agents = [e for e in events if e.get("userAgent", "").startswith(AGENT_UA)]

    def per_node(pick: Any) -> float:
        return round(sum(1 for e in agents if pick(e)) / nodes, 1)

    return {
        "requests": per_node(lambda e: True),
        "node_patches": per_node(lambda e: e["verb"] == "patch" and _resource(e).startswith("nodes")),
        "events": per_node(lambda e: e["verb"] in ("create", "patch") and _resource(e) == "events"),
        "machineconfignode_writes": per_node(
            lambda e: (
                e["verb"] in ("create", "update", "patch") and _resource(e).startswith("machineconfignodes")
            )
        ),
    }


def _events_by_reason(events: list[dict[str, Any]], names: dict[str, str], nodes: int) -> dict[str, float]:
    """The agents' Event writes per node by reason (a repeat's PATCH under the reason its create
    named, from `names`: Event name -> reason), most first."""
    counts: dict[str, int] = {}
    for e in events:
        if not e.get("userAgent", "").startswith(AGENT_UA) or _resource(e) != "events":
            continue
        if e["verb"] == "create":
            reason = str((e.get("requestObject") or {}).get("reason", "?"))
        elif e["verb"] == "patch":
            reason = names.get(str((e.get("objectRef") or {}).get("name", "")), "?") + " (repeat)"
        else:
            continue
        counts[reason] = counts.get(reason, 0) + 1
    return {r: round(n / nodes, 2) for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def _event_names(events: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for e in events:
        body = e.get("requestObject") or {}
        if e["verb"] == "create" and _resource(e) == "events" and body.get("reason"):
            out[str((body.get("metadata") or {}).get("name", ""))] = str(body["reason"])
    return out


ANN = "machineconfiguration.openshift.io/"


def _node_writes(events: list[dict[str, Any]]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(time, node, who, annotations written) of every Node PATCH in `events`, in order."""
    out = []
    for e in events:
        if e["verb"] != "patch" or _resource(e) != "nodes":
            continue
        body = e.get("requestObject") or {}
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        who = "controller" if e.get("userAgent", "").startswith(CONTROLLER_UA) else "agent"
        out.append(
            (e["requestReceivedTimestamp"], str((e.get("objectRef") or {}).get("name", "")), who, annotations)
        )
    return out


def _seconds(stamp: str) -> float:
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + stamp[20:-1] or "0")


def _phases(events: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """Where the rollout's time goes, from the Node PATCHes: per node, the controller's target
    (desiredConfig) to the agent's Done, split into the wait for the agent's drain request
    (desiredDrain drain-…), the drain (to the controller's lastAppliedDrain) and the rest (the
    agent's update, its reboot and uncordon); and how long a freed slot waits for the controller
    to target the next node."""
    target: dict[str, float] = {}
    asked: dict[str, float] = {}
    drained: dict[str, float] = {}
    done: dict[str, float] = {}
    for stamp, node, who, a in _node_writes(events):
        t = _seconds(stamp)
        if who == "controller" and a.get(ANN + "desiredConfig") and node not in target:
            target[node] = t
        elif who == "agent" and str(a.get(ANN + "desiredDrain", "")).startswith("drain-") and node in target:
            asked.setdefault(node, t)
        elif who == "controller" and str(a.get(ANN + "lastAppliedDrain", "")).startswith("drain-"):
            drained.setdefault(node, t)
        elif who == "agent" and a.get(ANN + "state") == "Done" and node in target and node not in done:
            done[node] = t
    # the target to the agent's drain request: its own checks first (a budget allowing no
    # disruption now makes it wait, with its backoff, before it asks)
    until_asked = [asked[n] - target[n] for n in asked]
    drains = [drained[n] - asked[n] for n in asked if n in drained]
    rest = [done[n] - drained[n] for n in done if n in drained]
    targets = sorted(target.values())
    # each Done frees a slot: the wait until the next node is targeted (while some are left)
    refill = [
        min(t for t in targets if t >= d) - d for d in sorted(done.values()) if any(t >= d for t in targets)
    ]

    def stats(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}

    return {
        "until_drain_asked_seconds": stats(until_asked),
        "drain_seconds": stats(drains),
        "after_drain_seconds": stats(rest),
        "slot_refill_seconds": stats(refill),
        "nodes_seen": len(done),
        "limit": limit,
    }


def _controller_rate(events: list[dict[str, Any]], seconds: float) -> float:
    count = sum(1 for e in events if e.get("userAgent", "").startswith(CONTROLLER_UA))
    return round(count / seconds * 60, 1)


def _rss_kib(pid: int) -> int | None:
    """A process's resident memory now (VmRSS), KiB; None once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), None)


def _uptime() -> str:
    """`uptime`'s words: the load averages over 1, 5 and 15 minutes (the machine is shared)."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def _limit(value: str, nodes: int) -> int:
    if value.endswith("%"):
        return max(1, int(value[:-1]) * nodes // 100)
    return max(1, int(value))


def _budget_pods(value: str, pods: int) -> int:
    """The pods a budget's maxUnavailable lets go at once (a percentage rounds up, as the
    disruption controller scales it)."""
    if value.endswith("%"):
        return max(1, math.ceil(int(value[:-1]) * pods / 100))
    return max(1, int(value))


def measure(nodes: int, workdir: Path, max_unavailable: str, idle: float, pdb: str = "1") -> dict[str, Any]:
    limit_value: int | str = max_unavailable if max_unavailable.endswith("%") else int(max_unavailable)
    budget_value: int | str = pdb if pdb.endswith("%") else int(pdb)
    options = FleetOptions(
        workdir=workdir,
        old=OLD,
        new=NEW,
        nodes=nodes,
        max_unavailable=limit_value,
        timeout=600 + 30 * nodes,
        output="json",
        pdb={"maxUnavailable": budget_value},
    )
    fleet = Fleet(options, io.StringIO())
    deadline = time.monotonic() + options.timeout
    load_before = os.getloadavg()[0]
    uptime_before = _uptime()
    try:
        fleet.setup(deadline)
        audit = workdir / "audit.log"
        t_idle = time.time()
        time.sleep(idle)  # a measuring window, not a wait for something
        idle_rate = _controller_rate(_audit(audit, t_idle, time.time()), idle)
        idle_rss = [kib for a in fleet.agents.values() if (kib := _rss_kib(a.pid)) is not None]
        t0 = time.time()
        result = fleet.roll(fleet.after, limit_value, deadline)
        t1 = time.time()
    finally:
        fleet.teardown()
    events = _audit(audit, t0, t1)
    names = _event_names(_audit(audit, 0, t1))  # a repeat's PATCH may be of an Event made before
    limit = _limit(max_unavailable, nodes)
    per_node = [float(n["seconds"]) for n in result["perNode"] if n.get("seconds")]
    median = statistics.median(per_node) if per_node else 0.0
    # two bounds: maxUnavailable nodes at a time, each taking the median node's time; and the
    # budget's pods at a time, each eviction waiting for the pod before it to be replaced (a
    # replacement is Ready `pod_start` seconds after its eviction): the rollout takes the longer
    pool_bound = math.ceil(nodes / limit) * median
    budget_bound = math.ceil(nodes / _budget_pods(pdb, nodes)) * options.pod_start
    bound = max(pool_bound, budget_bound)
    rss = list(result["peakRssKiB"]["agents"].values())
    controller = result["peakRssKiB"]["controller"]
    return {
        "nodes": nodes,
        "max_unavailable": f"{max_unavailable} ({limit} nodes)",
        "seconds": result["totalSeconds"],
        "node_seconds_median": round(median, 1),
        "pdb_max_unavailable": f"{pdb} ({_budget_pods(pdb, nodes)} pods)",
        "bound_seconds": round(bound, 1),
        "bound_by": "maxUnavailable" if pool_bound >= budget_bound else "budget",
        "bounds": {"maxUnavailable": round(pool_bound, 1), "budget": round(budget_bound, 1)},
        "ratio_to_bound": round(result["totalSeconds"] / bound, 2) if bound else None,
        "all_done": result["allDone"] and result["poolUpdated"],
        "max_unavailable_seen": result["maxConcurrentlyUnavailable"],
        "pdb_violations": result["pdbViolations"],
        "per_node_per_update": _agent_writes(events, nodes),
        "agent_events_per_node_by_reason": _events_by_reason(events, names, nodes),
        "phases": _phases(events, limit),
        "controller_requests_per_minute": {"idle": idle_rate, "rollout": _controller_rate(events, t1 - t0)},
        "rss_mib": {
            "agents_max": round(max(rss) / 1024, 1) if rss else None,
            "agents_mean": round(statistics.fmean(rss) / 1024, 1) if rss else None,
            "agents_idle_mean": round(statistics.fmean(idle_rss) / 1024, 1) if idle_rss else None,
            "controller": None if controller is None else round(controller / 1024, 1),
            "simulator": round(result["peakRssKiB"]["simulator"] / 1024, 1),
        },
        "load": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "uptime": {"before": uptime_before, "after": _uptime()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", "--nodes", type=int, nargs="+", default=[50])
    parser.add_argument("--max-unavailable", default="10%")
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument(
        "--pdb", default="1", help="the workload budget's maxUnavailable: pods or a percentage (default 1)"
    )
    parser.add_argument("--keep", action="store_true", help="keep each size's directory (audit log, logs)")
    args = parser.parse_args()
    short = fleet_room(max(args.sizes))
    if short:
        print(f"bench/fleet.py: {short}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"cpus": len(os.sched_getaffinity(0)), "sizes": []}
    for nodes in args.sizes:
        tmp = Path(tempfile.mkdtemp(prefix="mcd-bench-fleet-"))
        try:
            out["sizes"].append(measure(nodes, tmp, args.max_unavailable, args.idle, args.pdb))
            if args.keep:
                out["sizes"][-1]["kept"] = str(tmp)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        except SimulateError as exc:  # the agents' logs stay for a look
            out["sizes"].append({"nodes": nodes, "error": f"{exc} (logs in {tmp})"})
        print(json.dumps(out["sizes"][-1]), file=sys.stderr, flush=True)  # progress: a size at a time
    print(json.dumps(out, indent=2))
    return 0 if all("error" not in s for s in out["sizes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
