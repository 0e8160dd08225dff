#!/usr/bin/env python3
"""Start-up of the short commands as whole processes; prints JSON figures (issue 30, item 2).

Two setups, each command --runs times beside `python -c pass` (the interpreter's own start,
the floor under every figure):
  installed  (`figures`, the goal's) the `mcd` command of a throwaway virtualenv where mcd is
             installed as users have it (scripts/install-host.sh, the image): a non-editable
             install, byte-compiled by pip. Its dependencies are the dev venv's: one plain path
             line in a .pth file puts the dev venv's site-packages on its sys.path, so nothing
             is downloaded and none of the dev venv's own .pth hooks (the editable installs'
             finders, coverage's) runs. Built once per content of the checkout's mcd/ and
             pyproject.toml, in the temporary directory (mcd-bench-venv-HASH); --no-installed
             skips it.
  dev        (`dev_figures`) `python -m mcd ...` of the dev venv in the checkout, as a developer
             runs it: every process there also pays the editable install's finder (setuptools'
             hook in site-packages, about 12 ms: pathlib, re, urllib.parse), users' do not.
The figures are medians over the runs:
  wall_ms   from fork to exit, as a user waits for it (sensitive to the machine's load)
  cpu_ms    the child's user + system CPU time (much less sensitive to load: the figure to
            compare between runs on a shared machine)
The machine's load average before and after is recorded beside them (`load`). Upstream's
figures (bench/upstream.py): its renderer renders a 3-config pool in 58 ms as a process, and
mcd's `render` of examples/pool is the comparable command; `plan-2000` and `render-2000` are the
same commands on the standard workload's 2,000-file configs (../shared/bench/make_workload.py;
the pool: its new config labelled for the worker pool), against upstream's 1.6 s for the plan
from raw bytes (its functions alone) and its 1.62 s of CPU for the render as a process.
`compare` holds the rows `make bench-compare` prints: CPU
time, with the 80 ms goal of the short commands and the speed-up goals.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
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
    UPSTREAM_RENDER_2000_PROCESS_MS,
    UPSTREAM_RENDER_PROCESS_MS,
    row,
)

EX = REPO / "examples"
WORKLOAD = REPO.parent / "shared" / "bench" / "make_workload.py"
LARGE = "{large}"  # replaced by the directory the workload is written to
MCD = "{mcd}"  # replaced by how the setup runs mcd: `python -m mcd` (dev) or its `mcd` command
# after `python`: the interpreter alone (with site, as the entry point starts) is the floor
COMMANDS: dict[str, list[str]] = {
    "interpreter": ["-c", "pass"],
    "help": [MCD, "--help"],
    "validate": [MCD, "validate", str(EX / "new.yaml")],
    "plan": [MCD, "plan", "-o", "json", str(EX / "old.yaml"), str(EX / "new.yaml")],
    "render": [MCD, "render", "-o", "yaml", "--pool", "worker", str(EX / "pool")],
    "version": [MCD, "version"],
    "plan-2000": [MCD, "plan", "-o", "json", f"{LARGE}/old.json", f"{LARGE}/new.json"],
    "render-2000": [MCD, "render", "-o", "yaml", "--pool", "worker", f"{LARGE}/pool"],
}
GOALS = {"render": GOAL_RENDER_PROCESS, "plan-2000": GOAL_LARGE_PROCESS, "render-2000": GOAL_LARGE_PROCESS}
SHORT = ("help", "validate", "plan", "render", "version")  # the commands with the 80 ms goal
UPSTREAM_MS = {
    "render": UPSTREAM_RENDER_PROCESS_MS,
    "plan-2000": UPSTREAM_FROM_RAW_MS,
    "render-2000": UPSTREAM_RENDER_2000_PROCESS_MS,
}
# as installed: pip byte-compiles a wheel, so the commands start from bytecode. A shell with
# PYTHONDONTWRITEBYTECODE set would compile every module of mcd on every start instead (the
# warm-up run writes the bytecode of the checkout).
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
GOAL_MS = GOAL_START_MS
# what goes into the installed setup's wheel: its cache is keyed by these files' content
SOURCES = ("mcd/**/*.py", "mcd/config/schemas/*.json", "pyproject.toml")


def _one(argv: list[str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=cwd, env=ENV)
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


def sources_hash(repo: Path) -> str:
    digest = hashlib.sha256(f"{sys.version}\n{sys.prefix}\n".encode())
    for pattern in SOURCES:
        for path in sorted(repo.glob(pattern)):
            digest.update(f"{path.relative_to(repo)}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def installed_venv(repo: Path) -> Path:
    """A virtualenv with `repo`'s mcd installed from its wheel (not editable), the dev venv's
    site-packages on its path for the dependencies; reused while the sources are the same."""
    venv = Path(tempfile.gettempdir()) / f"mcd-bench-venv-{sources_hash(repo)}"
    done = venv / "complete"  # written last: a half-built venv is never taken as the cache
    # built in place (its scripts name their interpreter by its path), one bench at a time
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            with tempfile.TemporaryDirectory(prefix="mcd-bench-wheel-") as wheels:
                _build_venv(repo, venv, Path(wheels))
            done.write_text("")
        _prune_venvs(venv)
    return venv


def _prune_venvs(keep: Path) -> None:
    """Remove the other sources' cached venvs (each is about 40 MB), unless a bench holds one."""
    for lock_path in keep.parent.glob("mcd-bench-venv-*.lock"):
        other = lock_path.with_suffix("")
        if other == keep:
            continue
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use
            shutil.rmtree(other, ignore_errors=True)
            lock_path.unlink(missing_ok=True)


