#!/usr/bin/env python3
"""Fleet benchmark: pools of 10, 25 and 50 real agents rolled by the pool controller; prints JSON.

For each size N, one `mcd-sim simulate --nodes N` cluster (`mcd_sim.fleet`): N `mcd start` processes
on sandbox roots joined on examples/old.yaml, then two rollouts, each a drain and a (simulated)
reboot of every node: to examples/reboot.yaml with maxUnavailable 1, and back to old.yaml with
maxUnavailable 5. No workload (drains have nothing to evict): the figures are the agents' and
the API server's. Per rollout:
  seconds                        the pool pointed at the config -> every node Done, pool Updated
  agent_requests_per_node        requests the agents sent in that window (audit log), per node
  other_requests                 requests from other clients: the pool controller
  bytes_sent_per_node            bytes the API server wrote (headers, bodies, watch events), per node
  max_unavailable_seen           most nodes unavailable at once (from the server's commits)
  max_unavailable_in_audit_log   the same, replayed from the audit log alone
and per size: agent peak RSS (MiB: max and mean over agents, the larger of before and after the
simulated reboot), the pool controller's (`mcd pool-controller`, a process) and this process's
(the API server). `--sizes 10 25` picks sizes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from mcd_sim.fleet import Fleet, FleetOptions  # noqa: E402
from mcd_sim.simulate import SimulateError  # noqa: E402

OLD, NEW = REPO / "examples" / "old.yaml", REPO / "examples" / "reboot.yaml"


def _rollout(result: dict[str, Any], nodes: int) -> dict[str, Any]:
    return {
        "seconds": result["totalSeconds"],
        "seconds_per_node": round(result["totalSeconds"] / nodes, 2),
        "agent_requests_per_node": result["apiRequests"]["agentsPerNode"],
        "other_requests": result["apiRequests"]["others"],
        "bytes_sent_per_node": round(result["bytesSentByApiServer"] / nodes),
        "max_unavailable_seen": result["maxConcurrentlyUnavailable"],
        "max_unavailable_in_audit_log": result.get("auditLog", {}).get("maxConcurrentlyUnavailable"),
        "all_done": result["allDone"] and result["poolUpdated"],
    }


def _mib(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024, 1)


def measure(nodes: int, workdir: Path) -> dict[str, Any]:
    options = FleetOptions(workdir=workdir, old=OLD, new=NEW, nodes=nodes, max_unavailable=1,
                           timeout=600 + 30 * nodes, output="json")  # fmt: skip
    fleet = Fleet(options, io.StringIO())
    deadline = time.monotonic() + options.timeout
    started = time.monotonic()
    try:
        fleet.setup(deadline)
        joined = time.monotonic() - started
        forward = fleet.roll(fleet.after, 1, deadline)
        back = fleet.roll(fleet.before, 5, deadline)
    finally:
        fleet.teardown()
    rss = [kib / 1024 for r in (forward, back) for kib in r["peakRssKiB"]["agents"].values()]
    return {
        "nodes": nodes,
        "join_seconds": round(joined, 1),
        "max_unavailable_1": _rollout(forward, nodes),
        "max_unavailable_5": _rollout(back, nodes),
        "agent_peak_rss_mib": {"max": round(max(rss), 1), "mean": round(statistics.fmean(rss), 1)},
        "controller_peak_rss_mib": _mib(back["peakRssKiB"]["controller"]),
        "simulator_peak_rss_mib": round(back["peakRssKiB"]["simulator"] / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 25, 50])
    args = parser.parse_args()
    out: dict[str, Any] = {"cpus": len(os.sched_getaffinity(0)), "sizes": []}
    for nodes in args.sizes:
        tmp = Path(tempfile.mkdtemp(prefix="mcd-bench-fleet-"))
        try:
            out["sizes"].append(measure(nodes, tmp))
            shutil.rmtree(tmp, ignore_errors=True)
        except SimulateError as exc:  # the agents' logs stay for a look
            out["sizes"].append({"nodes": nodes, "error": f"{exc} (logs in {tmp})"})
        print(json.dumps(out["sizes"][-1]), file=sys.stderr, flush=True)  # progress: a size at a time
    print(json.dumps(out, indent=2))
    return 0 if all("error" not in s for s in out["sizes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
