#!/usr/bin/env python3
"""Planner and parser benchmark on the standard workload; prints JSON figures.

Workload: ../shared/bench/make_workload.py (two rendered configs, 2,000 files of 1 KiB, half
base64, 300 units with dropins, 10% changed, a registries.conf mirror added).
Figures (medians of --runs, in ms; `load` is the 1-minute load average before and after):
  plan_preparsed_ms     diff + reconcile + plan, both configs already parsed, each apart from the
                        other, nothing remembered from an earlier call
  parse_validate_ms     parse + validate both configs from bytes with a `mcd.config.parser.Parser`
                        that validated them before (the agent's steady state: every item known
                        valid, only the JSON decoded and matched)
  parse_validate_first_ms  the same with a new Parser: OLD validated whole, NEW only where it
                        differs from OLD (`mcd plan OLD NEW`)
  parse_validate_full_ms   each config parsed from nothing, as a fresh process would
  from_raw_ms           parse_validate (steady) + plan
  cold_command_ms       `mcd plan OLD NEW` as a new process (interpreter start and imports included)
  parser_memory         what the Parser keeps for that speed: configs remembered
`compare` holds the figures upstream has one for (bench/upstream.py), with speed-up and goal.
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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = REPO.parent / "shared" / "bench" / "make_workload.py"
sys.path.insert(0, str(REPO))

from bench.upstream import (  # noqa: E402  (the repository first on the path)
    GOAL_PARSE_VALIDATE,
    GOAL_PLAN_PREPARSED,
    UPSTREAM_FROM_RAW_MS,
    UPSTREAM_PARSE_VALIDATE_MS,
    UPSTREAM_PLAN_PREPARSED_MS,
    row,
)


def median_ms(fn: Callable[[], object], runs: int, before: Callable[[], object] | None = None) -> float:
    samples = []
    for _ in range(runs):
        if before is not None:
            before()  # untimed
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(samples), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cold-runs", type=int, default=7)
    args = ap.parse_args()
    from mcd.config.load import load_machineconfig
    from mcd.config.parser import Parser
    from mcd.planner.plan import plan

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(WORKLOAD), tmp], check=True, capture_output=True)
        old_path, new_path = Path(tmp, "old.json"), Path(tmp, "new.json")
        old_raw, new_raw = old_path.read_bytes(), new_path.read_bytes()
        steady = Parser()

        def both(parser: Parser) -> None:
            parser.load(old_raw, "old.json")
            parser.load(new_raw, "new.json")

        def full() -> None:
            load_machineconfig(old_raw, "old.json")
            load_machineconfig(new_raw, "new.json")

        def from_raw() -> None:
            plan(steady.load(old_raw, "old.json"), steady.load(new_raw, "new.json"))

        old, new = load_machineconfig(old_raw, "old.json"), load_machineconfig(new_raw, "new.json")
        result = plan(old, new)
        both(steady)  # the configs validated once, as the agent's first sync does
        parsed_ms = median_ms(lambda: plan(old, new), args.runs * 4)
        parse_ms = median_ms(lambda: both(steady), args.runs)
        first_ms = median_ms(lambda: both(Parser()), args.runs)
        full_ms = median_ms(full, args.runs)
        raw_ms = median_ms(from_raw, args.runs)
        mcd = [sys.executable, "-m", "mcd", "plan", "-o", "json", str(old_path), str(new_path)]
        subprocess.run(mcd, check=True, capture_output=True, cwd=REPO)
        cold_ms = median_ms(
            lambda: subprocess.run(mcd, check=True, capture_output=True, cwd=REPO), args.cold_runs
        )
    print(
        json.dumps(
            {
                "benchmark": "plan",
                "workload": {"files": 2000, "units": 300, "changes": len(result.changes)},
                "result": {"actions": [a.to_api() for a in result.actions], "drain": result.drain},
                "plan_preparsed_ms": parsed_ms,
                "parse_validate_ms": parse_ms,
                "parse_validate_first_ms": first_ms,
                "parse_validate_full_ms": full_ms,
                "from_raw_ms": raw_ms,
                "cold_command_ms": cold_ms,
                "parser_memory": {"configs_remembered": len(steady._known), "keep": steady.keep},
                "compare": [
                    row("plan, pre-parsed", parsed_ms, UPSTREAM_PLAN_PREPARSED_MS, GOAL_PLAN_PREPARSED),
                    row("parse + validate both", parse_ms, UPSTREAM_PARSE_VALIDATE_MS, GOAL_PARSE_VALIDATE),
                    row("parse + validate both, first", first_ms, UPSTREAM_PARSE_VALIDATE_MS),
                    row("parse + validate both, from nothing", full_ms, UPSTREAM_PARSE_VALIDATE_MS),
                    row("plan from raw bytes", raw_ms, UPSTREAM_FROM_RAW_MS),
                    row("mcd plan, cold process", cold_ms, None),
                ],
                "load": [load_before, os.getloadavg()[0]],
                "python": sys.version.split()[0],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
