"""On-cluster layering: `desiredImage` on a CoreOS sandbox with the rpm-ostree stand-in. The
agent rebases to the image, reboots into it and reports it in `currentImage`, once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import lay_down
from inproc import MemoryApi, syncer
from mcd_sim.sandbox import make_sandbox_root

from mcd.agent.sync import Result
from mcd.host.runner import SubprocessRunner
from mcd.node import annotations as ann
from mcd.node.errors import McdError

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
BOOTED = "quay.io/fedora/fedora-coreos:stable"  # the stand-in's first booted image
IMAGE = "quay.io/openshift/os@sha256:" + "c" * 64
CONFIG = mc_object("rendered-a", files=[ign_file("/etc/containers/policy.json", "{}\n")], osImageURL=BOOTED)


def test_desired_image_rebases_reboots_and_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm-ostree").symlink_to(STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    state = tmp_path / "rpm-ostree.json"
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(state))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    runner = SubprocessRunner()
    lay_down(root, CONFIG, runner)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-a", ann.DESIRED_CONFIG: "rendered-a", ann.STATE: "Done",
                     ann.DESIRED_IMAGE: IMAGE})  # fmt: skip
    api.mcs["rendered-a"] = CONFIG
    s = syncer(root, api, runner)
    # the boot path sees the node is not in its desired image: BootResync, the rebase, the reboot
    assert s.sync(boot=True) is Result.SIMULATED_REBOOT
    calls = [c["argv"] for c in json.loads(state.read_text())["standin"]["calls"]]
    assert ["rebase", "--experimental", f"ostree-unverified-registry:{IMAGE}"] in calls
    assert (root / "etc/machine-config-daemon/currentimage").read_text() == IMAGE
    runner.run(["rpm-ostree", "standin-reboot"])  # the staged deployment boots
    after = syncer(root, api, runner)
    assert after.sync(boot=True) is Result.IDLE  # the booted image is checked against the image
    a = api.history[-1]
    assert (a[ann.STATE], a[ann.CURRENT_IMAGE], a[ann.DESIRED_IMAGE]) == ("Done", IMAGE, IMAGE)
    writes = len(api.history)
    assert after.sync(boot=False) is Result.IDLE
    assert len(api.history) == writes


# --- the extensions of an image-mode node (spec §2.6 step 8) --------------------------------------

RPM_STANDIN = STANDIN.with_name("rpm")
WITH_USBGUARD = mc_object(
    "rendered-a",
    files=[ign_file("/etc/containers/policy.json", "{}\n")],
    osImageURL=BOOTED,
    extensions=["usbguard"],
)


def _booted_into_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, image_packages: list[str]
) -> tuple[Path, MemoryApi, SubprocessRunner]:
    """An image-mode node after the rebase to IMAGE and its reboot; the image carries `image_packages`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm-ostree").symlink_to(STANDIN)
    (bin_dir / "rpm").symlink_to(RPM_STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(tmp_path / "rpm-ostree.json"))
    monkeypatch.setenv("RPM_STANDIN_IMAGE_PACKAGES", json.dumps({IMAGE: image_packages}))
    monkeypatch.setenv("RPM_STANDIN_LOG", str(tmp_path / "rpm.log"))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    runner = SubprocessRunner()
    lay_down(root, WITH_USBGUARD, runner)
    api = MemoryApi(
        {
            ann.CURRENT_CONFIG: "rendered-a",
            ann.DESIRED_CONFIG: "rendered-a",
            ann.STATE: "Done",
            ann.DESIRED_IMAGE: IMAGE,
        }
    )
    api.mcs["rendered-a"] = WITH_USBGUARD
    assert syncer(root, api, runner).sync(boot=True) is Result.SIMULATED_REBOOT
    runner.run(["rpm-ostree", "standin-reboot"])
    return root, api, runner


def test_an_image_carrying_the_extensions_goes_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # rpm-ostree layers nothing on an image-mode node: the packages are the image's, rpm finds them
    root, api, runner = _booted_into_image(tmp_path, monkeypatch, ["usbguard"])
    assert syncer(root, api, runner).sync(boot=True) is Result.IDLE
    assert (api.history[-1][ann.STATE], api.history[-1][ann.CURRENT_IMAGE]) == ("Done", IMAGE)
    asked = [json.loads(line) for line in (tmp_path / "rpm.log").read_text().splitlines()]
    assert asked == [["--root", str(root), "-q", "usbguard"]]  # the sandbox's database, by name


def test_an_image_without_the_extensions_is_not_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, api, runner = _booted_into_image(tmp_path, monkeypatch, [])
    with pytest.raises(McdError) as failed:
        syncer(root, api, runner).sync(boot=True)
    assert str(failed.value) == (
        'extension package verification failed: extension "usbguard" verification failed: no valid '
        "package set is fully installed. Tried 1 package set(s), missing packages per set: [[usbguard]]"
    )
    assert api.history[-1][ann.STATE] != "Done"
