"""A pool rollout on a real control plane (etcd + kube-apiserver v1.20.2), for a person to watch.

    python scripts/kube/demo.py [--nodes N] [--stay] [--keep]

Starts the control plane (building the server once when it is not cached: root, about 6 min),
then does what a user does: `kubectl apply -f manifests/` and `manifests/pool-controller/`, a
worker pool of N Nodes with a PodDisruptionBudget-protected workload, two `mcd pool-controller`
replicas and one `mcd start` agent per node on a sandbox root (no kubelet: this script plays the
kubelets and the disruption controller, as tests/kube does). It then adds a MachineConfig and
prints every node's state as the pool rolls onto it, one node at a time, until the pool is
Updated. With --stay it keeps everything running and prints the admin KUBECONFIG, so kubectl can
look around (Ctrl-C ends it). Exit 0 when the rollout ended Done on every node.

The fleet simulation (`mcd simulate --nodes`) runs on the in-process stand-in API server only:
its recorder, workload and figures read that server's store directly. This is the same rollout
on the real server, through tests/kube/deployment.py.
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

from deployment import (
    CURRENT,
    DESIRED,
    DRAIN_FILE,
    STATE,
    Kubelet,
    Processes,
    deploy,
    done_on,
    machineconfig,
    node_annotations,
    pool_target,
    wait,
)
from realcluster import ClusterError, RealCluster, build_apiserver
from untilstopped import wait_for_stop_signal


def _row(cluster: RealCluster, node: str) -> str:
    a = node_annotations(cluster, node)
    spec = cluster.request("GET", f"/api/v1/nodes/{node}").json().get("spec") or {}
    cordon = " cordoned" if spec.get("unschedulable") else ""
    return f"{node}: {a.get(STATE, '-')}{cordon} current={a.get(CURRENT, '-')} desired={a.get(DESIRED, '-')}"


def _roll(cluster: RealCluster, procs: Processes, nodes: list[str], old: str, timeout: float) -> str:
    """Adds the MachineConfig and prints each node's line whenever it changes, until every node
    is Done on the new rendered config."""
    cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps(machineconfig("50-worker-drain", DRAIN_FILE, "drained"))
    )
    print("== MachineConfig 50-worker-drain added (its file's node disruption policy: Drain)", flush=True)
    wait("the pool rendered again", lambda: pool_target(cluster) not in ("", old), 60, procs)
    new = pool_target(cluster)
    print(f"== pool worker -> {new}", flush=True)
    shown: dict[str, str] = {}
    t0 = time.monotonic()

    def show_and_check() -> bool:
        for node in nodes:
            try:
                line = _row(cluster, node)
            except (OSError, ValueError):
                return False
            if shown.get(node) != line:
                shown[node] = line
                print(f"{time.monotonic() - t0:6.1f}s  {line}", flush=True)
        return all(done_on(cluster, n, new) for n in nodes)

    wait(f"every node Done on {new}", show_and_check, timeout, procs)
    print(f"== every node Done on {new} after {time.monotonic() - t0:.1f} s", flush=True)
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3, help="nodes in the pool (default 3)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the rollout (default 300)")
    parser.add_argument("--stay", action="store_true", help="keep it all running until Ctrl-C")
    parser.add_argument("--keep", action="store_true", help="keep the directories (logs, audit log)")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes: at least 1")
    nodes = [f"worker-{i}" for i in range(args.nodes)]
    cluster = RealCluster(build_apiserver(), keep=args.keep)
    work = Path(tempfile.mkdtemp(prefix="mcd-kube-demo-"))
    procs = Processes(work)
    kubelet = Kubelet(cluster, "web", nodes, min_available=max(1, args.nodes - 1))
    try:
        cluster.start()
        print(f"== kube-apiserver v1.20.2 at {cluster.url}; logs in {work}", flush=True)
        old, _ = deploy(cluster, work, procs, kubelet, nodes)
        print(f"== {args.nodes} agents Done on {old}; workload web under a PodDisruptionBudget", flush=True)
        kubelet.start()
        _roll(cluster, procs, nodes, old, args.timeout)
        if args.stay:
            print(f"\nexport KUBECONFIG={cluster.admin_kubeconfig}\n(Ctrl-C stops it)", flush=True)
            wait_for_stop_signal()
        return 0
    except ClusterError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        kubelet.stop()
        procs.stop()
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
