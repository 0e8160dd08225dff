"""What follows the files: the reboot a config needs (owed until the node has booted again) and
the reloads and restarts that replace it (a failure rolls the update back, as upstream).

A "live" host here is a sandbox root wired as if it were the running system (`Host.live`), with a
RecordingRunner, so any command the update runs must be one the test expects.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from builders import ign_file, mc
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.config.machineconfig import MachineConfig
from mcd.host.reboot import RebootError
from mcd.host.root import HostRoot
from mcd.host.systemd import SystemdError, SystemdManager
from mcd.planner.steps import reboot_command
from mcd.update.transaction import Host, UpdateError, update

STATE = "etc/machine-config-daemon"
BOOT_ID = "proc/sys/kernel/random/boot_id"
REGISTRIES = "/etc/containers/registries.conf"
REG_A = 'unqualified-search-registries = ["registry.access.redhat.com"]\n'
UNIT = "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
REG_B = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n'


def config(name: str, text: str) -> MachineConfig:
    return mc(name, files=[ign_file("/etc/app.conf", text)])


def registries(name: str, text: str) -> MachineConfig:
    return mc(name, files=[ign_file(REGISTRIES, text)])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = make_sandbox_root(tmp_path / "root")
    boot(base, "boot-1")
    return base


def boot(base: Path, boot_id: str) -> None:
    path = base / BOOT_ID
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(boot_id + "\n")


def host(base: Path, runner: RecordingRunner, *, live: bool = True, **changes: object) -> Host:
    return dataclasses.replace(Host.for_root(HostRoot(base), runner, coreos=False), live=live, **changes)


def reboot_argv(name: str) -> Sequence[str]:
    return reboot_command(f"Node will reboot into config {name}", False)


def current(base: Path) -> str:
    name: str = json.loads((base / STATE / "currentconfig").read_text())["metadata"]["name"]
    return name


def owed(base: Path) -> dict[str, object] | None:
    path = base / STATE / "reboot-pending"
    return json.loads(path.read_text()) if path.exists() else None


# --- the reboot ---------------------------------------------------------------------------------


def test_the_reboot_is_requested_after_the_commit_and_owed_until_the_node_boots(root: Path) -> None:
    a = config("a", "a\n")
    runner = RecordingRunner().expect(reboot_argv("a"), times=1)
    outcome = update(host(root, runner), mc("empty"), a, legacy=True)
    assert (outcome.reboot, outcome.rebooted) == (True, True)
    assert current(root) == "a"
    assert owed(root) == {"config": "a", "reason": "Node will reboot into config a", "bootID": "boot-1"}

    # the daemon runs again before the machine went down: the reboot is asked for again
    runner = RecordingRunner().expect(reboot_argv("a"), times=1)
    outcome = update(host(root, runner), a, a, legacy=True)
    assert outcome.rebooted and outcome.notes == ("reboot still pending",)

    # after the reboot (another boot id) the node is simply in the config
    boot(root, "boot-2")
    outcome = update(host(root, RecordingRunner()), a, a, legacy=True)
    assert not outcome.reboot and outcome.notes == ("already in the desired config",)
    assert owed(root) is None


def test_a_failed_reboot_is_reported_and_retried_by_the_next_run(root: Path) -> None:
    a = config("a", "a\n")
    runner = RecordingRunner().expect(reboot_argv("a"), returncode=1, stderr="Failed to start transient unit")
    with pytest.raises(RebootError, match="reboot command failed, something is seriously wrong"):
        update(host(root, runner), mc("empty"), a, legacy=True)
    # the config is applied and the reboot it needs stays owed: never taken as done
    assert current(root) == "a"
    assert owed(root) is not None
    runner = RecordingRunner().expect(reboot_argv("a"), times=1)
    assert update(host(root, runner), a, a, legacy=True).rebooted
    assert runner.pending() == []


def test_a_root_that_is_not_a_running_system_is_never_rebooted(root: Path) -> None:
    # the strict runner fails the test on any command: no systemd-run may reach the machine
    outcome = update(host(root, RecordingRunner(), live=False), mc("empty"), config("a", "a\n"), legacy=True)
    assert (outcome.reboot, outcome.rebooted) == (True, False)
    assert outcome.notes == ("reboot skipped: not a running system",)


def test_skip_reboot_keeps_the_reboot_owed(root: Path) -> None:
    a = config("a", "a\n")
    update(host(root, RecordingRunner()), mc("empty"), a, legacy=True, skip_reboot=True)
    assert owed(root) is not None
    outcome = update(host(root, RecordingRunner()), a, a, legacy=True, skip_reboot=True)
    assert (outcome.reboot, outcome.rebooted, outcome.notes) == (True, False, ("reboot still pending",))


def test_a_rolled_back_update_leaves_the_reboot_record_as_it_was(root: Path) -> None:
    a = config("a", "a\n")
    b = mc(
        "b",
        files=[ign_file("/etc/app.conf", "b\n")],
        units=[{"name": "x.service", "enabled": True, "contents": UNIT}],
    )
    update(host(root, RecordingRunner()), mc("empty"), a, legacy=True, skip_reboot=True)
    flag = f"--root={root.resolve()}"
    runner = (
        RecordingRunner()
        .expect(["systemctl", flag, "enable", "x.service"], 1, "", "Failed to enable unit", times=1)
        .expect(["systemctl", flag, "preset", "x.service"], times=1)  # the rollback's cleanup
    )
    with pytest.raises(UpdateError, match="error enabling units"):
        update(host(root, runner), a, b, legacy=True)
    assert runner.pending() == []
    assert current(root) == "a"
    assert (root / "etc/app.conf").read_text() == "a\n"
    # a's reboot (skipped) is still owed; b, never committed, owes none
    assert owed(root) == {"config": "a", "reason": "Node will reboot into config a", "bootID": "boot-1"}


# --- reloads and restarts ---------------------------------------------------------------------------


class FailingReload:
    """The offline manager, except that reloading a unit fails as a live systemd might."""

    def __init__(self, inner: SystemdManager) -> None:
        self.inner = inner
        self.reloaded: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def reload(self, unit: str) -> None:
        self.reloaded.append(unit)
        raise SystemdError("Job for crio.service failed")


def test_a_reload_runs_before_the_commit_and_its_failure_rolls_back(root: Path) -> None:
    a, b = registries("a", REG_A), registries("b", REG_B)
    update(host(root, RecordingRunner()), mc("empty"), a, legacy=True, skip_reboot=True)
    boot(root, "boot-2")
    h = host(root, RecordingRunner())
    failing = FailingReload(h.systemd)
    h = dataclasses.replace(h, systemd=failing)
    with pytest.raises(UpdateError, match=r"Job for crio\.service failed"):
        update(h, a, b, legacy=True)
    assert failing.reloaded == ["crio.service"]
    assert (root / REGISTRIES.lstrip("/")).read_text() == REG_A
    assert current(root) == "a"


def test_actions_under_a_directory_root_run_nothing_and_say_so(root: Path) -> None:
    a, b = registries("a", REG_A), registries("b", REG_B)
    update(host(root, RecordingRunner(), live=False), mc("empty"), a, legacy=True, skip_reboot=True)
    outcome = update(host(root, RecordingRunner(), live=False), a, b, legacy=True)
    assert outcome.actions_run == ("reload crio.service (skipped: not the live root)",)
    assert current(root) == "b"


def test_restart_crio_runs_update_ca_trust_first_on_a_live_host(root: Path) -> None:
    bundle = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
    a, b = mc("a", files=[ign_file(bundle, "ca a\n")]), mc("b", files=[ign_file(bundle, "ca b\n")])
    update(host(root, RecordingRunner(), live=False), mc("empty"), a, legacy=True, skip_reboot=True)
    boot(root, "boot-2")
    restarted: list[str] = []
    h = host(root, RecordingRunner().expect(["update-ca-trust"], times=1))
    inner = h.systemd

    class Recording(FailingReload):
        def restart(self, unit: str) -> None:
            restarted.append(unit)

    outcome = update(dataclasses.replace(h, systemd=Recording(inner)), a, b, legacy=True)
    assert outcome.actions_run == ("update-ca-trust", "restart crio.service")
    assert restarted == ["crio.service"]


def test_a_reboot_owed_by_an_earlier_config_is_still_reported(root: Path) -> None:
    a = mc("a", files=[ign_file("/etc/app.conf", "a\n"), ign_file(REGISTRIES, REG_A)])
    b = mc("b", files=[ign_file("/etc/app.conf", "a\n"), ign_file(REGISTRIES, REG_B)])
    update(host(root, RecordingRunner(), live=False), mc("empty"), a, legacy=True, skip_reboot=True)
    outcome = update(host(root, RecordingRunner(), live=False), a, b, legacy=True, skip_reboot=True)
    # b itself only reloads crio, but the node never rebooted into a
    assert outcome.actions_run == ("reload crio.service (skipped: not the live root)",)
    assert (outcome.reboot, outcome.rebooted, outcome.notes) == (True, False, ("reboot still pending",))
    assert owed(root) == {"config": "a", "reason": "Node will reboot into config a", "bootID": "boot-1"}
