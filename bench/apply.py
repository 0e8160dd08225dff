#!/usr/bin/env python3
"""Apply benchmark on the standard workload; prints JSON figures.

Workload: ../shared/bench/make_workload.py (two rendered configs, 2,000 files of 1 KiB, half
base64, 300 units with dropins, a third enabled, 10% changed, a registries.conf mirror added).
Every run uses fresh roots in the temp directory; sections are timed after `sync` so earlier
writeback is not charged to them, and each mcd section is timed right beside its floors (the
order turning every run), so that both see the disk in the same state. Figures (medians):
  apply_old_fresh_ms  update(empty -> old, legacy, skip_reboot) on a fresh non-CoreOS sandbox root,
                      real systemctl --root for enablement (its share is reported separately)
  apply_change_ms     update(old -> new) on that root
  floor_fresh_ms      the same file, unit and dropin writes by a bare loop (mkdir -p, temp file,
                      write, fsync, rename, fsync dir): no diff, backups, records or enablement
  floor_change_ms     the bare loop over the paths whose contents changed only
  ratio_*             mcd / floor, also without the time spent in systemctl
  ratio_change_paired the median of each run's change / the floor timed right beside it
  floor_*_batched_ms  the same writes done the way mcd batches them (temp files written and
                      fsynced by 8 threads, renamed in order per directory with directories side
                      by side, each directory fsynced once): ratio_*_batched is mcd's own
                      overhead over its write strategy
  verify_all_ms       ondisk.check_config(root, new) over everything, no enablement (warm cache)
  verify_all_enablement_ms  the same with the systemd manager's is_enabled (one batched call)
  verify_one_us       ondisk.first_error(root, <config of one file>), median of single calls
With --profile (or by default when a ratio target is missed) one extra run of each apply is
profiled with cProfile and the top functions are added under "profile".
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcd.config.ignition import IgnitionConfig
    from mcd.host.runner import CommandResult, Runner
    from mcd.update.transaction import Host

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = REPO.parent / "shared" / "bench" / "make_workload.py"

TARGETS = {"ratio": 1.3, "verify_all_ms": 90, "verify_one_us": 1000}

Write = tuple[str, bytes, int]  # config path, contents, mode


class TimedRunner:
    """A Runner that times every command it passes on (systemctl is the only one here)."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.calls: list[tuple[str, float]] = []  # (verb, ms)

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        verb = next((a for a in argv[1:] if not a.startswith("-")), argv[0])
        t0 = time.perf_counter()
        try:
            return self.inner.run(argv, check=check, input=input, timeout=timeout, env=env)
        finally:
            self.calls.append((verb, (time.perf_counter() - t0) * 1000))

    def take(self) -> tuple[float, dict[str, int]]:
        """Total ms and call count per verb since the last take; resets."""
        total = sum(ms for _, ms in self.calls)
        counts: dict[str, int] = {}
        for verb, _ in self.calls:
            counts[verb] = counts.get(verb, 0) + 1
        self.calls.clear()
        return total, counts


def config_writes(ign: IgnitionConfig) -> list[Write]:
    """Every file, dropin and unit file the config declares, as the writers would write them."""
    from mcd.planner.managed_paths import UNIT_FILE_MODE, dropin_path, unit_path

    writes = [(f.path, f.data, f.effective_mode) for f in ign.files]
    for u in ign.units:
        writes += [
            (dropin_path(u.name, d.name), (d.contents or "").encode(), UNIT_FILE_MODE) for d in u.dropins
        ]
        if u.contents:
            writes.append((unit_path(u.name), u.contents.encode(), UNIT_FILE_MODE))
    return writes


def changed_writes(old: IgnitionConfig, new: IgnitionConfig) -> list[Write]:
    """The writes of `new` whose path is new or whose contents or mode differ from `old`."""
    before = {path: (data, mode) for path, data, mode in config_writes(old)}
    return [w for w in config_writes(new) if before.get(w[0]) != (w[1], w[2])]


def _fill_temp(target: str, data: bytes, mode: int) -> str:
    tmp = f"{os.path.dirname(target)}/.{os.path.basename(target)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def _fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def bare_write(prefix: str, writes: Sequence[Write]) -> None:
    """The floor: each write as mkdir -p, temp file, write, fsync, rename, fsync of the directory."""
    for path, data, mode in writes:
        target = prefix + path
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        os.rename(_fill_temp(target, data, mode), target)
        _fsync_dir(parent)


# one pool for the whole run, as mcd keeps one (thread start-up is not what is measured)
_POOL = ThreadPoolExecutor(8)


def batched_write(prefix: str, writes: Sequence[Write]) -> None:
    """The batched floor, mcd's write strategy done bare: temp files filled and fsynced on 8
    threads, renamed in order within each directory (directories side by side), each directory
    fsynced once (side by side)."""
    by_dir: dict[str, list[Write]] = {}
    for w in writes:
        by_dir.setdefault(os.path.dirname(prefix + w[0]), []).append(w)
    for parent in sorted(by_dir):
        os.makedirs(parent, exist_ok=True)
    temps = list(_POOL.map(lambda w: _fill_temp(prefix + w[0], w[1], w[2]), writes))
    tmp_of = {w[0]: tmp for w, tmp in zip(writes, temps, strict=True)}

    def rename_dir(group: list[Write]) -> None:
        for path, _, _ in group:
            os.rename(tmp_of[path], prefix + path)

    list(_POOL.map(rename_dir, by_dir.values()))
    list(_POOL.map(_fsync_dir, sorted(by_dir)))


