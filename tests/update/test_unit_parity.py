"""Units as upstream writes them (issue 8, part C), through `mcd plan` and `mcd start --once-from`.

A sandbox root, the real `systemctl --root`; each test applies configs in turn and compares
the plan, the steps run and the tree with what upstream's writeUnits/deleteStaleData do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from builders import mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import put

from mcd.cli.main import main
from mcd.host.originals import orig_path

pytestmark = pytest.mark.allow_commands

UNITS = "/etc/systemd/system"
DROPIN = f"{UNITS}/chronyd.service.d/10-nice.conf"
ADMINS = "[Service]\nNice=1\n"


def start(capsys: pytest.CaptureFixture[str], root: Path, tmp: Path, obj: dict[str, Any]) -> dict[str, Any]:
    source = tmp / f"{obj['metadata']['name']}.json"
    source.write_text(json.dumps(obj))
    code, out, _ = main_io(capsys, "plan", "--root-mount", str(root), str(source), "-o", "json")
    planned = json.loads(out)
    code, out, err = main_io(
        capsys, "start", "--once-from", str(source), "--root-mount", str(root), "--skip-reboot"
    )
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    assert [{k: v for k, v in s.items() if k != "skipped"} for s in summary["steps"]] == planned["steps"]
    return summary


def main_io(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def chronyd(*dropins: dict[str, Any], name: str) -> dict[str, Any]:
    return mc_object(name, units=[{"name": "chronyd.service", "dropins": list(dropins)}])


def test_an_empty_dropin_is_deleted_even_with_a_backup_which_comes_back_when_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_sandbox_root(tmp_path / "root")
    put(root, DROPIN, ADMINS)
    start(
        capsys, root, tmp_path, chronyd({"name": "10-nice.conf", "contents": "[Service]\nNice=5\n"}, name="a")
    )
    assert (root / orig_path(DROPIN).lstrip("/")).read_text() == ADMINS

    summary = start(capsys, root, tmp_path, chronyd({"name": "10-nice.conf"}, name="b"))
    assert {"kind": "remove-file", "path": DROPIN} in summary["steps"]  # upstream: os.Remove
    assert not (root / DROPIN.lstrip("/")).exists()
    assert (root / orig_path(DROPIN).lstrip("/")).read_text() == ADMINS  # kept for the drop

    summary = start(capsys, root, tmp_path, mc_object("c"))
    assert {"kind": "restore-original", "path": DROPIN} in summary["steps"]
    assert (root / DROPIN.lstrip("/")).read_text() == ADMINS


def legacy(name: str, text: str) -> dict[str, Any]:
    contents = (
        f"[Unit]\nDescription={text}\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    )
    return mc_object(name, units=[{"name": "legacy.service", "enabled": True, "contents": contents}])


def test_off_coreos_a_unit_upstream_wrote_is_deleted_when_dropped_not_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Taking over a node upstream managed: its unit file is no original to bring back and re-enable."""
    root = make_sandbox_root(tmp_path / "root")
    written = legacy("rendered-upstream", "upstream")
    unit = f"{UNITS}/legacy.service"
    put(root, unit, written["spec"]["config"]["systemd"]["units"][0]["contents"])
    link = root / f"{UNITS[1:]}/multi-user.target.wants/legacy.service"
    link.parent.mkdir(parents=True)
    link.symlink_to(unit)
    put(root, "/etc/machine-config-daemon/currentconfig", json.dumps(written))

    start(capsys, root, tmp_path, legacy("rendered-mcd", "mcd"))
    assert not (root / orig_path(unit).lstrip("/")).exists()  # stamped: upstream keeps no copy

    summary = start(capsys, root, tmp_path, mc_object("rendered-none"))
    steps = [s for s in summary["steps"] if s["kind"] not in ("drain", "reboot")]
    assert steps == [
        {"kind": "preset", "unit": "legacy.service"},
        {"kind": "disable", "units": ["legacy.service"], "reason": "removed"},
        {"kind": "remove-file", "path": unit},
    ]
    assert not (root / unit.lstrip("/")).exists()
    assert not os.path.lexists(link)
