"""The bootloader update before a rebase (mcd.host.bootloader, spec §5.6): where it runs (CoreOS,
x86_64/aarch64, Secure Boot on or unknown), how (the node's unit on EL 9.6+, else `bootupctl
update` from the target image), and that a failure only warns."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from recording import RecordingRunner

from mcd.host.bootloader import UPDATE_SERVICE, Bootloader
from mcd.host.osrelease import os_version
from mcd.host.root import HostRoot
from mcd.host.runner import CommandError, CommandResult

IMAGE = "quay.io/openshift/os@sha256:" + "b" * 64
EL96 = 'ID="rhcos"\nVARIANT_ID=coreos\nRHEL_VERSION="9.6"\n'
EL94 = 'ID="rhcos"\nVARIANT_ID=coreos\nRHEL_VERSION="9.4"\n'
SB_ON = "SecureBoot enabled\n"
PULL = ["systemd-run", "--unit", "machine-config-daemon-bootupd", "-p", "EnvironmentFile=-/etc/mco/proxy.env"]
RUN = ["systemd-run", "--unit", "machine-config-daemon-bootupd-update"]


def _failed(argv: list[str]) -> CommandError:
    return CommandError(CommandResult(tuple(argv), 1, "", "failed"))


def _loader(
    runner: RecordingRunner, root: Path, os_release: str = EL94, machine: str = "x86_64"
) -> Bootloader:
    return Bootloader(runner, HostRoot(root), machine=machine, os_release=os_release)


def test_el_9_6_starts_the_nodes_own_unit(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["mokutil"], stdout=SB_ON).expect(["systemctl"])
    assert _loader(runner, tmp_path, EL96).update_before_rebase(IMAGE)
    assert runner.commands == [("mokutil", "--sb-state"), ("systemctl", "start", UPDATE_SERVICE)]


def test_older_el_pulls_the_image_and_runs_bootupctl_from_it(tmp_path: Path) -> None:
    (tmp_path / "var/lib/kubelet").mkdir(parents=True)
    (tmp_path / "var/lib/kubelet/config.json").write_text("{}")
    runner = RecordingRunner().expect(["mokutil"], stdout=SB_ON).expect(["podman"], stdout="[]\n")
    runner.expect(["systemd-run"])
    assert _loader(runner, tmp_path).update_before_rebase(IMAGE)
    listed, pull, run = runner.commands[1:]
    assert listed == ("podman", "images", "--format=json", "--filter", f"reference={IMAGE}")
    auth = ["--authfile", "/var/lib/kubelet/config.json"]
    assert list(pull) == [*PULL, "--collect", "--wait", "--", "podman", "pull", *auth, IMAGE]
    assert list(run[: len(RUN)]) == RUN and run[-3:] == (IMAGE, "bootupctl", "update")
    assert {"--privileged", "--pid=host", "/boot:/boot:rslave", "/dev:/dev"} <= set(run)
    assert any(a.startswith("INVOCATION_ID=") for a in run)  # bootupctl wants to run under systemd


def test_a_failed_unit_falls_back_to_the_image_already_in_storage(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["mokutil"], stdout=SB_ON)
    runner.expect(["systemctl"], raises=_failed(["systemctl"]))
    runner.expect(["podman"], stdout='[{"Id": "abc"}]\n').expect(["systemd-run"])
    assert _loader(runner, tmp_path, EL96).update_before_rebase(IMAGE)
    assert [c[:3] for c in runner.commands[2:]] == [("podman", "images", "--format=json"), tuple(RUN)]


def test_secure_boot_off_or_another_machine_updates_nothing(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["mokutil"], stdout="SecureBoot disabled\n")
    assert not _loader(runner, tmp_path).update_before_rebase(IMAGE)
    assert runner.commands == [("mokutil", "--sb-state")]
    other = RecordingRunner()
    assert not _loader(other, tmp_path, machine="s390x").update_before_rebase(IMAGE)
    assert other.commands == []


def test_no_mokutil_is_taken_as_secure_boot_on(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["mokutil"], raises=FileNotFoundError(2, "No such file"))
    runner.expect(["systemctl"])
    assert _loader(runner, tmp_path, EL96, machine="aarch64").update_before_rebase(IMAGE)


def test_a_failed_update_warns_and_does_not_raise(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runner = RecordingRunner().expect(["mokutil"], stdout=SB_ON).expect(["podman"], stdout="[]")
    runner.expect(["systemd-run"], raises=_failed(["systemd-run"]))
    with caplog.at_level(logging.WARNING):
        assert not _loader(runner, tmp_path).update_before_rebase(IMAGE)
    assert any(m.startswith("bootloader update failed: pulling image for bootupctl") for m in caplog.messages)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (EL96, (9, 6)),
        ('ID=rhcos\nVERSION_ID="4.18"\nOPENSHIFT_VERSION="4.18"\nVERSION="418.94.202501"\n', (94, 202501)),
        ('ID=scos\nVERSION_ID="10.0"\n', (10, 0)),
        ("ID=fedora\nVERSION_ID=41\n", (41, -1)),
        ("", (-1, -1)),
    ],
)
def test_the_os_version_is_read_as_upstream(text: str, version: tuple[int, int]) -> None:
    assert os_version(text) == version