def timed_ms(fn: Callable[[], object]) -> float:
    os.sync()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def new_root(tmp: str, tag: str) -> str:
    return tempfile.mkdtemp(prefix=f"mcd-apply-{tag}-", dir=tmp)


def fresh_host(tmp: str) -> tuple[Host, TimedRunner]:
    from mcd_sim.sandbox import make_sandbox_root

    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.update.transaction import Host

    root = make_sandbox_root(new_root(tmp, "mcd"))
    runner = TimedRunner(SubprocessRunner())
    return Host.for_root(HostRoot(root), runner, coreos=False), runner


def median(values: Sequence[float], ndigits: int = 2) -> float:
    return round(statistics.median(values), ndigits)


def profile_top(prof: cProfile.Profile, limit: int) -> list[dict[str, Any]]:
    """The functions with the most cumulative time: where the apply spends it, callers included."""
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{os.path.relpath(filename, REPO)}:{line}" if filename.startswith(str(REPO)) else filename
        rows.append(
            {
                "function": f"{where}({func})" if line else func,
                "calls": ncalls,
                "cum_ms": round(cumtime * 1000, 1),
                "self_ms": round(tottime * 1000, 1),
            }
        )
    rows.sort(key=lambda r: -r["cum_ms"])
    return rows[:limit]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 9: the disk of a shared VM drifts between fast and slow phases; fewer samples swing the medians
    ap.add_argument("--runs", type=int, default=9, help="apply and floor runs (default 9)")
    ap.add_argument("--verify-runs", type=int, default=15, help="runs of the whole-config checks")
    ap.add_argument("--one-calls", type=int, default=1000, help="single-file checks timed")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--profile", action="store_true", help="always add a cProfile breakdown")
    group.add_argument("--no-profile", action="store_true", help="never profile")
    ap.add_argument("--profile-top", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from mcd.config.load import load_machineconfig
    from mcd.config.machineconfig import empty_machineconfig
    from mcd.host import ondisk
    from mcd.update.transaction import update

    tmp = tempfile.mkdtemp(prefix="mcd-apply-bench-")
    try:
        subprocess.run([sys.executable, str(WORKLOAD), tmp], check=True, capture_output=True)
        old = load_machineconfig(Path(tmp, "old.json").read_bytes(), "old.json")
        new = load_machineconfig(Path(tmp, "new.json").read_bytes(), "new.json")
        assert old.config is not None and new.config is not None
        old_ign, new_ign = old.config, new.config
        floor_fresh_writes = config_writes(old_ign)
        floor_change_writes = changed_writes(old_ign, new_ign)
        empty = empty_machineconfig()

        def apply_fresh(host: Host) -> None:
            update(host, empty, old, legacy=True, skip_reboot=True)

        def apply_change(host: Host) -> None:
            update(host, old, new, legacy=True, skip_reboot=True)

        fig: dict[str, list[float]] = {
            k: []
            for k in (
                "mcd_fresh",
                "mcd_change",
                "sysd_fresh",
                "sysd_change",
                "floor_fresh",
                "floor_change",
                "batched_fresh",
                "batched_change",
            )
        }
        calls: dict[str, dict[str, int]] = {}
        host: Host | None = None
        for i in range(args.runs):
            if host is not None:
                shutil.rmtree(host.root.prefix)
            floor_root, batched_root = new_root(tmp, "floor"), new_root(tmp, "batched")
            host, runner = fresh_host(tmp)
            mcd_host = host

            # Each phase times mcd and the floors back to back (the order turning every run): a
            # shared virtual disk's fsync latency drifts by 2x within seconds, and sections
            # seconds apart would compare that drift rather than the writes.
            def run_mcd_fresh(h: Host = mcd_host, r: TimedRunner = runner) -> None:
                fig["mcd_fresh"].append(timed_ms(partial(apply_fresh, h)))
                sysd_ms, calls["fresh"] = r.take()
                fig["sysd_fresh"].append(sysd_ms)

            def run_mcd_change(h: Host = mcd_host, r: TimedRunner = runner) -> None:
                fig["mcd_change"].append(timed_ms(partial(apply_change, h)))
                sysd_ms, calls["change"] = r.take()
                fig["sysd_change"].append(sysd_ms)

            def floors(
                writes: list[Write], tag: str, root: str = floor_root, broot: str = batched_root
            ) -> None:
                fig[f"floor_{tag}"].append(timed_ms(lambda: bare_write(root, writes)))
                fig[f"batched_{tag}"].append(timed_ms(lambda: batched_write(broot, writes)))

            for mcd_phase, writes, tag in (
                (run_mcd_fresh, floor_fresh_writes, "fresh"),
                (run_mcd_change, floor_change_writes, "change"),
            ):
                if i % 2:
                    floors(writes, tag)
                    mcd_phase()
                else:
                    mcd_phase()
                    floors(writes, tag)
            shutil.rmtree(floor_root)
            shutil.rmtree(batched_root)

        # verification, on the root of the last run (now in the new config; its files are in cache)
        assert host is not None
        last: Host = host
        drift = ondisk.check_config(last.root, new_ign)
        verify_all = [
            timed_ms(lambda: ondisk.check_config(last.root, new_ign)) for _ in range(args.verify_runs)
        ]
        verify_runner = last.runner
        assert isinstance(verify_runner, TimedRunner)
        drift_enabled = ondisk.check_config(last.root, new_ign, last.systemd.is_enabled)
        verify_runner.take()
        verify_en = [
            timed_ms(lambda: ondisk.check_config(last.root, new_ign, last.systemd.is_enabled))
            for _ in range(args.verify_runs)
        ]
        _, en_calls = verify_runner.take()
        one = dataclasses.replace(new_ign, files=new_ign.files[:1], units=())
        ondisk.first_error(last.root, one)
        one_ns = []
        for _ in range(args.one_calls):
            t0 = time.perf_counter_ns()
            ondisk.first_error(last.root, one)
            one_ns.append(time.perf_counter_ns() - t0)
        shutil.rmtree(last.root.prefix)

        mcd_fresh, mcd_change = median(fig["mcd_fresh"]), median(fig["mcd_change"])
        floor_fresh, floor_change = median(fig["floor_fresh"]), median(fig["floor_change"])
        no_sysd_fresh = median([m - s for m, s in zip(fig["mcd_fresh"], fig["sysd_fresh"], strict=True)])
        no_sysd_change = median([m - s for m, s in zip(fig["mcd_change"], fig["sysd_change"], strict=True)])
        ratios = {
            "ratio_fresh": round(mcd_fresh / floor_fresh, 2),
            # each run's change against the floor timed next to it: the drift of the disk cancels
            "ratio_change_paired": median(
                [m / f for m, f in zip(fig["mcd_change"], fig["floor_change"], strict=True)]
            ),
            "ratio_change": round(mcd_change / floor_change, 2),
            "ratio_fresh_without_systemctl": round(no_sysd_fresh / floor_fresh, 2),
            "ratio_change_without_systemctl": round(no_sysd_change / floor_change, 2),
        }
        batched_fresh, batched_change = median(fig["batched_fresh"]), median(fig["batched_change"])
        missed = any(r > TARGETS["ratio"] for r in ratios.values())
        ratios["ratio_fresh_batched"] = round(mcd_fresh / batched_fresh, 2)
        ratios["ratio_change_batched"] = round(mcd_change / batched_change, 2)

        profile: dict[str, Any] | None = None
        if args.profile or (missed and not args.no_profile):
            profile = {}
            host, runner = fresh_host(tmp)
            for name, fn in (("apply_old_fresh", apply_fresh), ("apply_change", apply_change)):
                os.sync()
                prof = cProfile.Profile()
                prof.runcall(fn, host)
                profile[name] = profile_top(prof, args.profile_top)
            shutil.rmtree(host.root.prefix)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    result: dict[str, Any] = {
        "benchmark": "apply",
        "workload": {
            "files": len(new_ign.files),
            "units": len(new_ign.units),
            "floor_fresh_writes": len(floor_fresh_writes),
            "floor_change_writes": len(floor_change_writes),
        },
        "legacy": True,
        "runs": args.runs,
        "apply_old_fresh_ms": mcd_fresh,
        "apply_old_fresh_systemctl_ms": median(fig["sysd_fresh"]),
        "apply_old_fresh_systemctl_calls": calls["fresh"],
        "apply_change_ms": mcd_change,
        "apply_change_systemctl_ms": median(fig["sysd_change"]),
        "apply_change_systemctl_calls": calls["change"],
        "floor_fresh_ms": floor_fresh,
        "floor_change_ms": floor_change,
        "floor_fresh_batched_ms": batched_fresh,
        "floor_change_batched_ms": batched_change,
        **ratios,
        "verify_all_ms": median(verify_all),
        "verify_all_errors": len(drift),
        "verify_all_enablement_ms": median(verify_en),
        "verify_all_enablement_errors": len(drift_enabled),
        "verify_all_enablement_systemctl_calls_per_check": {
            k: v // args.verify_runs for k, v in en_calls.items()
        },
        "verify_one_us": median([ns / 1000 for ns in one_ns], 1),
        "verify_runs": args.verify_runs,
        "verify_one_calls": args.one_calls,
        "samples_ms": {k: [round(v, 1) for v in vs] for k, vs in fig.items()},
        "targets": {
            "ratio_fresh": TARGETS["ratio"],
            "ratio_change": TARGETS["ratio"],
            "verify_all_ms": TARGETS["verify_all_ms"],
            "verify_one_us": f"well under {TARGETS['verify_one_us']}",
        },
        "temp_dir": tempfile.gettempdir(),
        "python": sys.version.split()[0],
    }
    if profile is not None:
        result["profile"] = profile
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
