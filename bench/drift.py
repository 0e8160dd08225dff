#!/usr/bin/env python3
"""Config drift monitor benchmark: 10,000 managed files; prints JSON figures.

Workload: one rendered config of 10,000 files of 64 bytes in 100 directories, laid down on a
sandbox root by the real update transaction. Figures:
  setup_ms              DriftMonitor(...).start() in this process: the path index and the
                        inotify watches of the 100 directories (median of 5)
  setup_peak_kib        memory allocated by the monitor while it starts (tracemalloc peak)
  retarget_ms           the running monitor retargeted to the config with one file's contents
                        changed, parsed like the watched one (as after a one-file update): the
                        new expectations, unverified paths and watches (median of 20)
  retarget_added_ms     the same with one file added in a new directory (median of 20)
  agent_rss_mib         resident memory of the agent process, idle with the monitor running
  agent_idle_cpu_s      CPU seconds (user + system) the idle agent used over 10 s
  write_to_patch_ms     from a write to a managed file until the API server received the agent's
                        PATCH making the node Degraded for that file: p50, p99 and max over
                        200 edits, taken from the API server's audit log. Each edit is made on
                        an idle agent (no CPU used for 0.2 s): a Degraded node gets a sync,
                        which re-checks all 10,000 files, before the next edit
The API server is `mcd-sim sim-cluster` in its own process, with its audit log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # mcd, and the tests' MachineConfig builders

NODE = "worker-0"
CONFIG = "rendered-worker-bench"
ANN = "machineconfiguration.openshift.io/"
TARGETS = {"setup_ms": 500, "write_to_patch_p99_ms": 50}


def _config(files: int, dirs: int) -> dict[str, Any]:
    from builders import ign_file, mc_object

    per = files // dirs
    entries = [
        ign_file(f"/etc/bench/d{d:03d}/f{i:05d}.conf", f"key{d}_{i} = value {i:05d} of directory {d:03d}\n")
        for d in range(dirs)
        for i in range(d * per, (d + 1) * per)
    ]
    return mc_object(CONFIG, files=entries)


def _lay_down(tmp: Path, obj: dict[str, Any]) -> Path:
    from mcd_sim.sandbox import make_sandbox_root
    from recording import RecordingRunner  # tests/: the bench lays the root down without commands

    from mcd.config.machineconfig import empty_machineconfig, machineconfig_from_object
    from mcd.host import state
    from mcd.host.root import HostRoot
    from mcd.update.transaction import Host, update

    root = make_sandbox_root(tmp / "root")
    mc = machineconfig_from_object(obj, "bench")
    update(Host.for_root(HostRoot(root), RecordingRunner()), empty_machineconfig(), mc, legacy=True,
           skip_reboot=True)  # fmt: skip
    state.clear_reboot(HostRoot(root))
    return root


def _setup(root: Path, obj: dict[str, Any]) -> dict[str, float]:
    from mcd.agent.watch.drift import DriftMonitor
    from mcd.config.machineconfig import machineconfig_from_object
    from mcd.host.root import HostRoot

    config = machineconfig_from_object(obj, "bench").config
    assert config is not None
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        m = DriftMonitor(HostRoot(root), config, lambda: None)
        m.start()
        times.append((time.perf_counter() - t0) * 1000)
        m.stop()
    tracemalloc.start()
    m = DriftMonitor(HostRoot(root), config, lambda: None)
    m.start()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    from builders import ign_file

    out = {"setup_ms": round(statistics.median(times), 1), "setup_peak_kib": round(peak / 1024)}
    try:
        out["retarget_ms"] = _retarget(m, obj, lambda fs: fs[0].update(ign_file(fs[0]["path"], "x\n")))
        out["retarget_added_ms"] = _retarget(m, obj, lambda fs: fs.append(ign_file("/etc/bench/new/f", "")))
    finally:
        m.stop()
    return out


def _retarget(monitor: Any, obj: dict[str, Any], change: Callable[[list[dict[str, Any]]], None]) -> float:
    """Median ms of retargeting `monitor` (watching `obj`) to `obj` changed, and back."""
    from mcd.config.machineconfig import machineconfig_from_object

    other = json.loads(json.dumps(obj))
    change(other["spec"]["config"]["storage"]["files"])
    first = machineconfig_from_object(obj, "bench")
    second = machineconfig_from_object(other, "bench", like=first)
    assert first.config is not None and second.config is not None
    monitor.retarget(first.config)
    times = []
    for i in range(20):
        t0 = time.perf_counter()
        monitor.retarget(second.config if i % 2 == 0 else first.config)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


class Server:
    """`mcd-sim sim-cluster` in its own process (so the bench's polling never slows the server down)
    and its audit log: the PATCHes of the node with the time the server received them."""

    def __init__(self, tmp: Path) -> None:
        self.kind = "mcd-sim sim-cluster (own process)"
        self.kubeconfig = tmp / "kubeconfig"
        self._audit = tmp / "audit.log"
        self._log = (tmp / "sim.log").open("wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mcd_sim", "sim-cluster", "--kubeconfig", str(self.kubeconfig),
             "--node", NODE, "--audit-log-path", str(self._audit)],
            stdout=self._log, stderr=self._log, cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)),
        )  # fmt: skip
        _wait(self.kubeconfig.exists, "the sim-cluster kubeconfig", proc=self._proc)
        _wait(lambda: self.kubeconfig.stat().st_size > 0, "the sim-cluster kubeconfig", proc=self._proc)
        self._offset = 0
        self._patches: list[tuple[float, dict[str, str]]] = []

    def _request(self, method: str, path: str, body: dict[str, Any], ctype: str) -> None:
        import base64
        import ssl
        import urllib.request

        import yaml

        cfg = yaml.safe_load(self.kubeconfig.read_text())
        cluster = cfg["clusters"][0]["cluster"]
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        req = urllib.request.Request(
            cluster["server"] + path, data=json.dumps(body).encode(), method=method,
            headers={"Authorization": f"Bearer {cfg['users'][0]['user']['token']}", "Content-Type": ctype},
        )  # fmt: skip
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            resp.read()

    def setup(self, obj: dict[str, Any]) -> None:
        self._request(
            "POST", "/apis/machineconfiguration.openshift.io/v1/machineconfigs", obj, "application/json"
        )
        annotations = {ANN + "currentConfig": CONFIG, ANN + "desiredConfig": CONFIG, ANN + "state": "Done"}
        self._request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": annotations}},
                      "application/merge-patch+json")  # fmt: skip

    def patches(self) -> list[tuple[float, dict[str, str]]]:
        """(received, annotations set) of every PATCH of the node, oldest first (read incrementally)."""
        with self._audit.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self._offset += end
        for line in data[:end].splitlines():
            ev = json.loads(line)
            if ev.get("verb") != "patch" or (ev.get("objectRef") or {}).get("resource") != "nodes":
                continue
            received = datetime.strptime(ev["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
            obj = ev.get("requestObject") or {}
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            self._patches.append((received.replace(tzinfo=UTC).timestamp(), ann))
        return self._patches

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(30)
        self._log.close()


def _wait(pred: Callable[[], bool], what: str, timeout: float = 120.0, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"agent exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--dirs", type=int, default=100)
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    args = ap.parse_args()

    out: dict[str, Any] = {"files": args.files, "directories": args.dirs, "edits": args.edits}
    with tempfile.TemporaryDirectory(prefix="mcd-bench-drift-") as tmpdir:
        tmp = Path(tmpdir)
        obj = json.loads(json.dumps(_config(args.files, args.dirs)))
        root = _lay_down(tmp, obj)
        out.update(_setup(root, obj))

        server = Server(tmp)
        out["api_server"] = server.kind
        kubeconfig = server.kubeconfig
        server.setup(obj)
        log = (tmp / "agent.log").open("wb")
        env = dict(os.environ, PYTHONPATH=str(REPO), NODE_NAME=NODE)
        env.pop("NOTIFY_SOCKET", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcd", "start", "--kubeconfig", str(kubeconfig), "--root-mount", str(root),
             "--metrics-url", "", "--kubelet-healthz-enabled=false", "--builtin-drainer", "-v"],
            stdout=log, stderr=log, env=env, cwd=str(REPO),
        )  # fmt: skip
        try:
            agent_log = tmp / "agent.log"
            _wait(lambda: b"drift monitor watching" in agent_log.read_bytes(), "the drift monitor", proc=proc)
            _quiet(proc.pid)  # the first sync's tail (Events posted, records written) is not idling
            t0 = _cpu_seconds(proc.pid)
            time.sleep(args.idle_seconds)  # the measurement window itself
            out["agent_idle_cpu_s"] = round(_cpu_seconds(proc.pid) - t0, 3)
            out["agent_rss_mib"] = round(_rss_mib(proc.pid), 1)
            out.update(_edits(server, root, args, proc))
        except SystemExit:
            sys.stderr.write(agent_log.read_text(errors="replace")[-3000:])
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
            server.stop()
    misses = [k for k, limit in TARGETS.items() if k in out and out[k] > limit]
    out["targets"] = TARGETS
    out["targets_missed"] = misses
    print(json.dumps(out, indent=2))
    return 0


def _quiet(pid: int, window: float = 0.2, timeout: float = 30.0) -> None:
    """Wait until the agent used no CPU for `window` seconds: edits start on an idle node."""
    deadline = time.monotonic() + timeout
    last = _cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(window)
        now = _cpu_seconds(pid)
        if now == last:
            return
        last = now


def _edits(server: Server, root: Path, args: argparse.Namespace, proc: Any) -> dict[str, Any]:
    """Edit distinct files on the idle agent, latest in validation order first (each edit
    changes the reason, so each gets its PATCH)."""
    per = args.files // args.dirs
    paths = [f"/etc/bench/d{i % args.dirs:03d}/f{(i % args.dirs) * per + i // args.dirs:05d}.conf"
             for i in range(args.edits)]  # fmt: skip
    paths.sort(reverse=True)
    latencies: list[float] = []
    for path in paths:
        want = f'content mismatch for file "{path}"'
        _quiet(proc.pid)
        seen = len(server.patches())
        start = time.time()
        with (root / path.lstrip("/")).open("a") as f:
            f.write("# edited by hand\n")
        found: list[float] = []

        def patched(want: str = want, seen: int = seen, found: list[float] = found) -> bool:
            found[:] = [t for t, a in server.patches()[seen:] if a.get(ANN + "reason") == want][:1]
            return bool(found)

        _wait(patched, f"the Degraded PATCH for {path}", proc=proc)
        latencies.append((found[0] - start) * 1000)
    return {
        "write_to_patch_p50_ms": round(statistics.median(latencies), 2),
        "write_to_patch_p99_ms": round(_percentile(latencies, 0.99), 2),
        "write_to_patch_max_ms": round(max(latencies), 2),
        "slowest_edits": sorted((round(v, 1), i) for i, v in enumerate(latencies))[-3:],
    }


if __name__ == "__main__":
    sys.exit(main())
