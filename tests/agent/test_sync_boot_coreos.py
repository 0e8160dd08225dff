"""The boot path on CoreOS, after the reboot of an update (in process, a CoreOS sandbox, the
rpm-ostree stand-in and a real journal): the booted deployment's extensions are checked before
Done, and a failed `ostree-finalize-staged.service` in the previous boot is reported as upstream
reports it."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import lay_down
from inproc import NODE, MemoryApi, syncer
from journals import entry, write_journal
from mcd_sim.sandbox import make_sandbox_root

from mcd.agent.report.events import EventRecorder
from mcd.agent.sync import Result, Syncer
from mcd.host.runner import SubprocessRunner
from mcd.node import annotations as ann
from mcd.node.errors import McdError

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
NMSTATECTL = STANDIN.with_name("nmstatectl")
BOOTED = "quay.io/fedora/fedora-coreos:stable"  # the stand-in's first booted image
IMAGE = "quay.io/openshift/os@sha256:" + "e" * 64
POLICY = ign_file("/etc/containers/policy.json", "{}\n")
FINALIZE_UNIT = "ostree-finalize-staged.service"
FINALIZE_ERROR = "error: Installing kernel: regfile copy: No space left on device"


class Recorder(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, NODE)
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, etype: str, reason: str, message: str) -> None:
        self.recorded.append((etype, reason, message))
        super().record(etype, reason, message)


class Node:
    """A CoreOS sandbox root, its rpm-ostree stand-in and the cluster's view of it."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "rpm-ostree").symlink_to(STANDIN)
        (bin_dir / "nmstatectl").symlink_to(NMSTATECTL)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(tmp_path / "rpm-ostree.json"))
        for name in (
            "RPMOSTREE_STANDIN_FAIL",
            "RPMOSTREE_STANDIN_BOOTED_IMAGE",
            "RPMOSTREE_STANDIN_DROP_PACKAGES",
        ):
            monkeypatch.delenv(name, raising=False)
        self.root = make_sandbox_root(tmp_path / "root", coreos=True)
        self.runner = SubprocessRunner()
        # the update of the config staged (files written, currentconfig recorded); not booted yet
        lay_down(self.root, config, self.runner)
        name = config["metadata"]["name"]
        self.api = MemoryApi({ann.CURRENT_CONFIG: name, ann.DESIRED_CONFIG: name, ann.STATE: "Done"})
        self.api.mcs[name] = config
        self.events = Recorder()

    def reboot(self, *how: str) -> None:
        self.runner.run(["rpm-ostree", "standin-reboot", *how])

    def journal(self, *previous_boot: str) -> None:
        """The node's journal: the finalize unit's lines in the previous boot, then this boot."""
        lines = [
            dict(entry(text, boot="1" * 32, unit=FINALIZE_UNIT, seq=i), _UID="0")
            for i, text in enumerate(previous_boot, 1)
        ]
        lines.append(entry("Started machine-config-daemon.", boot="2" * 32, unit="mcd.service", seq=99))
        write_journal(self.root / "var/log/journal" / ("0" * 32) / "system.journal", lines)

    def agent(self) -> Syncer:
        """A new agent process's sync (what starts after the boot)."""
        return syncer(self.root, self.api, self.runner, self.events)

    def reasons(self, reason: str) -> list[str]:
        return [m for _, r, m in self.events.recorded if r == reason]


# --- extensions -----------------------------------------------------------------------------------

WITH_USBGUARD = mc_object("rendered-a", files=[POLICY], osImageURL=BOOTED, extensions=["usbguard"])


def test_a_booted_deployment_without_the_extension_is_degraded_with_upstreams_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node(tmp_path, monkeypatch, WITH_USBGUARD)
    node.reboot("--finalize-fails")  # the node came back in the deployment without usbguard
    agent = node.agent()
    with pytest.raises(McdError) as failed:
        agent.sync(boot=True)
    assert str(failed.value) == (
        'extension package verification failed: extension "usbguard" verification failed: no valid '
        "package set is fully installed. Tried 1 package set(s), missing packages per set: [[usbguard]]"
    )
    assert node.reasons("NodeDone") == [] and len(node.api.history) == 1  # not Done
    # the admin layers it and reboots: the retried boot path finds it and is Done
    node.runner.run(["rpm-ostree", "update", "--install", "usbguard"])
    node.reboot()
    assert agent.sync(boot=True) is Result.IDLE
    assert node.reasons("NodeDone") == [f"Setting node {NODE}, currentConfig rendered-a to Done"]


