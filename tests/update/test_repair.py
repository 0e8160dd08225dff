"""A re-run of the applied config repairs everything it manages, and says what it repaired (issue 8).

A config with files, a unit with a dropin, a mask, an enabled unit and SSH keys is applied to a
sandbox root with `mcd start --once-from`; then the node is damaged by hand and the same config
is run again. The plan made on the damaged root (`mcd plan --root-mount`) must name the repair,
`start` must run exactly those steps, report them (`changes`, `repaired`), and leave the tree as
the first run did, so that `mcd check-disk` finds no drift.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import walk

from mcd.cli.main import main

commands = pytest.mark.allow_commands

UNITS = "/etc/systemd/system"
KEYS = "/home/core/.ssh/authorized_keys.d/ignition"
INSTALL = "[Install]\nWantedBy=multi-user.target\n"
HELLO = f"[Unit]\nDescription=hello\n[Service]\nExecStart=/bin/true\n{INSTALL}"
HELLO_ENV = "[Service]\nEnvironment=HELLO=1\n"
MASKED = "[Unit]\nDescription=never runs\n[Service]\nExecStart=/bin/false\n"


def config() -> dict[str, Any]:
    files = [{"path": "/etc/x", "mode": 0o644, "contents": {"source": data_url("hello\n")}}]
    units = [
        {
            "name": "hello.service",
            "enabled": True,
            "contents": HELLO,
            "dropins": [{"name": "10-env.conf", "contents": HELLO_ENV}],
        },
        {"name": "masked.service", "mask": True, "contents": MASKED},
    ]
    return mc_object("rendered-a", files=files, units=units, ssh_keys=["ssh-ed25519 AAAA a@example"])


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def applied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A sandbox root with `config()` applied, and the config's file."""
    root = make_sandbox_root(tmp_path / "root")
    source = tmp_path / "a.json"
    source.write_text(json.dumps(config()))
    code, _, err = cli(
        capsys, "start", "--once-from", str(source), "--root-mount", str(root), "--skip-reboot"
    )
    assert code == 0, err
    return root, str(source)


def plan_then_start(capsys: pytest.CaptureFixture[str], root: Path, source: str) -> tuple[Any, Any]:
    code, out, err = cli(capsys, "plan", "--root-mount", str(root), source, "-o", "json")
    assert (code, err) == (0, "")
    planned = json.loads(out)
    code, out, err = cli(capsys, "start", "--once-from", source, "--root-mount", str(root), "--skip-reboot")
    assert code == 0, err
    summary = json.loads(out)
    ran = [{k: v for k, v in s.items() if k != "skipped"} for s in summary["steps"]]
    assert ran == planned["steps"]  # the plan is what runs
    return planned, summary


def check_disk(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    return code, out


@commands
def test_a_rerun_repairs_unit_dropin_and_file(
    applied: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, source = applied
    good = walk(root)
    (root / f"{UNITS[1:]}/hello.service").write_text("[Service]\nExecStart=/bin/evil\n")
    (root / f"{UNITS[1:]}/hello.service.d/10-env.conf").unlink()
    (root / "etc/x").unlink()
    assert check_disk(capsys, root)[0] != 0

    planned, summary = plan_then_start(capsys, root, source)
    repaired = ["/etc/x", f"{UNITS}/hello.service.d/10-env.conf", f"{UNITS}/hello.service"]
    assert planned["repairs"] == repaired
    assert summary["repaired"] == repaired
    assert summary["changes"] == 3
    kinds = [s["kind"] for s in summary["steps"]]
    assert kinds[:3] == ["write-files", "write-unit-files", "enable"]
    assert walk(root) == good
    assert check_disk(capsys, root) == (0, "on-disk state matches rendered-a\n")


@commands
def test_the_text_plan_names_the_repair(
    applied: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, source = applied
    (root / f"{UNITS[1:]}/hello.service.d/10-env.conf").unlink()
    code, out, _ = cli(capsys, "plan", "--root-mount", str(root), source, "-o", "text")
    assert code == 0
    assert f"repair: {UNITS}/hello.service.d/10-env.conf (drifted from the applied config)" in out
    assert f"1. write 1 unit file(s): {UNITS}/hello.service.d/10-env.conf" in out


@commands
def test_a_rerun_repairs_a_mask_an_enablement_link_and_the_ssh_keys(
    applied: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, source = applied
    good = walk(root)
    (root / f"{UNITS[1:]}/masked.service").unlink()
    (root / f"{UNITS[1:]}/multi-user.target.wants/hello.service").unlink()
    (root / KEYS[1:]).write_text("ssh-rsa INTRUDER x@y\n")

    planned, summary = plan_then_start(capsys, root, source)
    assert planned["repairs"] == summary["repaired"] == [f"{UNITS}/masked.service", "hello.service", KEYS]
    assert summary["changes"] == 3
    assert {"kind": "mask", "unit": "masked.service"} in summary["steps"]
    assert {"kind": "enable", "units": ["hello.service"]} in summary["steps"]
    assert walk(root) == good
    assert check_disk(capsys, root) == (0, "on-disk state matches rendered-a\n")


@commands
def test_a_rerun_of_an_intact_node_plans_and_writes_nothing(
    applied: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, source = applied
    before = {p: os.lstat(root / p.lstrip("/")).st_mtime_ns for p in walk(root)}
    code, out, _ = cli(capsys, "plan", "--root-mount", str(root), source, "-o", "json")
    planned = json.loads(out)
    assert (code, planned["repairs"], [s["kind"] for s in planned["steps"]]) == (0, [], ["reboot"])
    code, out, _ = cli(capsys, "start", "--once-from", source, "--root-mount", str(root), "--skip-reboot")
    summary = json.loads(out)
    # already in the config: the owed reboot is asked for again, nothing is written
    assert (code, summary["repaired"], summary["changes"], summary["steps"]) == (0, [], 0, [])
    assert {p: os.lstat(root / p.lstrip("/")).st_mtime_ns for p in walk(root)} == before


@commands
def test_a_repair_the_host_refuses_changes_nothing(
    applied: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A drifted path is checked before anything is recorded, as a changed one is."""
    root, source = applied
    (root / "etc/x").unlink()
    (root / "etc/x").mkdir()
    (root / "etc/x/kept").write_text("someone's\n")
    before = walk(root)
    code, out, err = cli(capsys, "start", "--once-from", source, "--root-mount", str(root), "--skip-reboot")
    assert (code, out) == (1, "")
    assert "refused, nothing was changed" in err, err
    assert walk(root) == before
