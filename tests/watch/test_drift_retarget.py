"""Retargeting the drift monitor: the index built from the old one (`Expected.follow`) is the one
a fresh monitor builds, over random pairs of configs; the unchanged part is taken over as it is;
on real inotify, a retargeted monitor watches and distrusts what a fresh one would."""

from __future__ import annotations

import copy
import dataclasses
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from builders import ign_file, mc_object
from drifttools import laid_down
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcd.agent.watch.drift import LINK_DIR_SUFFIXES, DriftMonitor
from mcd.agent.watch.managed import Expected, same_declaration
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.host.root import HostRoot

DIRS = ("/etc/mcd-t", "/etc/mcd-t/sub", "/etc/mcd-t/sub/deep", "/etc/other", "/usr/local/mcd-t")
# a file where a unit or dropin of the pool goes: a config declaring both is refused
UNIT_DIR_FILES = ("/etc/systemd/system/mcd-t0.service", "/etc/systemd/system/mcd-t1.service.d/10-a.conf")
FILES = tuple(f"{d}/f{i}.conf" for d in DIRS for i in range(3)) + UNIT_DIR_FILES
UNITS = tuple(f"mcd-t{i}.service" for i in range(5))
# a seed per pair: hypothesis's own random draws lean to the first choices, a seeded Random
# spreads the pairs over every kind of change
SEEDS = st.integers(min_value=0, max_value=2**32)
DROPINS = ("10-a.conf", "20-b.conf")
DROPIN_TEXTS = ("", "[Service]\nEnvironment=X=1\n", "[Service]\nEnvironment=X=2\n")


def _file(rnd: random.Random, path: str) -> dict[str, Any]:
    return ign_file(path, rnd.choice(("a=1\n", "b=2\n", "")), mode=rnd.choice((420, 384, None)))


def _unit(rnd: random.Random, name: str) -> dict[str, Any]:
    unit: dict[str, Any] = {"name": name}
    for key, values in (("enabled", (True, False)), ("mask", (True, False))):
        if rnd.random() < 0.4:
            unit[key] = rnd.choice(values)
    if rnd.random() < 0.7:
        text = rnd.choice(("x", "y"))
        unit["contents"] = f"[Unit]\nDescription={text}\n[Install]\nWantedBy=multi-user.target\n"
    dropins = []
    for d in rnd.sample(DROPINS, rnd.randint(0, len(DROPINS))):
        dropin: dict[str, Any] = {"name": d}
        if rnd.random() < 0.7:
            dropin["contents"] = rnd.choice(DROPIN_TEXTS)
        dropins.append(dropin)
    if dropins:
        unit["dropins"] = dropins
    return unit


