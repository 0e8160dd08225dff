"""The end-to-end VM's files (`vagrant/`): the Vagrantfile validates (with the libvirt provider's
settings checked when the vagrant-libvirt plugin is installed), and the scenarios the VM applies
are valid configs that apply in order to a sandbox root.

`vagrant validate` runs when vagrant is installed; `make vagrant-check` installs it (and
vagrant-libvirt) from apt first. Booting the VM needs a Fedora CoreOS box and KVM, which this
suite never has: see vagrant/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shipped import REPO

pytestmark = pytest.mark.allow_commands

VAGRANT = REPO / "vagrant"
SCENARIOS = sorted((VAGRANT / "scenarios").glob("*.yaml"))


def _mcd(*args: str, module: str = "mcd") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, check=False,
                          cwd=REPO, timeout=120)  # fmt: skip


NO_VAGRANT = "vagrant is not installed (make vagrant-check installs it)"


@pytest.mark.skipif(shutil.which("vagrant") is None, reason=NO_VAGRANT)
def test_vagrantfile_validates(tmp_path: Path) -> None:
    env = dict(os.environ, VAGRANT_CWD=str(VAGRANT), VAGRANT_DOTFILE_PATH=str(tmp_path / "dot"),
               VAGRANT_CHECKPOINT_DISABLE="1", VAGRANT_NO_COLOR="1")  # fmt: skip
    proc = subprocess.run(
        ["vagrant", "validate"], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Vagrantfile validated successfully." in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_vm_steps_script_parses() -> None:
    script = str(VAGRANT / "e2e.sh")
    proc = subprocess.run(["bash", "-n", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_scenarios_are_valid_and_apply_in_order_to_a_sandbox(tmp_path: Path) -> None:
    assert [p.name for p in SCENARIOS] == ["10-add.yaml", "20-change.yaml"]
    proc = _mcd("validate", *map(str, SCENARIOS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = tmp_path / "root"
    assert _mcd("sandbox", str(root), module="mcd_sim").returncode == 0
    for path in SCENARIOS:
        proc = _mcd("start", "--once-from", str(path), "--root-mount", str(root), "--skip-reboot")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["reboot"]["required"] is True  # the kernel argument: Vagrant reboots
        proc = _mcd("check-disk", "--root-mount", str(root))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "etc/mcd-e2e/hello.conf").read_text() == "changed\n"
    assert not (root / "etc/systemd/system/mcd-e2e.service").exists()
