"""scripts/install-host.sh in a temporary prefix: the units with an ExecStart that names the
environment, upstream's firstboot unit and target, the PATH link, the RBAC file; nothing asked
of systemd. The unit's sandbox is measured with `systemd-analyze security`. The whole install
(a virtualenv and pip, over a minute) runs with MCD_INSTALL_HOST_TEST=1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shipped import MANIFESTS, REPO

pytestmark = pytest.mark.allow_commands
SCRIPT = REPO / "scripts" / "install-host.sh"
MCD = REPO / ".venv" / "bin" / "mcd"
UNITS = (
    "machine-config-daemon.service",
    "machine-config-daemon-firstboot.service",
    "firstboot-osupdate.target",
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # a systemctl that records being called: an install in a prefix must never call it
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/systemctl.calls\n')
    (fake / "systemctl").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600,
                          check=False)  # fmt: skip


def _exec_start(unit: Path) -> str:
    [line] = [x for x in unit.read_text().splitlines() if x.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def _existing_env(prefix: Path, venv: str) -> None:
    """mcd already in the environment (--units-only): the checkout's, linked."""
    target = prefix / venv.lstrip("/") / "bin" / "mcd"
    target.parent.mkdir(parents=True)
    target.symlink_to(MCD)


@pytest.mark.parametrize("venv", ["/opt/mcd", "/srv/agents/mcd"])
def test_the_units_name_the_environment_and_the_rbac_ships_with_them(tmp_path: Path, venv: str) -> None:
    prefix = tmp_path / "root"
    _existing_env(prefix, venv)
    args = ("--prefix", str(prefix), "--units-only") + (("--venv", venv) if venv != "/opt/mcd" else ())
    proc = _run(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    units = prefix / "etc/systemd/system"
    assert sorted(p.name for p in units.iterdir()) == sorted(UNITS)
    assert _exec_start(units / "machine-config-daemon.service") == f"{venv}/bin/mcd start --root-mount / -v"
    firstboot = units / "machine-config-daemon-firstboot.service"
    assert _exec_start(firstboot) == f"{venv}/bin/mcd firstboot-complete-machineconfig --root-mount /"
    # upstream's shape: once, on an ostree host, while Ignition's encapsulated config is there
    text = firstboot.read_text()
    for line in ("ConditionPathExists=/run/ostree-booted",
                 "ConditionPathExists=/etc/ignition-machine-config-encapsulated.json",
                 "Before=kubelet-dependencies.target", "RequiredBy=firstboot-osupdate.target"):  # fmt: skip
        assert line in text.splitlines(), line
    # every other line is the repository's unit as it is
    for name in UNITS:
        shipped = (REPO / "systemd" / name).read_text().replace("/opt/mcd/bin/mcd", f"{venv}/bin/mcd")
        assert (units / name).read_text() == shipped
    assert os.readlink(prefix / "usr/local/bin/mcd") == f"{venv}/bin/mcd"
    rbac = prefix / venv.lstrip("/") / "share/mcd/host-rbac.yaml"
    assert rbac.read_text() == (MANIFESTS / "host" / "node-identity-rbac.yaml").read_text()
    assert f"kubectl apply -f {venv}/share/mcd/host-rbac.yaml" in proc.stdout
    assert not (tmp_path / "systemctl.calls").exists()


def test_refusals_are_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--prefix", str(tmp_path / "root"), "--units-only")
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "run without --units-only" in proc.stderr
    proc = _run(tmp_path, "--venv", "relative/dir", "--prefix", str(tmp_path / "root"))
    assert proc.returncode != 0 and "absolute" in proc.stderr
    proc = _run(tmp_path, "--frobnicate")
    assert proc.returncode != 0 and "unknown argument: --frobnicate" in proc.stderr


def _exposure(unit: Path) -> float:
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=unit.parent)  # fmt: skip
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout + proc.stderr)
    if m is None:
        pytest.skip(f"systemd-analyze security --offline is not supported here: {proc.stderr.strip()[:200]}")
    return float(m[1])


def test_the_agent_unit_is_sandboxed(tmp_path: Path) -> None:
    """9.6 (UNSAFE) without any sandboxing, 3.8 (OK) with it (systemd 252); it must stay 'OK'."""
    unit = tmp_path / "machine-config-daemon.service"
    shutil.copy(REPO / "systemd" / "machine-config-daemon.service", unit)
    assert _exposure(unit) <= 4.0


@pytest.mark.skipif(
    os.environ.get("MCD_INSTALL_HOST_TEST") != "1", reason="the whole install: MCD_INSTALL_HOST_TEST=1"
)
def test_the_whole_install_in_a_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "root"
    proc = _run(tmp_path, "--prefix", str(prefix))
    assert proc.returncode == 0, proc.stderr
    env = prefix / "opt/mcd"
    out = subprocess.run(
        [str(env / "bin/mcd"), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and "start" in out.stdout
    site = next(env.glob("lib/python3*/site-packages"))
    assert (site / "kubernetes").is_dir() and not (site / "kubernetes/aio").exists()
    assert not (site / "kubernetes/client/api").exists() and not (site / "aiohttp").exists()  # prune-env.sh
    assert not (site / "mcd_sim").exists()
    assert _exec_start(prefix / "etc/systemd/system/machine-config-daemon.service").startswith(
        "/opt/mcd/bin/mcd "
    )
