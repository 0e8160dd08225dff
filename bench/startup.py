#!/usr/bin/env python3
"""Start-up of the short commands as whole processes; prints JSON figures (issue 30, item 2).

Each command runs --runs times as `python -m mcd ...` (what the `mcd` entry point runs), beside
`python -c pass` (the interpreter's own start, the floor under every figure); the
figures are medians over the runs:
  wall_ms   from fork to exit, as a user waits for it (sensitive to the machine's load)
  cpu_ms    the child's user + system CPU time (much less sensitive to load: the figure to
            compare between runs on a shared machine)
The machine's load average before and after is recorded beside them (`load`). Upstream's
figures (bench/upstream.py): its renderer renders a 3-config pool in 58 ms as a process, and
mcd's `render` of examples/pool is the comparable command; `plan-2000` and `render-2000` are the
same commands on the standard workload's 2,000-file configs (../shared/bench/make_workload.py;
the pool: its new config labelled for the worker pool), against upstream's 1.6 s for the plan
from raw bytes (its functions alone). `compare` holds the rows `make bench-compare` prints: CPU
time, with the 80 ms goal of the short commands and the speed-up goals.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.upstream import (  # noqa: E402  (the repository first on the path)
    GOAL_LARGE_PROCESS,
    GOAL_RENDER_PROCESS,
    GOAL_START_MS,
    UPSTREAM_FROM_RAW_MS,
    UPSTREAM_RENDER_PROCESS_MS,
    row,
)

EX = REPO / "examples"
WORKLOAD = REPO.parent / "shared" / "bench" / "make_workload.py"
LARGE = "{large}"  # replaced by the directory the workload is written to
# after `python`: the interpreter alone (with site, as the entry point starts) is the floor
COMMANDS: dict[str, list[str]] = {
    "interpreter": ["-c", "pass"],
    "help": ["-m", "mcd", "--help"],
    "validate": ["-m", "mcd", "validate", str(EX / "new.yaml")],
    "plan": ["-m", "mcd", "plan", "-o", "json", str(EX / "old.yaml"), str(EX / "new.yaml")],
    "render": ["-m", "mcd", "render", "-o", "yaml", "--pool", "worker", str(EX / "pool")],
    "version": ["-m", "mcd", "version"],
    "plan-2000": ["-m", "mcd", "plan", "-o", "json", f"{LARGE}/old.json", f"{LARGE}/new.json"],
    "render-2000": ["-m", "mcd", "render", "-o", "yaml", "--pool", "worker", f"{LARGE}/pool"],
}
SHORT = ("help", "validate", "plan", "render", "version")  # the commands with the 80 ms goal
UPSTREAM_MS = {"render": UPSTREAM_RENDER_PROCESS_MS, "plan-2000": UPSTREAM_FROM_RAW_MS}
# as installed: pip byte-compiles a wheel, so the commands start from bytecode. A shell with
# PYTHONDONTWRITEBYTECODE set would compile every module of mcd on every start instead (the
# warm-up run writes the bytecode of the checkout).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
GOAL_MS = GOAL_START_MS


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


def write_workload(where: Path) -> None:
    """The standard workload's two configs, and a pool directory holding the new one."""
    subprocess.run([sys.executable, str(WORKLOAD), str(where)], check=True, capture_output=True)
    mc = json.loads((where / "new.json").read_text())
    mc["metadata"]["labels"] = {"machineconfiguration.openshift.io/role": "worker"}
    (where / "pool").mkdir()
    (where / "pool" / "worker.json").write_text(json.dumps(mc))


def compare_rows(figures: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    rows = []
    for name, fig in figures.items():
        if name == "interpreter":
            continue
        cpu = float(fig["cpu_ms"])  # type: ignore[arg-type]
        goal = {"render": GOAL_RENDER_PROCESS, "plan-2000": GOAL_LARGE_PROCESS}.get(name)
        goal_ms = GOAL_MS if name in SHORT else None
        rows.append(row(f"mcd {name}, process (CPU)", cpu, UPSTREAM_MS.get(name), goal, goal_ms=goal_ms))
    return rows


def measure(runs: int, names: list[str], repo: Path = REPO, large: str = "") -> dict[str, dict[str, object]]:
    figures: dict[str, dict[str, object]] = {}
    samples: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    argvs = {n: [a.replace(LARGE, large) for a in COMMANDS[n]] for n in names}
    for name in names:  # warm the page cache and the bytecode once, outside the figures
        _one(argvs[name], repo)
    for _ in range(runs):  # interleaved, so a burst of load touches every command alike
        for name in names:
            samples[name].append(_one(argvs[name], repo))
    for name in names:
        walls = [w for w, _ in samples[name]]
        cpus = [c for _, c in samples[name]]
        row: dict[str, object] = {
            "command": "python "
            + " ".join(a.replace(str(REPO) + "/", "").replace(LARGE, "WORKLOAD") for a in COMMANDS[name]),
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
    with tempfile.TemporaryDirectory() as tmp:
        write_workload(Path(tmp))
        figures = measure(args.runs, args.commands or list(COMMANDS), args.repo.resolve(), tmp)
    result = {
        "repo": str(args.repo),
        "runs": args.runs,
        "load_avg_1m": round(load, 2),
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "figures": figures,
        "compare": compare_rows(figures),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
