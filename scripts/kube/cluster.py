"""A throwaway real control plane (etcd + kube-apiserver v1.20.2) on loopback, for a person.

    python scripts/kube/cluster.py up [--nodes a,b] [--keep] [--json]
        builds the server when it is not cached (scripts/kube/build-apiserver.sh, root), starts it,
        prints the admin KUBECONFIG (and node kubeconfigs), then serves until Ctrl-C or SIGTERM
        and removes everything (unless --keep).
    python scripts/kube/cluster.py check
        starts it, prints /version and the time it took to become ready, stops it.

A thin command line over tests/kube/realcluster.py, which the `make kube-test` tier uses too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "kube"))

from realcluster import RealCluster, build_apiserver
from untilstopped import wait_for_stop_signal


def _up(args: argparse.Namespace) -> int:
    cluster = RealCluster(build_apiserver(), keep=args.keep)
    started = time.monotonic()
    cluster.start()
    try:
        info = cluster.describe()
        info["ready_after_s"] = f"{time.monotonic() - started:.1f}"
        for name in filter(None, args.nodes.split(",")):
            info[f"node_kubeconfig:{name}"] = str(cluster.node_kubeconfig(name))
        if args.json:
            print(json.dumps(info, indent=2), flush=True)
        else:
            for key, value in info.items():
                print(f"{key}: {value}")
            print(f"\nexport KUBECONFIG={cluster.admin_kubeconfig}\n(Ctrl-C stops it)", flush=True)
        wait_for_stop_signal()
    finally:
        cluster.stop()
    return 0


def _check(_args: argparse.Namespace) -> int:
    binary = build_apiserver()
    started = time.monotonic()
    with RealCluster(binary) as cluster:
        ready = time.monotonic() - started
        version = cluster.request("GET", "/version").json()["gitVersion"]
        print(f"kube-apiserver {version} at {cluster.url}: ready and RBAC effective after {ready:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a control plane and serve until interrupted")
    up.add_argument("--nodes", default="", help="comma-separated node names to mint kubeconfigs for")
    up.add_argument("--keep", action="store_true", help="keep the temporary directory afterwards")
    up.add_argument("--json", action="store_true", help="print what it made as one JSON object")
    up.set_defaults(run=_up)
    check = sub.add_parser("check", help="start, print the version and start-up time, stop")
    check.set_defaults(run=_check)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
