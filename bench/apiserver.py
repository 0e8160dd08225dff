#!/usr/bin/env python3
"""Stand-in API server benchmark (`mcd-sim sim-cluster` in its own process); prints JSON figures.

One client connection (HTTPS, keep-alive), as the daemon's node writer uses:
  get_node_per_s       GET /api/v1/nodes/worker-0, sequential requests per second
  patch_node_per_s     merge PATCH of one annotation on the same node, sequential, per second
  watch_latency_ms     from sending a PATCH to receiving its MODIFIED event on an open watch
                       (field selector metadata.name=worker-0): p50 and p99 over --samples writes
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def _connect(server: str, ca: bytes) -> http.client.HTTPSConnection:
    host, port = server.removeprefix("https://").rsplit(":", 1)
    ctx = ssl.create_default_context(cadata=ca.decode())
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
    conn.connect()
    return conn


def _rate(conn: http.client.HTTPSConnection, seconds: float, send: Any) -> float:
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        send(count)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
        count += 1
    return round(count / (time.perf_counter() - started), 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each rate measurement")
    ap.add_argument("--samples", type=int, default=500, help="writes timed for the watch latency")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        cmd = [sys.executable, "-m", "mcd_sim", "sim-cluster", "--kubeconfig", str(kubeconfig)]
        cmd += ["--node", "worker-0"]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.DEVNULL) as proc:
            try:
                deadline = time.monotonic() + 30
                while not kubeconfig.exists():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("mcd-sim sim-cluster did not start")
                    time.sleep(0.05)
                result = measure(yaml.safe_load(kubeconfig.read_text()), args.seconds, args.samples)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    print(json.dumps(result, indent=2))
    return 0


def measure(config: dict[str, Any], seconds: float, samples: int) -> dict[str, Any]:
    cluster = config["clusters"][0]["cluster"]
    server, ca = cluster["server"], base64.b64decode(cluster["certificate-authority-data"])
    auth = {"Authorization": f"Bearer {config['users'][0]['user']['token']}"}
    patch_headers = {**auth, "Content-Type": "application/merge-patch+json"}
    conn = _connect(server, ca)
    path = "/api/v1/nodes/worker-0"

    def patch(n: int) -> None:
        body = json.dumps({"metadata": {"annotations": {"bench": str(n)}}})
        conn.request("PATCH", path, body=body, headers=patch_headers)

    get_rate = _rate(conn, seconds, lambda _n: conn.request("GET", path, headers=auth))
    patch_rate = _rate(conn, seconds, patch)

    watch = _connect(server, ca)
    watch.request("GET", "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dworker-0", headers=auth)
    stream = watch.getresponse()
    assert stream.status == 200
    stream.readline()  # the initial ADDED event
    latencies = []
    for n in range(samples):
        body = json.dumps({"metadata": {"annotations": {"bench": f"w{n}"}}})
        started = time.perf_counter()
        conn.request("PATCH", path, body=body, headers=patch_headers)
        event = json.loads(stream.readline())
        latencies.append((time.perf_counter() - started) * 1000)
        assert event["object"]["metadata"]["annotations"]["bench"] == f"w{n}"
        conn.getresponse().read()
    watch.close()
    conn.close()
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "get_node_per_s": get_rate,
        "patch_node_per_s": patch_rate,
        "watch_latency_ms": {"p50": round(cuts[49], 2), "p99": round(cuts[98], 2), "samples": samples},
        "transport": "https, one keep-alive connection; server in its own process",
    }


if __name__ == "__main__":
    raise SystemExit(main())
