"""`make soak`: a randomized soak of the cluster agent behind the fault proxy (minutes; loopback only).

One agent process runs against the stand-in API server (plain HTTP on 127.0.0.1) through
`tests/agent/faultproxy.py`. Each round picks, at random (seeded), an update to the next config
or a hand edit that is then put back, and a fault for the round: 5xx, 401, resets, closed
connections on some requests, an outage of a few seconds, or cut watches. After every round
the agent must still run and the node must end Done on the desired config with an empty
reason. Bounded: `--rounds` (default 40) and `--minutes` (default 8), whichever comes first.

    make soak                      # or: .venv/bin/python tests/soak/soak.py --rounds 40 --seed 1
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "agent")]

from builders import ign_file, mc_object  # noqa: E402
from harness import NODE, config_a, done_on, make_root  # noqa: E402
from wire import Wire, node_on  # noqa: E402

from mcd.node import annotations as ann  # noqa: E402

A = "/etc/mcd-test/a.conf"
NODE_PATH = rf"^/api/v1/nodes/{NODE}(\?|$)"
ROUND_TIMEOUT = 120.0

# the requests a fault may hit, and how
TARGETS = {
    "node-patch": {"method": "PATCH", "path": NODE_PATH},
    "drift-report": {"method": "PATCH", "path": NODE_PATH, "body": "content mismatch"},
    "machineconfig": {"method": "GET", "path": "/machineconfigs/"},
    "machineconfiguration": {"method": "GET", "path": "/machineconfigurations/"},
    "events": {"method": "POST", "path": "/events$"},
    "watch": {"method": "GET", "path": "watch=true"},
    "list": {"method": "GET", "path": r"^/api/v1/nodes\?"},
}
ACTIONS = ["500", "503", "401", "403", "429", "reset", "close"]


def _config(n: int) -> dict[str, object]:
    return mc_object(f"rendered-worker-{n}", files=[ign_file(A, f"a={n}\n")])


def _wait(pred: Callable[[], bool], what: str, wire: Wire, timeout: float = ROUND_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    agent = wire.agents[-1]
    while not pred():
        if agent.proc is not None and agent.proc.poll() is not None:
            raise SystemExit(f"FAIL: the agent exited ({agent.proc.returncode}):\n{agent.log[-6000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"FAIL: timed out waiting for {what}\n{agent.log[-6000:]}")
        time.sleep(0.05)


def _done_on(wire: Wire, config: str) -> bool:
    node = wire.cluster.sim.get("Node", NODE)
    if node is None or not done_on(config)(node):
        return False
    return (node["metadata"].get("annotations") or {}).get(ann.REASON, "") == ""


def _monitoring(wire: Wire) -> bool:
    """The drift monitor runs (started after the last update stopped it), from the agent's log."""
    log = wire.agents[-1].log
    return log.rfind("drift monitor watching") > log.rfind("Config Drift Monitor stopped")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcd-soak-") as tmp:
        wire = Wire(Path(tmp))
        try:
            a = config_a()
            root = make_root(Path(tmp), a)
            wire.cluster.add_mc(a)
            wire.cluster.answer_drains()
            node_on(wire.cluster, "rendered-worker-a")
            wire.start(root, verbosity=("-v",))
            current = "rendered-worker-a"
            _wait(lambda: _done_on(wire, current), "the first Done", wire)
            n = 0
            for round_no in range(1, args.rounds + 1):
                if time.monotonic() - started > args.minutes * 60:
                    break
                target = rng.choice(sorted(TARGETS))
                action = rng.choice(ACTIONS)
                fault = rng.choice(["rule", "rule", "rule", "outage", "cut"])
                kind = rng.choice(["update", "update", "drift"])
                counts[f"round:{kind}"] += 1
                if fault == "rule":
                    times = rng.randint(1, 3)
                    wire.proxy.add(action, times=times, **TARGETS[target])  # type: ignore[arg-type]
                    counts[f"fault:{action}@{target}"] += 1
                if kind == "update":
                    n += 1
                    current = f"rendered-worker-{n}"
                    wire.cluster.add_mc(_config(n))
                    desired = {"metadata": {"annotations": {ann.DESIRED_CONFIG: current}}}
                    wire.cluster.patch_node(NODE, desired)
                else:
                    # an edit before the monitor runs again is not seen (as upstream): wait for it
                    _wait(lambda: _monitoring(wire), "the drift monitor running", wire)
                    path = root / A.lstrip("/")
                    good = path.read_text()
                    path.write_text("hand edit\n")
                    _wait(
                        lambda: wire.cluster.annotations().get(ann.STATE) == "Degraded",
                        "the drift reported",
                        wire,
                    )
                    path.write_text(good)
                if fault == "outage":
                    counts["fault:outage"] += 1
                    wire.proxy.outage(True)
                    time.sleep(rng.uniform(0.5, 4.0))  # the outage's length, not a synchronisation
                    wire.proxy.outage(False)
                elif fault == "cut":
                    counts["fault:cut-watches"] += wire.proxy.cut_streams() > 0
                _wait(lambda c=current: _done_on(wire, c), f"Done on {current} (round {round_no})", wire)
                wire.proxy.clear()
                counts["rounds"] += 1
            agent = wire.agents[-1]
            assert agent.proc is not None and agent.proc.poll() is None
            faulted = len(wire.proxy.faulted())
            stopped = agent.stop()
            if stopped != 0:
                raise SystemExit(f"FAIL: the agent exited {stopped} on SIGTERM")
            restarts = agent.log.count(" failed (restart ")
        finally:
            wire.stop()
    minutes = (time.monotonic() - started) / 60
    print(f"soak: seed {args.seed}, {counts['rounds']} rounds in {minutes:.1f} min, "
          f"{faulted} requests faulted, {counts['fault:outage']} outages, "
          f"{counts['fault:cut-watches']} watch cuts, {restarts} thread restarts; "
          "the agent never exited and converged every round")  # fmt: skip
    for key, value in sorted(counts.items()):
        print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
