"""The reboot owed by the installer's step is done by the node's first real boot.

The installer runs `mcd start --once-from A --root-mount NODE --skip-reboot` on the node's disk
before it ever booted: that root shows no boot id, so the reboot record holds none. When the node
then runs (a boot id under /proc), the record must read as done: the agent's first start found
it still owed, asked for the reboot again, and the next boot found it owed again (a reboot loop on
every real node, issue 18).

A "live" host here is a sandbox root wired as if it were the running system (`Host.live`), with a
strict RecordingRunner: any command, a reboot included, fails the test unless it is expected.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from builders import ign_file, mc, mc_object
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent.node_apply import NodeApplier
from mcd.cli.main import main
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.host.status import read_status
from mcd.update.transaction import Host, update

BOOT_ID = "proc/sys/kernel/random/boot_id"
NAME = "rendered-worker-a"


def boot(base: Path, boot_id: str) -> None:
    path = base / BOOT_ID
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(boot_id + "\n")


@pytest.fixture
def installed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A node root after the installer's step: A applied, its reboot skipped, no boot id yet."""
    root = make_sandbox_root(tmp_path / "root")
    source = tmp_path / "a.json"
    source.write_text(json.dumps(mc_object(NAME, files=[ign_file("/etc/app.conf", "a\n")])))
    code = main(["start", "--once-from", str(source), "--root-mount", str(root), "--skip-reboot"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    record = json.loads((root / "etc/machine-config-daemon/reboot-pending").read_text())
    assert record == {"config": NAME, "reason": f"Node will reboot into config {NAME}", "bootID": None}
    return root


def test_the_installers_reboot_is_owed_until_the_root_runs(installed: Path) -> None:
    # still the node's disk, not a running system: the reboot stays owed (plan and status say so)
    assert state.pending_reboot(HostRoot(installed)) is not None
    assert read_status(HostRoot(installed)).reboot_owed is not None


def test_the_first_boot_after_the_installer_clears_the_owed_reboot(installed: Path) -> None:
    boot(installed, "boot-1")
    root = HostRoot(installed)
    assert read_status(root).reboot_owed is None  # nothing written by the status
    assert not NodeApplier(root, RecordingRunner()).reboot_pending()
    assert not (installed / "etc/machine-config-daemon/reboot-pending").exists()


def test_the_agents_first_update_after_that_boot_asks_for_no_reboot(installed: Path) -> None:
    boot(installed, "boot-1")
    a = mc(NAME, files=[ign_file("/etc/app.conf", "a\n")])
    # the strict runner: a reboot request (systemd-run … systemctl reboot) would fail the test
    live = dataclasses.replace(Host.for_root(HostRoot(installed), RecordingRunner(), coreos=False), live=True)
    outcome = update(live, a, a, legacy=False, skip_reboot=True)
    assert (outcome.reboot, outcome.notes) == (False, ("already in the desired config",))


def test_a_reboot_owed_in_this_boot_stays_owed(installed: Path) -> None:
    boot(installed, "boot-1")
    root = HostRoot(installed)
    state.mark_reboot(root, NAME, "kernel arguments changed")
    assert state.pending_reboot(root) == state.PendingReboot(NAME, "kernel arguments changed")
    boot(installed, "boot-2")
    assert state.pending_reboot(root) is None