def _unit_again(rnd: random.Random, name: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """Unit `name` declared again: half the time with `old`'s dropins (their contents maybe not)."""
    new = _unit(rnd, name)
    if old is not None and rnd.random() < 0.5:
        new.pop("dropins", None)
        dropins = [{**d, "contents": rnd.choice(DROPIN_TEXTS)} for d in old.get("dropins", ())]
        if dropins:
            new["dropins"] = dropins
    return new


def _file_again(rnd: random.Random, path: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    return _file(rnd, path)


def _mutate(
    rnd: random.Random, items: list[dict[str, Any]], key: str, make: Any, pool: tuple[str, ...]
) -> None:
    """Change, drop, add or move a few of `items` (most stay as they are)."""
    for i in range(len(items)):
        if rnd.random() < 0.25:
            items[i] = make(rnd, items[i][key], items[i])  # declared again: maybe alike, maybe not
    if items and rnd.random() < 0.1:
        del items[rnd.randrange(len(items))]
    unused = [p for p in pool if p not in {item[key] for item in items}]
    if unused and rnd.random() < 0.1:
        items.insert(rnd.randint(0, len(items)), make(rnd, rnd.choice(unused)))
    if len(items) > 1 and rnd.random() < 0.05:
        i, j = rnd.sample(range(len(items)), 2)
        items[i], items[j] = items[j], items[i]


def _pair(rnd: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """Config objects A and B: B mostly declares what A declares."""
    files = [_file(rnd, p) for p in rnd.sample(FILES, rnd.randint(0, 8))]
    units = [_unit(rnd, n) for n in rnd.sample(UNITS, rnd.randint(0, 4))]
    a = mc_object("rendered-a", files=files, units=units)
    files, units = copy.deepcopy(files), copy.deepcopy(units)
    _mutate(rnd, files, "path", _file_again, FILES)
    _mutate(rnd, units, "name", _unit_again, UNITS)
    return a, mc_object("rendered-b", files=files, units=units)


def _parsed(
    a_obj: dict[str, Any], b_obj: dict[str, Any], *, like: bool
) -> tuple[MachineConfig, MachineConfig] | None:
    """A, and B parsed like A (taking over the items declared alike) or on its own; None when
    either is not a valid config."""
    a = machineconfig_from_object(copy.deepcopy(a_obj), "A")
    if a.config is None:
        return None
    b = machineconfig_from_object(copy.deepcopy(b_obj), "B", like=a if like else None)
    return None if b.config is None else (a, b)


def _twice(config: IgnitionConfig, first: bool) -> IgnitionConfig:
    """`config` with its first file declared again at the end (the index keeps the last)."""
    if not first or not config.files:
        return config
    return dataclasses.replace(config, files=(*config.files, config.files[0]))


def _assert_same_index(got: Expected, want: Expected) -> None:
    assert list(got.managed.items()) == list(want.managed.items())  # the validation order too
    assert got.by_dir == want.by_dir
    assert got.needed == want.needed
    assert got.enablement == want.enablement
    assert got.distinct == want.distinct


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS, st.booleans(), st.booleans())
def test_following_a_config_indexes_it_as_a_fresh_index_would(seed: int, like: bool, dup: bool) -> None:
    pair = _parsed(*_pair(random.Random(seed)), like=like)
    if pair is None:
        return
    a, b = pair
    assert a.config is not None and b.config is not None
    old = Expected(_twice(a.config, dup))
    new_config = _twice(b.config, dup)
    got, differ = old.follow(new_config)
    fresh = Expected(new_config)
    _assert_same_index(got, fresh)
    assert got.config is new_config
    # unverified after the retarget: every path new, or declared otherwise than before
    assert sorted(differ) == sorted(
        p for p, m in fresh.managed.items() if not same_declaration(old.managed.get(p), m)
    )
    assert len(differ) == len(set(differ))


def test_a_config_parsed_like_the_watched_one_shares_the_index_of_what_it_declares_alike() -> None:
    files = [ign_file(f"/etc/mcd-t/f{i}.conf", f"{i}\n") for i in range(50)]
    units = [_unit(random.Random(i), f"u{i}.service") for i in range(10)]
    a = machineconfig_from_object(mc_object("a", files=files, units=units), "A")
    changed = copy.deepcopy(files)
    changed[7] = ign_file("/etc/mcd-t/f7.conf", "seven\n")
    b = machineconfig_from_object(mc_object("b", files=changed, units=units), "B", like=a)
    assert a.config is not None and b.config is not None
    old = Expected(a.config)
    got, differ = old.follow(b.config)
    assert differ == ["/etc/mcd-t/f7.conf"]
    # the very entries and directory sets of the old index: nothing was built again for them
    assert all(got.managed[p] is m for p, m in old.managed.items() if p != "/etc/mcd-t/f7.conf")
    assert got.by_dir is old.by_dir and got.needed is old.needed and got.enablement is old.enablement
    _assert_same_index(got, Expected(b.config))


def _link_dirs(dirs: list[str]) -> set[str]:
    return {d for d in dirs if d.endswith(LINK_DIR_SUFFIXES)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS)
def test_a_retargeted_monitor_watches_and_distrusts_what_a_fresh_one_would(seed: int) -> None:
    a_obj, b_obj = _pair(random.Random(seed))
    pair = _parsed(a_obj, b_obj, like=True)
    if pair is None:
        return
    a, b = pair
    assert a.config is not None and b.config is not None
    with tempfile.TemporaryDirectory() as tmp:
        root, _ = laid_down(Path(tmp), a_obj)
        # enablement links as systemctl leaves them (the update here ran none)
        os.makedirs(root / "etc/systemd/system/multi-user.target.wants", exist_ok=True)
        hr = HostRoot(root)
        retargeted = DriftMonitor(hr, a.config, lambda: None)
        retargeted.start()
        try:
            assert retargeted.take_unverified() is None  # everything, at first
            retargeted.retarget(b.config)
            unverified = retargeted.take_unverified()
            fresh = DriftMonitor(hr, b.config, lambda: None)
            fresh.start()
            try:
                assert retargeted.managed == fresh.managed
                got, want = retargeted.watched_dirs, fresh.watched_dirs
                # link directories stay watched once watched, whether B declares an enablement or not
                assert set(got) - _link_dirs(got) == set(want) - _link_dirs(want)
                assert _link_dirs(want) <= _link_dirs(got)
            finally:
                fresh.stop()
        finally:
            retargeted.stop()
    old = Expected(a.config).managed
    assert unverified == {p for p, m in fresh.managed.items() if not same_declaration(old.get(p), m)}


ENABLED = {
    "name": "mcd-t0.service",
    "enabled": True,
    "contents": "[Unit]\n[Install]\nWantedBy=multi-user.target\n",
}
WANTS = "/etc/systemd/system/multi-user.target.wants"


def _started(tmp_path: Path, units: list[dict[str, Any]]) -> tuple[Path, DriftMonitor]:
    root, mc = laid_down(
        tmp_path, mc_object("rendered-a", files=[ign_file("/etc/mcd-t/a.conf")], units=units)
    )
    (root / WANTS.lstrip("/")).mkdir(parents=True, exist_ok=True)
    assert mc.config is not None
    monitor = DriftMonitor(HostRoot(root), mc.config, lambda: None)
    monitor.start()
    return root, monitor


def _enabling(like: MachineConfig) -> IgnitionConfig:
    b = machineconfig_from_object(
        mc_object("rendered-b", files=[ign_file("/etc/mcd-t/a.conf")], units=[ENABLED]), "B", like=like
    )
    assert b.config is not None
    return b.config


def test_an_enablement_declared_anew_has_the_link_directories_made_before_watched(tmp_path: Path) -> None:
    _, monitor = _started(tmp_path, [{**ENABLED, "enabled": None}])
    try:
        assert WANTS not in monitor.watched_dirs  # nothing declares an enablement yet
        monitor.retarget(_enabling(machineconfig_from_object(mc_object("a"), "A")))
        assert WANTS in monitor.watched_dirs
    finally:
        monitor.stop()


def test_link_directories_of_a_unit_directory_made_again_are_watched_after_a_retarget(tmp_path: Path) -> None:
    root, monitor = _started(tmp_path, [ENABLED])
    try:
        assert WANTS in monitor.watched_dirs
        units = root / "etc/systemd/system"
        # the unit directory made again whole, its link directory in it before it moved in:
        # no watch saw that one made
        staged = tmp_path / "staged"
        (staged / "multi-user.target.wants").mkdir(parents=True)
        shutil.rmtree(units)
        staged.rename(units)
        monitor.take()  # the events: the unit directory watched again, no link directory yet
        assert units.is_dir() and "/etc/systemd/system" in monitor.watched_dirs
        assert WANTS not in monitor.watched_dirs
        monitor.retarget(_enabling(machineconfig_from_object(mc_object("a"), "A")))
        assert WANTS in monitor.watched_dirs
    finally:
        monitor.stop()
