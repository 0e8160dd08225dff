"""Issue 8.1: systemd directories linked out of the root are refused before anything is written.

`systemctl --root` follows links the way the kernel does, so a wants directory (or the unit
directory itself) linked outside a sandbox root would receive the enablement links. Real
sandbox roots, real symlinks, real `systemctl --root`, `mcd` run in-process through its CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import walk

from mcd.cli.main import main

pytestmark = pytest.mark.allow_commands

UNIT = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
SYSTEM = "etc/systemd/system"


class Box:
    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp
        self.capsys = capsys
        self.root = make_sandbox_root(tmp / "root")
        (self.root / SYSTEM).mkdir(parents=True, exist_ok=True)
        self.outside = tmp / "outside"
        self.outside.mkdir()

    def run(self, *argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--root-mount", str(self.root)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    def start(self, obj: dict[str, Any]) -> tuple[int, str, str]:
        path = self.tmp / f"{obj['metadata']['name']}.json"
        path.write_text(json.dumps(obj))
        return self.run("start", "--once-from", str(path), "--skip-reboot")

    def link(self, path: str, target: str | Path) -> None:
        where = self.root / path
        where.parent.mkdir(parents=True, exist_ok=True)
        where.symlink_to(target)


@pytest.fixture
def box(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Box:
    return Box(tmp_path, capsys)


def unit_mc(name: str = "enable", install: str = "WantedBy=multi-user.target", **unit: Any) -> dict[str, Any]:
    contents = f"[Service]\nExecStart=/bin/true\n[Install]\n{install}\n"
    return mc_object(name, units=[{"name": "foo.service", "enabled": True, "contents": contents, **unit}])


def _wants_absolute(box: Box) -> str:
    box.link(f"{SYSTEM}/multi-user.target.wants", box.outside)
    return "/etc/systemd/system/multi-user.target.wants"


def _wants_relative(box: Box) -> str:
    box.link(f"{SYSTEM}/multi-user.target.wants", "../../../../outside")
    return "/etc/systemd/system/multi-user.target.wants"


def _wants_dangling(box: Box) -> str:
    box.link(f"{SYSTEM}/multi-user.target.wants", box.outside / "not-yet")
    return "/etc/systemd/system/multi-user.target.wants"


def _absolute_meant_inside(box: Box) -> str:
    # inside by mcd's reading, but the kernel (and so systemctl --root) leaves the sandbox
    (box.root / "usr/lib/systemd/system/mu.wants").mkdir(parents=True)
    box.link(f"{SYSTEM}/multi-user.target.wants", "/usr/lib/systemd/system/mu.wants")
    return "/etc/systemd/system/multi-user.target.wants"


def _unit_dir(box: Box) -> str:
    (box.root / SYSTEM).rmdir()
    box.link(SYSTEM, box.outside)
    return "/etc/systemd/system"


def _systemd_parent(box: Box) -> str:
    (box.root / SYSTEM).rmdir()
    (box.root / "etc/systemd").rmdir()
    (box.outside / "system").mkdir()
    box.link("etc/systemd", box.outside)
    return "/etc/systemd/system"


def _preset_dir(box: Box) -> str:
    box.link("etc/systemd/system-preset", box.outside)
    return "/etc/systemd/system-preset"


def _dropin_dir(box: Box) -> str:
    box.link(f"{SYSTEM}/foo.service.d", box.outside)
    return "/etc/systemd/system/foo.service.d"


def _requires_dir(box: Box) -> str:
    box.link(f"{SYSTEM}/basic.target.requires", box.outside)
    return "/etc/systemd/system/basic.target.requires"


def _odd_name_to_dir(box: Box) -> str:
    # named like nothing systemd knows, but a directory: a WantedBy=odd target would use it
    box.link(f"{SYSTEM}/odd", box.outside)
    return "/etc/systemd/system/odd"


LAYOUTS: dict[str, Callable[[Box], str]] = {
    "wants-absolute": _wants_absolute,
    "wants-relative": _wants_relative,
    "wants-dangling": _wants_dangling,
    "absolute-meant-inside": _absolute_meant_inside,
    "unit-dir": _unit_dir,
    "systemd-parent": _systemd_parent,
    "preset-dir": _preset_dir,
    "dropin-dir": _dropin_dir,
    "requires-dir": _requires_dir,
    "odd-name": _odd_name_to_dir,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "enable": unit_mc(),
    "requires": unit_mc("requires", "RequiredBy=basic.target"),
    "alias": unit_mc("alias", "Alias=bar.service"),
    "dropin": unit_mc("dropin", dropins=[{"name": "x.conf", "contents": "[Unit]\nDescription=x\n"}]),
    "mask": mc_object("mask", units=[{"name": "foo.service", "mask": True}]),
    "preset": mc_object("preset", units=[{"name": "foo.service", "contents": UNIT}]),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_systemd_dir_leading_out_of_the_root_is_refused(box: Box, layout: str, config: str) -> None:
    path = LAYOUTS[layout](box)
    before, outside_before = walk(box.root), walk(box.outside)
    code, out, err = box.start(CONFIGS[config])
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert f"refusing {path}" in err
    assert "outside the root" in err
    assert walk(box.root) == before
    assert walk(box.outside) == outside_before


@pytest.mark.parametrize(
    ("shipped", "target"),
    [
        ("usr/lib/systemd/system/mu.wants", "../../../usr/lib/systemd/system/mu.wants"),
        ("etc/systemd/wants", "../wants"),
    ],
)
def test_a_wants_dir_linked_inside_the_root_keeps_working(box: Box, shipped: str, target: str) -> None:
    (box.root / shipped).mkdir(parents=True)
    box.link(f"{SYSTEM}/multi-user.target.wants", target)
    code, _, err = box.start(unit_mc())
    assert code == 0, err
    assert (box.root / shipped / "foo.service").readlink() == Path("/etc/systemd/system/foo.service")
    assert walk(box.outside) == {}
    # systemd 252's is-enabled does not count a link reached through a linked directory (its
    # own answer, which check-disk reports as such); what matters here: no escape is reported
    assert "outside the root" not in box.run("check-disk")[1]


def test_alias_links_to_unit_files_are_not_mistaken_for_escapes(box: Box) -> None:
    # an absolute link to a unit file (as `systemctl link` or a distribution makes) is read by
    # systemctl inside the root and never written through
    (box.root / "usr/lib/systemd/system").mkdir(parents=True)
    (box.root / "usr/lib/systemd/system/gdm.service").write_text(UNIT)
    box.link(f"{SYSTEM}/display-manager.service", "/usr/lib/systemd/system/gdm.service")
    assert box.start(unit_mc())[0] == 0
    assert box.run("check-disk")[0] == 0


def test_check_disk_reports_a_wants_dir_linked_out_of_the_root(box: Box) -> None:
    assert box.start(unit_mc())[0] == 0
    wants = box.root / SYSTEM / "multi-user.target.wants"
    (wants / "foo.service").unlink()
    wants.rmdir()
    box.link(f"{SYSTEM}/multi-user.target.wants", box.outside)
    code, out, _ = box.run("check-disk")
    assert code == 2
    assert "refusing /etc/systemd/system/multi-user.target.wants: symlink -> " in out
    assert "outside the root" in out


def test_offline_systemctl_refuses_on_its_own(box: Box) -> None:
    # the second line of defence: a link planted after the update's checks is still refused
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.host.systemd import OfflineSystemctl, SystemdError

    (box.root / SYSTEM / "foo.service").write_text(UNIT)
    _wants_absolute(box)
    before = walk(box.root)
    manager = OfflineSystemctl(HostRoot(box.root), SubprocessRunner())
    for call in (lambda: manager.enable(["foo.service"]), lambda: manager.preset("foo.service")):
        with pytest.raises(SystemdError, match=r"refusing /etc/systemd/system/multi-user\.target\.wants"):
            call()
    assert walk(box.root) == before
    assert walk(box.outside) == {}


def test_nothing_leads_out_of_the_live_root() -> None:
    # on `/` every link resolves inside the root: the check never refuses the running system
    from mcd.host.root import HostRoot
    from mcd.host.unitdirs import escapes

    assert escapes(HostRoot("/")) == []