# --- ostree-finalize-staged.service failed at the last shutdown -----------------------------------

REBASED = mc_object("rendered-a", files=[POLICY], osImageURL=IMAGE)


def test_a_failed_finalization_is_annotated_posted_once_and_named_as_the_root_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node(tmp_path, monkeypatch, REBASED)
    node.reboot("--finalize-fails")  # the rebase did not take: the old image booted again
    node.journal("Finalizing staged deployment", FINALIZE_ERROR, "error: a later line")
    agent = node.agent()
    reason = (
        f'unexpected on-disk state validating against rendered-a: expected target osImageURL "{IMAGE}", '
        f'have "{BOOTED}"; possible root cause: {FINALIZE_ERROR}'
    )
    for _ in range(2):  # the boot path retried: the same reason, the Event not posted again
        with pytest.raises(McdError) as failed:
            agent.sync(boot=True)
        assert str(failed.value) == reason
    assert node.api.history[-1][ann.FINALIZE_FAILURE] == FINALIZE_ERROR
    assert node.reasons("FailedFinalization") == [FINALIZE_ERROR]
    assert node.reasons("OnDiskStateValidationFailed") == [reason, reason]


def test_a_later_boot_that_finalized_empties_the_annotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node(tmp_path, monkeypatch, REBASED)
    node.api.set(**{"ostree-finalize-staged-failure": FINALIZE_ERROR})  # from an earlier boot
    node.reboot()
    node.journal("Finalizing staged deployment", "Bootloader updated; bootconfig swap: yes")
    assert node.agent().sync(boot=True) is Result.IDLE
    assert node.api.history[-1][ann.FINALIZE_FAILURE] == ""
    assert node.reasons("FailedFinalization") == []


def test_no_failure_and_no_annotation_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(tmp_path, monkeypatch, REBASED)
    node.reboot()
    node.journal("Finalizing staged deployment")
    with caplog.at_level(logging.INFO):
        assert node.agent().sync(boot=True) is Result.IDLE
    assert "Previous boot ostree-finalize-staged.service appears successful" in caplog.messages
    assert all(ann.FINALIZE_FAILURE not in a for a in node.api.history)


# --- NIC names pinned at the first sync (spec §2.2) -------------------------------------------------

EL9 = 'NAME="Red Hat Enterprise Linux CoreOS"\nID="rhcos"\nVARIANT_ID=coreos\nRHEL_VERSION="9.6"\n'
NIC_KARGS = "ifname=eth0:52:54:00:12:34:56"


def test_the_first_sync_on_el9_pins_the_nic_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = Node(tmp_path, monkeypatch, REBASED)
    node.reboot()
    (node.root / "etc/os-release").write_text(EL9)
    monkeypatch.setenv("NMSTATECTL_STANDIN_KARGS", NIC_KARGS)
    monkeypatch.setenv("NMSTATECTL_STANDIN_LOG", str(tmp_path / "nmstatectl.log"))
    assert node.agent().sync(boot=True) is Result.IDLE
    [argv] = [json.loads(line) for line in (tmp_path / "nmstatectl.log").read_text().splitlines()]
    assert argv[:3] == ["persist-nic-names", "--root", str(node.root)] and argv[3] == "--kargs-out"
    calls = json.loads((tmp_path / "rpm-ostree.json").read_text())["standin"]["calls"]
    assert ["kargs", "--append=" + NIC_KARGS] in [c["argv"] for c in calls]
    assert node.reasons("NodeDone")  # pinned, then Done as before


def test_a_failed_pinning_fails_the_first_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = Node(tmp_path, monkeypatch, REBASED)
    node.reboot()
    (node.root / "etc/os-release").write_text(EL9)
    monkeypatch.setenv("NMSTATECTL_STANDIN_FAIL", "cannot read /sys/class/net")
    with pytest.raises(McdError, match=r"^failed to run nmstatectl: "):
        node.agent().sync(boot=True)
    assert node.reasons("NodeDone") == []