def _build_venv(repo: Path, venv: Path, wheels: Path) -> None:
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    offline = ["--no-deps", "--no-index"]
    # the wheel is built by the dev venv (its setuptools, no build isolation: nothing fetched);
    # pip writes build/ and mcd.egg-info in the checkout, as any wheel build does (git ignores them)
    _quiet([*pip, "wheel", *offline, "--no-build-isolation", "-w", str(wheels), str(repo)])
    base = getattr(sys, "_base_executable", sys.executable)
    # a venv's `bin/python` is a link to the base interpreter: only the link, not the file
    _quiet([base, "-m", "venv", "--without-pip", str(venv)])
    # pip of the dev venv installs into the new one (`--python`): the wheel, byte-compiled
    (wheel,) = wheels.glob("mcd-*.whl")
    _quiet([*pip, "--python", str(venv / "bin" / "python"), "install", *offline, str(wheel)])
    (site,) = (venv / "lib").glob("python*/site-packages")
    dev_site = sysconfig.get_paths()["purelib"]
    # a path line, not an import line: the directory joins sys.path, its own .pth files do not run
    (site / "zz-mcd-bench-deps.pth").write_text(dev_site + "\n")


def _quiet(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} failed:\n{done.stdout}{done.stderr}")


def setup_argv(setup: str, venv: Path | None) -> tuple[list[str], list[str]]:
    """(the interpreter, how mcd is run) of a setup."""
    if setup == "dev":
        return [sys.executable], [sys.executable, "-m", "mcd"]
    assert venv is not None
    return [str(venv / "bin" / "python")], [str(venv / "bin" / "mcd")]


def compare_rows(figures: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    rows = []
    for name, fig in figures.items():
        if name == "interpreter":
            continue
        cpu = float(fig["cpu_ms"])  # type: ignore[arg-type]
        goal = GOALS.get(name)
        goal_ms = GOAL_MS if name in SHORT else None
        rows.append(row(f"mcd {name}, process (CPU)", cpu, UPSTREAM_MS.get(name), goal, goal_ms=goal_ms))
    return rows


def _argv(name: str, python: list[str], mcd: list[str], large: str) -> list[str]:
    words = COMMANDS[name]
    head = mcd if words[0] == MCD else python
    return [*head, *(w.replace(LARGE, large) for w in words if w != MCD)]


def measure(
    runs: int, names: list[str], setups: dict[str, tuple[list[str], list[str]]], repo: Path, large: str
) -> dict[str, dict[str, dict[str, object]]]:
    """Per setup, per command: the medians. Every (setup, command) pair is run once per round,
    interleaved, so a burst of load touches them alike."""
    pairs = [(s, n) for s in setups for n in names]
    argvs = {(s, n): _argv(n, *setups[s], large) for s, n in pairs}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {p: [] for p in pairs}
    for pair in pairs:  # warm the page cache and the bytecode once, outside the figures
        _one(argvs[pair], repo)
    for _ in range(runs):
        for pair in pairs:
            samples[pair].append(_one(argvs[pair], repo))
    figures: dict[str, dict[str, dict[str, object]]] = {s: {} for s in setups}
    for setup, name in pairs:
        walls = [w for w, _ in samples[setup, name]]
        cpus = [c for _, c in samples[setup, name]]
        shown = " ".join(a.replace(str(REPO) + "/", "").replace(LARGE, "WORKLOAD") for a in COMMANDS[name])
        python_words = "python -m mcd" if setup == "dev" else "mcd"
        fig: dict[str, object] = {
            "command": shown.replace(MCD, python_words) if MCD in shown else "python " + shown,
            "wall_ms": round(statistics.median(walls), 1),
            "cpu_ms": round(statistics.median(cpus), 1),
            "goal_ms": GOAL_MS,
        }
        if name in UPSTREAM_MS:
            fig["upstream_ms"] = UPSTREAM_MS[name]
        figures[setup][name] = fig
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure (default: this one)")
    parser.add_argument(
        "--no-installed", action="store_true", help="the dev venv only (no throwaway install)"
    )
    parser.add_argument("commands", nargs="*", metavar="COMMAND", help=f"some of {', '.join(COMMANDS)}")
    args = parser.parse_args()
    unknown = [c for c in args.commands if c not in COMMANDS]
    if unknown:
        parser.error(f"unknown command {unknown[0]!r}")
    repo = args.repo.resolve()
    setups = {"dev": setup_argv("dev", None)}
    if not args.no_installed:
        setups = {"installed": setup_argv("installed", installed_venv(repo)), **setups}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        write_workload(Path(tmp))
        figures = measure(args.runs, args.commands or list(COMMANDS), setups, repo, tmp)
    goal_figures = figures.get("installed", figures["dev"])
    result = {
        "repo": str(args.repo),
        "runs": args.runs,
        "load_avg_1m": round(load, 2),
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "setup": "installed" if "installed" in figures else "dev",
        "figures": goal_figures,
        "dev_figures": figures["dev"],
        "compare": compare_rows(goal_figures),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
