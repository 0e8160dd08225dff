"""Upstream MCD's figures that mcd's benchmarks compare with, as stated in the issues (measured
side by side with upstream's own Go functions on ../shared/bench/make_workload.py, on this
project's 2-core machines). Constants: nothing here is measured again.

A bench prints each comparable figure as a row of `compare` (see `row`): mcd's median, the
upstream figure, the speed-up (upstream / mcd) and the goal for it; `bench/compare.py` (`make
bench-compare`) prints the rows of every bench as one table.
"""

from __future__ import annotations

# issue 30: CalculateConfigFileDiffs + GetChangedConfigUnitsByType + the action, both configs
# already parsed
UPSTREAM_PLAN_PREPARSED_MS = 5.5
# issue 30: upstream's renderer as a process, a 3-config pool
UPSTREAM_RENDER_PROCESS_MS = 58.0
# issue 2: upstream needs about 1.6 s for the workload from raw bytes, parsing and validating
# each config three times; issue 30 measured mcd's parse + validate of both configs at 4-4.6x
# upstream's (mcd about 120 ms then): one parse + validate of both configs is 1.6 s / 3
UPSTREAM_FROM_RAW_MS = 1600.0
UPSTREAM_PARSE_VALIDATE_MS = round(UPSTREAM_FROM_RAW_MS / 3, 1)
# issue 30's speed-up goals
GOAL_PLAN_PREPARSED = 1.5
GOAL_PARSE_VALIDATE = 10.0
GOAL_RENDER_PROCESS = 1.0
# issue 30: `mcd plan` and `mcd render` of the 2,000-file pool as processes, against upstream's
# time for the same work (for the plan: UPSTREAM_FROM_RAW_MS, its functions alone, no process)
GOAL_LARGE_PROCESS = 3.0
# issue 30: upstream's render of the 2,000-file pool (the standard workload's new config as the
# pool's one MachineConfig) as a process, CPU time, median of 7 on this machine kind (wall 1.38 s).
# Measured once (2026-11-29) with a throwaway harness built from machine-config-operator 7ff337a
# (Go 1.26.6, its vendored modules): a main that decodes the MachineConfig's JSON and calls the
# render controller's generateRenderedMachineConfig, then marshals the result with sigs.k8s.io/yaml,
# as `mcd render -o yaml` does the same work. Its name, rendered-worker-a91b4ee3…, is mcd's.
UPSTREAM_RENDER_2000_PROCESS_MS = 1620.0
# issue 30: every short command (--help, validate, plan, render of a small input) as a process
GOAL_START_MS = 80.0


# issue 30 item 4: upstream's daemon's API writes for one rebootless update (registries.conf,
# crio reloaded, no drain), counted from its code (machine-config-operator 7ff337a, pkg/daemon
# and pkg/upgrademonitor; docs/agent.md, "Writes per update, against upstream's daemon")
UPSTREAM_REBOOTLESS_WRITES = {"node_patches": 3, "machineconfignode_writes": 8, "events": 7}


def row(
    figure: str,
    ms: float,
    upstream_ms: float | None,
    goal: float | None = None,
    *,
    goal_ms: float | None = None,
) -> dict[str, object]:
    """One comparable figure: mcd's time, upstream's, the speed-up and its goal (None: none);
    `goal_ms`: a goal in milliseconds instead (issue 30's 80 ms start-up), met at or under it."""
    speedup = round(upstream_ms / ms, 2) if upstream_ms is not None and ms > 0 else None
    met: bool | None = None
    if goal is not None and speedup is not None:
        met = speedup >= goal
    if goal_ms is not None:
        met = ms <= goal_ms if met is None else met and ms <= goal_ms
    return {
        "figure": figure,
        "mcd_ms": ms,
        "upstream_ms": upstream_ms,
        "speedup": speedup,
        "goal_speedup": goal,
        "goal_ms": goal_ms,
        "met": met,
    }
