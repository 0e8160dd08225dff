"""The node mounted in the pod (`--root-mount /rootfs`): a running system, reached through its mount.

Its files go through HostRoot as for any root, but what must act as the host (systemctl,
rpm-ostree, the reboot) runs inside it (`chroot <root>`), and systemd is asked over the node's
own bus socket. A directory prepared as a root (a sandbox) stays offline: nothing runs there.
"""

from __future__ import annotations

from pathlib import Path

from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.host.root import HostRoot
from mcd.host.runner import ChrootRunner
from mcd.host.systemd import LiveSystemctl, OfflineSystemctl
from mcd.planner.plan import reboot_command
from mcd.update.transaction import Host


def mounted_node(tmp_path: Path, *, coreos: bool = True) -> Path:
    base = make_sandbox_root(tmp_path / "rootfs", coreos=coreos)
    (base / "run" / "systemd" / "system").mkdir(parents=True)  # systemd runs that system
    return base


def test_a_mounted_running_system_is_live_and_a_sandbox_is_not(tmp_path: Path) -> None:
    assert HostRoot(mounted_node(tmp_path)).runs_systemd
    assert not HostRoot(make_sandbox_root(tmp_path / "sandbox")).runs_systemd
    assert HostRoot("/").runs_systemd  # the live root, whatever runs it


def test_host_commands_run_inside_the_mounted_root(tmp_path: Path) -> None:
    base = mounted_node(tmp_path)
    prefix = str(base.resolve())
    runner = (
        RecordingRunner()
        .expect(["chroot", prefix, *reboot_command("why", True)], times=1)
        .expect(["chroot", prefix, "systemctl", "reload", "crio.service"], times=1)
        .expect(["chroot", prefix, "rpm-ostree", "cleanup", "-p"], times=1)
    )
    host = Host.for_root(HostRoot(base), runner)
    assert host.live and host.coreos
    # no bus socket in the test's mount: the plain systemctl of the node, inside it
    assert isinstance(host.systemd, LiveSystemctl)
    host.rebooter.reboot("why")
    host.systemd.reload("crio.service")
    assert host.rpmostree is not None
    host.rpmostree.cleanup_pending()
    assert runner.pending() == []


def test_a_sandbox_root_stays_offline(tmp_path: Path) -> None:
    host = Host.for_root(HostRoot(make_sandbox_root(tmp_path / "r")), RecordingRunner())
    assert not host.live
    assert isinstance(host.systemd, OfflineSystemctl)


def test_chroot_runner_passes_everything_through() -> None:
    inner = RecordingRunner().expect(["chroot", "/rootfs", "rpm-ostree", "status"], 0, "ok")
    result = ChrootRunner(inner, "/rootfs").run(["rpm-ostree", "status"], env={"A": "1"}, timeout=5)
    assert result.stdout == "ok"
    assert inner.calls[0].env == {"A": "1"} and inner.calls[0].timeout == 5
