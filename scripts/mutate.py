"""`make mutate`: a mutation run over the pure core, with a score per concern.

mutmut (pinned in the dev extra) copies the tree into `mutants/`, mutates the six concerns'
modules (`[tool.mutmut]` in pyproject.toml) and runs, for each mutant, only the fast pure tests
that call the mutated function. This script runs it for the concerns asked for (all six by
default), one worker at a time, then reads mutmut's results and prints, per concern, the
mutants caught (a failing test or a timeout) out of all, and every mutant that survived.

    python scripts/mutate.py [CONCERN ...] [--show]

`--show` prints the diff of each survivor. The exit status is 1 when a concern scores below
95%. mutmut's own progress goes to `mutants/mutate.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# concern -> the mutmut key patterns (module.x_function__mutmut_N) of its modules
CONCERNS: dict[str, tuple[str, ...]] = {
    "reconcile": ("mcd.planner.reconcile.*",),
    "kargs": ("mcd.planner.kargs.*",),
    "diff": ("mcd.planner.diff.*",),
    "plan": ("mcd.planner.plan.*", "mcd.planner.steps.*", "mcd.planner.updatesteps.*"),
    "policy": ("mcd.policy.*",),
    "registries": ("mcd.planner.registries.*",),
}
THRESHOLD = 95.0
# mutmut's exit codes (mutmut.stats.status_by_exit_code) that count as caught; anything else,
# "no tests" (33) included, is a survivor
KILLED = {1, 3}
TIMEOUT = {36, 24, -24, 152, 255, -9}


@dataclass
class Score:
    killed: int = 0
    timeout: int = 0
    survivors: list[str] = field(default_factory=list)
    not_run: int = 0  # an interrupted run: these are neither caught nor survivors

    @property
    def total(self) -> int:
        return self.killed + self.timeout + len(self.survivors)

    @property
    def percent(self) -> float:
        return 100.0 * (self.killed + self.timeout) / self.total if self.total else 100.0


def _concern_of(key: str) -> str | None:
    for name, patterns in CONCERNS.items():
        if any(key.startswith(p.removesuffix("*")) for p in patterns):
            return name
    return None


def scores(concerns: list[str]) -> dict[str, Score]:
    out = {c: Score() for c in concerns}
    for meta in sorted((ROOT / "mutants" / "mcd").rglob("*.py.meta")):
        results: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        for key, code in results.items():
            concern = _concern_of(key)
            if concern not in out:
                continue
            score = out[concern]
            if code is None:
                score.not_run += 1
            elif code in KILLED:
                score.killed += 1
            elif code in TIMEOUT:
                score.timeout += 1
            else:
                score.survivors.append(key)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("concerns", nargs="*", metavar="CONCERN", help=", ".join(CONCERNS))
    parser.add_argument("--show", action="store_true", help="print the diff of every survivor")
    parser.add_argument("--report-only", action="store_true", help="print the last run's scores")
    args = parser.parse_args()
    concerns: list[str] = args.concerns or list(CONCERNS)
    unknown = [c for c in concerns if c not in CONCERNS]
    if unknown:
        parser.error(f"unknown concern(s) {', '.join(unknown)}; choose from {', '.join(CONCERNS)}")
    mutmut = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ)
    # the tests run inside mutants/: tell them where the upstream case tables are
    env.setdefault("MCD_CASES_DIR", str(ROOT.parent / "shared" / "cases"))
    if not args.report_only:
        patterns = [p for c in concerns for p in CONCERNS[c]]
        (ROOT / "mutants").mkdir(exist_ok=True)
        with open(ROOT / "mutants" / "mutate.log", "w") as log:
            # named patterns make mutmut re-run every matching mutant instead of reusing results
            done = subprocess.run(
                [str(mutmut), "run", "--max-children", "1", *patterns],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            print(f"mutmut failed (exit {done.returncode}); see mutants/mutate.log", file=sys.stderr)
            return 2
    ok = True
    print(f"{'concern':<12}{'mutants':>8}{'killed':>8}{'timeout':>8}{'survived':>9}{'score':>8}")
    results = scores(concerns)
    for name, s in results.items():
        print(f"{name:<12}{s.total:>8}{s.killed:>8}{s.timeout:>8}{len(s.survivors):>9}{s.percent:>7.1f}%")
        ok = ok and s.percent >= THRESHOLD and not s.not_run
        if s.not_run:
            print(f"{'':<12}{s.not_run} mutants of {name} were not run")
    for s in results.values():
        for key in s.survivors:
            print(f"survived: {key}")
            if args.show:
                subprocess.run([str(mutmut), "show", key], cwd=ROOT, env=env, check=False)
    if not ok:
        print(f"make mutate: a concern scores below {THRESHOLD:.0f}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
