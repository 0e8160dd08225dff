#!/usr/bin/env python3
"""Start-up of the short commands as whole processes; prints JSON figures (issue 30, item 2).

Each command runs --runs times as `python -m mcd ...` (what the `mcd` entry point runs), beside
`python -c pass` (the interpreter's own start, the floor under every figure); the
figures are medians over the runs:
  wall_ms   from fork to exit, as a user waits for it (sensitive to the machine's load)
  cpu_ms    the child's user + system CPU time (much less sensitive to load: the figure to
            compare between runs on a shared machine)
The machine's load average at the start is recorded beside them. Upstream's figure (issue 30):
its renderer renders a 3-config pool in 58 ms as a process; mcd's `render` of examples/pool is
the comparable command (`upstream_ms` on that row).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
# after `python`: the interpreter alone (with site, as the entry point starts) is the floor
COMMANDS: dict[str, list[str]] = {
    "interpreter": ["-c", "pass"],
    "help": ["-m", "mcd", "--help"],
    "validate": ["-m", "mcd", "validate", str(EX / "new.yaml")],
    "plan": ["-m", "mcd", "plan", "-o", "json", str(EX / "old.yaml"), str(EX / "new.yaml")],
    "render": ["-m", "mcd", "render", "-o", "yaml", "--pool", "worker", str(EX / "pool")],
    "version": ["-m", "mcd", "version"],
}
UPSTREAM_MS = {"render": 58.0}
# as installed: pip byte-compiles a wheel, so the commands start from bytecode. A shell with
# PYTHONDONTWRITEBYTECODE set would compile every module of mcd on every start instead (the
# warm-up run writes the bytecode of the checkout).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
GOAL_MS = 80.0


def _one(argv: list[str], repo: Path = REPO) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, *argv]
    # `python -m` puts the working directory first on the path: --repo measures another checkout
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=repo, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def measure(runs: int, names: list[str], repo: Path = REPO) -> dict[str, object]:
    figures: dict[str, object] = {}
    samples: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    _one(COMMANDS["help"], repo)  # warm the page cache and the bytecode once, outside the figures
    for _ in range(runs):  # interleaved, so a burst of load touches every command alike
        for name in names:
            samples[name].append(_one(COMMANDS[name], repo))
    for name in names:
        walls = [w for w, _ in samples[name]]
        cpus = [c for _, c in samples[name]]
        row: dict[str, object] = {
            "command": "python " + " ".join(a.replace(str(REPO) + "/", "") for a in COMMANDS[name]),
            "wall_ms": round(statistics.median(walls), 1),
            "cpu_ms": round(statistics.median(cpus), 1),
            "goal_ms": GOAL_MS,
        }
        if name in UPSTREAM_MS:
            row["upstream_ms"] = UPSTREAM_MS[name]
        figures[name] = row
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure (default: this one)")
    parser.add_argument("commands", nargs="*", metavar="COMMAND", help=f"some of {', '.join(COMMANDS)}")
    args = parser.parse_args()
    unknown = [c for c in args.commands if c not in COMMANDS]
    if unknown:
        parser.error(f"unknown command {unknown[0]!r}")
    load = os.getloadavg()[0]
    figures = measure(args.runs, args.commands or list(COMMANDS), args.repo.resolve())
    result = {
        "repo": str(args.repo),
        "runs": args.runs,
        "load_avg_1m": round(load, 2),
        "cpus": os.cpu_count(),
        "figures": figures,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
