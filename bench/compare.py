#!/usr/bin/env python3
"""`make bench-compare`: mcd against upstream on the standard workload, one table.

Runs the quick benches that print a `compare` list (bench/upstream.py's rows) as JSON, then
prints every row: the figure, mcd's median, upstream's, the speed-up and its goal. A bench
named in BENCHES but absent (another branch's) is skipped with a note.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHES = ("plan.py", "startup.py")


def main() -> int:
    rows: list[dict[str, object]] = []
    loads: list[str] = []
    for name in BENCHES:
        path = REPO / "bench" / name
        if not path.exists():
            print(f"(bench/{name} not present: skipped)")
            continue
        out = subprocess.run([sys.executable, str(path)], check=True, capture_output=True, text=True).stdout
        figures = json.loads(out)
        rows += figures.get("compare", [])
        if "load" in figures:
            loads.append(f"{name}: {figures['load']}")
    print(f"{'figure':40} {'mcd ms':>9} {'upstream ms':>12} {'speed-up':>9} {'goal':>8}  met")
    for r in rows:
        print(
            f"{r['figure']!s:40} {r['mcd_ms']!s:>9} {_or_dash(r['upstream_ms']):>12} "
            f"{_or_dash(r['speedup']):>9} {_goal(r):>8}  {_or_dash(r['met'])}"
        )
    print("load average (before, after): " + "; ".join(loads))
    return 0


def _goal(r: dict[str, object]) -> str:
    """x1.5 (a speed-up over upstream), <=80ms (a time), both, or -."""
    goals = []
    if r.get("goal_speedup") is not None:
        goals.append(f"x{r['goal_speedup']}")
    if r.get("goal_ms") is not None:
        goals.append(f"<={r['goal_ms']:g}ms")
    return " ".join(goals) or "-"


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


if __name__ == "__main__":
    raise SystemExit(main())
