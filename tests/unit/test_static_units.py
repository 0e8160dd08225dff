"""A unit without an [Install] entry (systemd's `static`) declared `enabled: true`: nothing to
enable, nothing to repair on a re-run; the plan says so once, when the unit is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import mc_object
from mcd_sim.sandbox import make_sandbox_root
from test_updatesteps import case, units

from mcd.cli.oncefrom import run_once_from
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.planner.managed_paths import is_static
from mcd.planner.nodefacts import NO_FACTS, Facts
from mcd.planner.steps import Enable, WriteUnitFiles
from mcd.update.transaction import Host

STATIC = "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n"
STATIC_UNIT = {"name": "static-x.service", "enabled": True, "contents": STATIC}


def test_static_is_no_install_entry_in_the_unit_or_its_dropins() -> None:
    assert is_static(STATIC)
    assert is_static(STATIC + "[Install]\n# nothing\n")
    assert not is_static(STATIC + "[Install]\nWantedBy=multi-user.target\n")
    assert not is_static(STATIC, ("[Install]\nWantedBy=multi-user.target\n",))
    assert not is_static(None) and not is_static("")


def test_a_static_unit_is_written_not_enabled_with_a_note() -> None:
    steps, notes = case(units(), units(STATIC_UNIT))
    assert not any(isinstance(s, Enable) for s in steps)
    assert any(isinstance(s, WriteUnitFiles) for s in steps)
    assert notes == [
        'unit "static-x.service" has no [Install] section (static): enabled: true has nothing to enable'
    ]


def test_a_static_unit_as_declared_is_not_repaired() -> None:
    path = "/etc/systemd/system/static-x.service"
    # the probe: its file matches, and systemd reports it `static`, not `enabled`
    facts = Facts(matching_paths=frozenset({path}), enablement_matches=frozenset())
    assert facts != NO_FACTS
    steps, notes = case(units(STATIC_UNIT), units(STATIC_UNIT), facts)
    assert steps == [] and notes == []


@pytest.mark.allow_commands
def test_re_running_a_config_with_a_static_unit_changes_nothing(tmp_path: Path) -> None:
    obj = mc_object("rendered-static", units=[STATIC_UNIT])
    source = tmp_path / "mc.json"
    source.write_text(json.dumps(obj))
    root = make_sandbox_root(tmp_path / "root")
    host = Host.for_root(HostRoot(root), SubprocessRunner())
    first = run_once_from(host, str(source), skip_reboot=True)
    assert first.plan.changes
    for _ in range(2):
        again = run_once_from(
            Host.for_root(HostRoot(root), SubprocessRunner()), str(source), skip_reboot=True
        )
        assert again.plan.repairs == () and again.plan.changes == ()
