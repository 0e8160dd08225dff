"""The boot path's hygiene, as upstream's first sync does it (in process, on a sandbox root): the
first boot's leftovers retired, the bootstrap annotations' fallback, a reboot recorded in this
boot that has not happened."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import NODE, MemoryApi, syncer

from mcd.agent.errors import TransientError
from mcd.agent.sync import Result
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.node.errors import McdError

A = mc_object("rendered-a", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")])
DONE_ON_A = {ann.CURRENT_CONFIG: "rendered-a", ann.DESIRED_CONFIG: "rendered-a", ann.STATE: "Done"}
ENCAPSULATED = "etc/ignition-machine-config-encapsulated.json"
PRESET_DIR = "etc/systemd/system-preset"


def test_an_encapsulated_config_left_by_an_unfinished_firstboot_is_renamed_bak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = make_root(tmp_path, A)
    (root / ENCAPSULATED).write_text(json.dumps(A))
    inode = (root / ENCAPSULATED).stat().st_ino
    with caplog.at_level(logging.WARNING):
        assert syncer(root, MemoryApi(DONE_ON_A)).sync(boot=True) is Result.IDLE
    assert not (root / ENCAPSULATED).exists()
    bak = root / (ENCAPSULATED + ".bak")
    assert json.loads(bak.read_text()) == A
    assert bak.stat().st_ino == inode  # renamed, not copied
    assert "Failed to complete machine-config-daemon-firstboot before joining cluster!" in caplog.messages


def test_ignitions_preset_is_removed_and_the_others_are_kept(tmp_path: Path) -> None:
    root = make_root(tmp_path, A)
    presets = root / PRESET_DIR
    presets.mkdir(parents=True)
    (presets / "20-ignition.preset").write_text("enable kubelet.service\n")
    (presets / "40-admin.preset").write_text("enable chronyd.service\n")
    assert syncer(root, MemoryApi(DONE_ON_A)).sync(boot=True) is Result.IDLE
    assert sorted(os.listdir(presets)) == ["40-admin.preset"]


def test_a_failing_boot_check_still_retires_the_leftovers(tmp_path: Path) -> None:
    """Upstream does both before checking the state: a node Degraded at boot has them done too."""
    root = make_root(tmp_path, A)
    (root / "etc/mcd-test/a.conf").write_text("edited\n")
    (root / ENCAPSULATED).write_text("{}")
    (root / PRESET_DIR).mkdir(parents=True)
    (root / PRESET_DIR / "20-ignition.preset").write_text("")
    with pytest.raises(McdError, match="unexpected on-disk state validating against rendered-a"):
        syncer(root, MemoryApi(DONE_ON_A)).sync(boot=True)
    assert (root / (ENCAPSULATED + ".bak")).exists() and not (root / ENCAPSULATED).exists()
    assert not (root / PRESET_DIR / "20-ignition.preset").exists()


# --- without node-annotations.json --------------------------------------------------------------


def test_without_node_annotations_json_only_current_config_is_set_from_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = make_root(tmp_path, A)
    api = MemoryApi({})
    api.mcs["rendered-a"] = A
    s = syncer(root, api)
    with caplog.at_level(logging.INFO), pytest.raises(McdError) as failed:
        s.sync(boot=True)
    # upstream writes currentConfig alone (desiredConfig and state are not its to invent), then
    # cannot go on without the controller's desiredConfig
    assert api.history[1] == {ann.CURRENT_CONFIG: "rendered-a"}
    assert str(failed.value) == f"{ann.DESIRED_CONFIG} annotation not found on node '{NODE}'"
    assert "Setting initial node config based on current configuration on disk: rendered-a" in caplog.messages
    api.set(desiredConfig="rendered-a")  # the controller's part
    s.writer.refresh()
    assert s.sync(boot=True) is Result.IDLE
    assert api.history[-1][ann.STATE] == "Done"


def test_the_fallback_names_the_image_on_disk_too(tmp_path: Path) -> None:
    root = make_root(tmp_path, A)
    image = "quay.io/openshift/os@sha256:" + "d" * 64
    (root / "etc/machine-config-daemon/currentimage").write_text(image)
    api = MemoryApi({})
    with pytest.raises(McdError, match="desiredConfig annotation not found"):
        syncer(root, api).sync(boot=True)
    assert api.history[1] == {ann.CURRENT_CONFIG: "rendered-a", ann.CURRENT_IMAGE: image}


def test_without_node_annotations_json_or_a_config_on_disk_nothing_is_written(tmp_path: Path) -> None:
    from mcd_sim.sandbox import make_sandbox_root

    root = make_sandbox_root(tmp_path / "root")
    api = MemoryApi({})
    with pytest.raises(TransientError) as failed:
        syncer(root, api).sync(boot=True)
    # a node that just joined: no config named for it yet; it waits, not Degraded (the state is
    # left alone: a TransientError), until its pool controller names its first config
    assert str(failed.value) == (
        "node worker-0 has no machineconfiguration.openshift.io/desiredConfig yet and no config on disk "
        "(/etc/machine-config-daemon/currentconfig): waiting for its pool to name one"
    )
    assert len(api.history) == 1


# --- a reboot recorded in this boot ---------------------------------------------------------------


def test_a_recorded_reboot_that_did_not_happen_is_done_without_rebooting_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent restarted in the boot that applied A (its reboot failed or was cut short): upstream
    finds A on disk, checks it and is Done; it never asks for the reboot again."""
    root = make_root(tmp_path, A)
    boot_id = root / "proc/sys/kernel/random/boot_id"
    boot_id.parent.mkdir(parents=True)
    boot_id.write_text("boot-1\n")
    state.mark_reboot(HostRoot(root), "rendered-a", "Node will reboot into config rendered-a")
    api = MemoryApi(DONE_ON_A)
    with caplog.at_level(logging.WARNING):
        assert syncer(root, api).sync(boot=True) is Result.IDLE
    assert api.states() == [("Done", "")]
    assert api.history[-1].get(ann.POST_CONFIG_ACTION, "") == ""  # no reboot was asked for
    assert (
        f"node {NODE}: the reboot into rendered-a has not happened yet; its config is on disk"
        in caplog.messages
    )
    # still owed: the next update that can reboot takes it along (mcd status says so meanwhile)
    assert state.pending_reboot(HostRoot(root)) is not None
