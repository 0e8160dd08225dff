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
from configpairs import SEEDS, config_pair, parsed_pair, unit
from drifttools import laid_down
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcd.agent.watch.drift import DriftMonitor
from mcd.agent.watch.inotify import LINK_DIR_SUFFIXES
from mcd.agent.watch.managed import Expected, same_declaration
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.host.root import HostRoot


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
    pair = parsed_pair(*config_pair(random.Random(seed)), like=like)
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
    units = [unit(random.Random(i), f"u{i}.service") for i in range(10)]
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


def test_a_config_with_a_file_more_takes_over_the_entries_and_directories_of_the_rest() -> None:
    files = [ign_file(f"/etc/mcd-t/d{i % 5}/f{i}.conf", f"{i}\n") for i in range(50)]
    units = [unit(random.Random(i), f"u{i}.service") for i in range(10)]
    a = machineconfig_from_object(mc_object("a", files=files, units=units), "A")
    more = [*files, ign_file("/etc/mcd-t/new/g.conf", "g\n")]
    b = machineconfig_from_object(mc_object("b", files=more, units=units), "B", like=a)
    assert a.config is not None and b.config is not None
    old = Expected(a.config)
    got, differ = old.follow(b.config)
    assert differ == ["/etc/mcd-t/new/g.conf"]
    assert all(got.managed[f.path] is old.managed[f.path] for f in a.config.files)
    assert all(got.by_dir[d] is old.by_dir[d] for d in old.by_dir)
    assert got.enablement is old.enablement
    _assert_same_index(got, Expected(b.config))


def _link_dirs(dirs: set[str]) -> set[str]:
    return {d for d in dirs if d.endswith(LINK_DIR_SUFFIXES)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS)
def test_a_retargeted_monitor_watches_and_distrusts_what_a_fresh_one_would(seed: int) -> None:
    a_obj, b_obj = config_pair(random.Random(seed))
    pair = parsed_pair(a_obj, b_obj, like=True)
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
            first = retargeted.take_unverified()
            assert first.everything  # everything, at first
            retargeted.verified(first)
            retargeted.retarget(b.config)
            taken = retargeted.take_unverified()
            assert not taken.everything
            unverified = set(taken.marks)
            fresh = DriftMonitor(hr, b.config, lambda: None)
            fresh.start()
            try:
                assert retargeted.managed == fresh.managed
                got, want = set(retargeted.watched_dirs), set(fresh.watched_dirs)
                # and maybe more: the directories on the way to B's that were watched (a
                # directory of A's, say) stay, and so do link directories once watched
                assert want <= got
                assert got - want <= Expected(b.config).needed | _link_dirs(got)
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
