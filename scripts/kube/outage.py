"""Liveness through a long API server outage, on a real control plane: the proof for issue 28.

    python scripts/kube/outage.py [--minutes 10] [--poll 5] [--limit SECONDS] [--keep]

Starts etcd and kube-apiserver v1.20.2 (tests/kube/realcluster.py; built once when not cached:
root, about 6 min), deploys mcd on it as a user does (the manifests, the pool controller, one node
with its agent as the DaemonSet runs it), stops kube-apiserver for --minutes and polls the agent's
/healthz (liveness: the DaemonSet's probe, the unit's watchdog) and /readyz every --poll seconds,
then starts the server again and rolls one more MachineConfig through the node. The agent keeps
its default --api-unreachable-limit (300 s) unless --limit is given. Prints a line a minute, then
a JSON summary; exit 0 when /healthz answered 200 on every poll, /readyz failed once the limit
was passed and came back, and the same agent process took the next change to Done.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "kube"))

from outage import Outage, run_outage
from realcluster import RealCluster, build_apiserver

DEFAULT_LIMIT = 300.0  # the agent's own default, for the verdict


def _verdict(result: Outage, limit: float) -> list[str]:
    """What went wrong (empty: the proof holds)."""
    wrong = [f"/healthz {h} at t={t} s" for t, h, _ in result.healthz_failures()]
    if result.outage_seconds > limit + 30:
        failed = result.readyz_failed_after
        # the limit runs from the end of the agent's watch (times from the SIGTERM: the server
        # drains before it exits), so neither sooner nor much later
        if failed is None or not limit - 5 <= failed <= result.stopped_after + limit + 30:
            wrong.append(f"/readyz failed after {failed} s, not at {limit:.0f} s")
    if result.agent_exit is not None or result.agent_pid_after != result.agent_pid_before:
        wrong.append(f"the agent did not live through it (exit {result.agent_exit})")
    if result.converged_after <= 0:
        wrong.append("no change converged after the outage")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="outage.py", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the API server is away")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between probes")
    parser.add_argument("--limit", type=float, default=None, help="the agent's --api-unreachable-limit")
    parser.add_argument("--keep", action="store_true", help="keep the logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    work = Path(tempfile.mkdtemp(prefix="mcd-outage-"))
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {line}", flush=True)

    say(f"starting the control plane (work directory {work})")
    cluster = RealCluster(build_apiserver(), keep=args.keep)
    with cluster:
        say(f"kube-apiserver ready at {cluster.url}")
        result = run_outage(
            cluster,
            work,
            outage_seconds=args.minutes * 60,
            poll_seconds=args.poll,
            unreachable_limit=args.limit,
            say=say,
        )
    wrong = _verdict(result, limit)
    failed = result.readyz_failed_after
    summary = {
        "outage_seconds": round(result.outage_seconds, 1),
        "probes": len(result.samples),
        "healthz_failures": len(result.healthz_failures()),
        "readyz_failed_after": failed if failed is None else round(failed, 1),
        "readyz_back_after": round(result.readyz_back_after, 1),
        "agent_restarted": result.agent_pid_after != result.agent_pid_before or result.agent_exit is not None,
        "next_change_done_after": round(result.converged_after, 1),
        "verdict": wrong or "ok",
    }
    print(json.dumps(summary, indent=2))
    if wrong or args.keep:
        print(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
