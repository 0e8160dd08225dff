"""The checks that trust the armed monitor read the paths it hands over with their declarations:
the same files, dropins and units as a pass over the config picks, found without that pass."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from builders import ign_file, mc_object
from configpairs import SEEDS, config_pair, parsed_pair
from drifttools import laid_down
from hypothesis import HealthCheck, given, settings

from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.watch.driftreport import DriftReporter
from mcd.agent.watch.managed import Expected, managed_paths
from mcd.config.ignition import File, IgnitionConfig, Unit
from mcd.config.machineconfig import MachineConfig
from mcd.host import ondisk
from mcd.host.root import HostRoot
from mcd.node.annotations import NodeState


def _normal(config: IgnitionConfig) -> IgnitionConfig:
    """A dropin declared without contents is checked as an empty one: spelled one way here."""
    units = tuple(replace(u, dropins=tuple(replace(d, contents=d.contents or "") for d in u.dropins))
                  for u in config.units)  # fmt: skip
    return replace(config, units=units)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS)
def test_a_selection_with_its_declarations_restricts_the_config_as_its_paths_do(seed: int) -> None:
    rnd = random.Random(seed)
    pair = parsed_pair(*config_pair(rnd), like=False)
    if pair is None:
        return
    config = pair[0].config
    assert config is not None
    index = managed_paths(config)
    if not Expected(config).distinct:
        return  # a path declared twice: the reporter hands over the paths alone (below)
    chosen = rnd.sample(sorted(index), rnd.randint(0, len(index)))
    by_paths = ondisk._restricted(config, frozenset(chosen))
    by_declarations = ondisk._restricted(config, {p: index[p] for p in chosen})
    assert _normal(by_declarations) == _normal(by_paths)


class Unread(tuple):  # type: ignore[type-arg]
    """A config's list that fails the test when walked."""

    def __iter__(self) -> Any:
        raise AssertionError("the whole config was walked")


def test_the_check_of_a_selection_does_not_walk_the_config(tmp_path: Path) -> None:
    unit = {"name": "x.service", "enabled": True, "contents": "[Install]\nWantedBy=multi-user.target\n",
            "dropins": [{"name": "10-a.conf", "contents": "[Service]\n"}]}  # fmt: skip
    files = [ign_file(f"/etc/mcd-t/f{i}.conf", f"{i}\n") for i in range(20)]
    root, mc = laid_down(tmp_path, mc_object("a", files=files, units=[unit]))
    assert mc.config is not None
    index = managed_paths(mc.config)
    (root / "etc/mcd-t/f3.conf").write_text("changed\n")
    selection = {p: index[p] for p in ("/etc/mcd-t/f3.conf", "/etc/systemd/system/x.service.d/10-a.conf")}
    unread = replace(mc.config, files=Unread(mc.config.files), units=Unread(mc.config.units))
    errors = list(ondisk.iter_errors(HostRoot(root), unread, only=selection))
    assert errors == ['content mismatch for file "/etc/mcd-t/f3.conf"']
    # and a selection in other clothes, the paths alone, finds the same
    assert list(ondisk.iter_errors(HostRoot(root), mc.config, only=frozenset(selection))) == errors
    assert isinstance(unread.files, Unread) and isinstance(unread.units, Unread)
    assert all(isinstance(x, File | Unit) for x in (*mc.config.files, *mc.config.units))


@dataclass
class _Applier:
    root: HostRoot
    mc: MachineConfig

    def disk_config(self) -> MachineConfig:
        return self.mc

    def host(self) -> object:
        return object()


class _Reporter:
    def report_drift(self, reason: str) -> None:
        raise AssertionError(reason)

    def current(self) -> tuple[NodeState, str]:
        return NodeState.DONE, ""


DROPIN = "/etc/systemd/system/x.service.d/10-a.conf"


def test_a_path_declared_twice_is_handed_over_alone_and_checked_as_each_declares_it(tmp_path: Path) -> None:
    # a file where a dropin declared without contents (to be absent) is: one of them fails
    # its check whatever the disk holds; the monitor's index keeps one declaration per path
    unit = {"name": "x.service", "dropins": [{"name": "10-a.conf"}]}
    root, mc = laid_down(tmp_path, mc_object("a", files=[ign_file(DROPIN, "file\n")], units=[unit]))
    assert mc.config is not None and not Expected(mc.config).distinct
    hr = HostRoot(root)
    drift = DriftReporter(_Applier(hr, mc), _Reporter(), EventRecorder(None, "n"), Metrics(), lambda: None)
    drift.arm(mc)
    try:
        assert drift.unverified(mc) is None  # everything, at first
        drift.verified(mc)  # the check of it passed
        (root / DROPIN.lstrip("/")).write_text("file\n")
        (root / DROPIN.lstrip("/")).unlink()  # as the dropin declares, not as the file does
        only = drift.unverified(mc)
        assert only is not None and not isinstance(only, Mapping) and set(only) == {DROPIN}
        by_paths = ondisk.first_error(hr, mc.config, only=frozenset({DROPIN}))
        # the index alone would check the dropin, not the file
        assert by_paths != ondisk.first_error(hr, mc.config, only={DROPIN: managed_paths(mc.config)[DROPIN]})
        assert ondisk.first_error(hr, mc.config, only=only) == by_paths
    finally:
        drift.stop()


def test_the_reporter_hands_over_the_declarations_of_the_paths_it_saw_change(tmp_path: Path) -> None:
    root, mc = laid_down(
        tmp_path, mc_object("a", files=[ign_file(f"/etc/mcd-t/f{i}.conf", "x\n") for i in range(3)])
    )
    assert mc.config is not None
    drift = DriftReporter(
        _Applier(HostRoot(root), mc), _Reporter(), EventRecorder(None, "n"), Metrics(), lambda: None
    )
    drift.arm(mc)
    try:
        assert drift.unverified(mc) is None
        drift.verified(mc)
        (root / "etc/mcd-t/f1.conf").touch()
        only = drift.unverified(mc)
        assert isinstance(only, Mapping) and dict(only) == {
            "/etc/mcd-t/f1.conf": managed_paths(mc.config)["/etc/mcd-t/f1.conf"]
        }
    finally:
        drift.stop()
