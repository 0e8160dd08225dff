"""The OS step of an update (spec §5.1, §5.6) on a CoreOS sandbox with the rpm-ostree stand-in.

What the node boots decides the OS commands, not what the old config says: the kernel-swap
revert and the extension changes are counted against the booted deployment's package requests,
and the rebase is skipped when the booted image already is the target. OS fields the node cannot
apply fail the update before anything changes; extension packages missing from the staged
deployment afterwards fail it too, and it is rolled back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import Tree, walk

from mcd.cli.checkdisk import DiskCheck, check_disk
from mcd.cli.oncefrom import run_once_from
from mcd.config.findings import InputError
from mcd.config.ostables import DEFAULT_KERNEL_PACKAGES, REALTIME_KERNEL_PACKAGES
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.update.transaction import Host, Outcome, UpdateError

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
TXN = "/etc/machine-config-daemon/txn.json"
BOOTED = "quay.io/fedora/fedora-coreos:stable"  # the stand-in's first booted image
IMAGE_A = "quay.io/openshift/os@sha256:" + "a" * 64
STATUS = ["status", "--json"]
CLEANUP = ["cleanup", "-p"]
VERSION = ["--version"]
RT_REMOVE = [
    "override",
    "remove",
    *DEFAULT_KERNEL_PACKAGES,
    *[x for p in REALTIME_KERNEL_PACKAGES for x in ("--install", p)],
]
RT_RESET = [
    "override",
    "reset",
    *DEFAULT_KERNEL_PACKAGES,
    *[x for p in REALTIME_KERNEL_PACKAGES for x in ("--uninstall", p)],
]


class Node:
    """A CoreOS sandbox root with `rpm-ostree` on PATH being the stand-in (its state in tmp_path)."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp_path
        self.monkeypatch = monkeypatch
        self.state = tmp_path / "rpm-ostree.json"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "rpm-ostree").symlink_to(STANDIN)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(self.state))
        for name in (
            "RPMOSTREE_STANDIN_FAIL",
            "RPMOSTREE_STANDIN_FAIL_TIMES",
            "RPMOSTREE_STANDIN_BOOTED_IMAGE",
            "RPMOSTREE_STANDIN_BOOTED_KARGS",
            "RPMOSTREE_STANDIN_DROP_PACKAGES",
        ):
            monkeypatch.delenv(name, raising=False)
        self.root = make_sandbox_root(tmp_path / "root", coreos=True)

    def apply(self, obj: dict[str, Any]) -> Outcome:
        path = self.tmp / f"{obj['metadata']['name']}.json"
        path.write_text(json.dumps(obj))
        host = Host.for_root(HostRoot(self.root), SubprocessRunner())
        return run_once_from(host, str(path), skip_reboot=True)

    def reboot(self) -> None:
        SubprocessRunner().run(["rpm-ostree", "standin-reboot"])

    def deployments(self) -> list[dict[str, Any]]:
        state: dict[str, Any] = json.loads(self.state.read_text())
        result: list[dict[str, Any]] = state["deployments"]
        return result

    def staged(self) -> dict[str, Any] | None:
        return next((d for d in self.deployments() if d["staged"]), None)

    def booted(self) -> dict[str, Any]:
        return next(d for d in self.deployments() if d["booted"])

    def calls(self) -> list[list[str]]:
        if not self.state.exists():
            return []
        state: dict[str, Any] = json.loads(self.state.read_text())
        return [c["argv"] for c in state["standin"]["calls"]]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    return Node(tmp_path, monkeypatch)


def config(name: str, text: str = "a", **spec: Any) -> dict[str, Any]:
    files = [{"path": "/etc/os-step.conf", "mode": 0o644, "contents": {"source": data_url(f"{text}\n")}}]
    return mc_object(name, files=files, **spec)


def changes(calls: list[list[str]]) -> list[list[str]]:
    """The calls that can change a deployment (reads left out)."""
    return [c for c in calls if c not in (STATUS, ["kargs"])]


def _diff(got: Tree, want: Tree) -> str:
    return "\n".join(
        f"{p}: got {got.get(p)!r:.80} want {want.get(p)!r:.80}"
        for p in sorted(set(got) | set(want))
        if got.get(p) != want.get(p)
    )


# ---------------------------------------------------------------- kernel type


def test_realtime_staged_but_not_booted_then_default_needs_no_reset(node: Node) -> None:
    """The realtime swap was only staged: the booted deployment has no override to reset."""
    node.apply(config("rendered-rt", kernelType="realtime"))
    staged = node.staged()
    assert staged is not None and staged["requested-base-removals"] == sorted(DEFAULT_KERNEL_PACKAGES)
    seen = len(node.calls())

    node.apply(config("rendered-default", text="b"))
    # the old config says realtime, but what boots is the default kernel: discarding the staged
    # deployment is all it takes (a reset would fail: "No overrides for package 'kernel'")
    assert changes(node.calls()[seen:]) == [CLEANUP]
    assert node.staged() is None
    assert node.booted()["requested-base-removals"] == []


def test_realtime_booted_then_default_resets_the_booted_swap(node: Node) -> None:
    node.apply(config("rendered-rt", kernelType="realtime"))
    node.reboot()
    assert node.booted()["requested-packages"] == sorted(REALTIME_KERNEL_PACKAGES)
    seen = len(node.calls())

    node.apply(config("rendered-default", text="b"))
    assert changes(node.calls()[seen:]) == [CLEANUP, RT_RESET]
    staged = node.staged()
    assert staged is not None
    assert (staged["requested-packages"], staged["requested-base-removals"]) == ([], [])


def test_realtime_os_update_resets_before_the_rebase_and_swaps_after_kargs(node: Node) -> None:
    node.apply(config("rendered-rt", kernelType="realtime"))
    node.reboot()
    seen = len(node.calls())

    node.apply(
        config("rendered-rt-a", text="b", kernelType="realtime", osImageURL=IMAGE_A, kernelArguments=["a=1"])
    )
    assert changes(node.calls()[seen:]) == [
        CLEANUP,
        RT_RESET,
        VERSION,
        ["rebase", "--experimental", f"ostree-unverified-registry:{IMAGE_A}"],
        ["kargs", "--append=a=1"],
        RT_REMOVE,
    ]
    staged = node.staged()
    assert staged is not None
    assert staged["container-image-reference"] == f"ostree-unverified-registry:{IMAGE_A}"
    assert staged["requested-packages"] == sorted(REALTIME_KERNEL_PACKAGES)


# ---------------------------------------------------------------- rebase


def test_rebase_skipped_when_the_booted_image_is_the_target(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OCPBUGS-2757: the old config names no image (or another one), but the node boots the target."""
    monkeypatch.setenv("RPMOSTREE_STANDIN_BOOTED_IMAGE", IMAGE_A)
    outcome = node.apply(config("rendered-a", osImageURL=IMAGE_A, kernelArguments=["a=1"]))
    assert outcome.plan.diff.os_update
    assert changes(node.calls()) == [CLEANUP, ["kargs", "--append=a=1"]]
    staged = node.staged()
    assert (
        staged is not None and staged["container-image-reference"] == f"ostree-unverified-registry:{IMAGE_A}"
    )


def test_rebase_runs_when_the_booted_image_differs(node: Node) -> None:
    node.apply(config("rendered-a", osImageURL=IMAGE_A))
    assert changes(node.calls()) == [
        CLEANUP,
        VERSION,  # upstream checks rpm-ostree can rebase onto an image itself
        ["rebase", "--experimental", f"ostree-unverified-registry:{IMAGE_A}"],
    ]
    # and gives it the pull secret first (the kubelet's: no merged secret on this node)
    assert os.readlink(node.root / "run/ostree/auth.json") == "/var/lib/kubelet/config.json"


# ---------------------------------------------------------------- extensions


def test_extensions_follow_the_booted_deployment(node: Node) -> None:
    node.apply(config("rendered-ext", extensions=["usbguard", "sysstat"]))
    node.reboot()
    assert node.booted()["requested-packages"] == ["sysstat", "usbguard"]
    seen = len(node.calls())

    node.apply(config("rendered-krb", text="b", extensions=["kerberos", "sysstat"]))
    assert changes(node.calls()[seen:]) == [
        CLEANUP,
        ["update", "--install", "krb5-workstation", "--install", "libkadm5", "--uninstall", "usbguard"],
    ]
    # the staged deployment was read back to check every package is requested
    assert node.calls()[-1] == STATUS
    staged = node.staged()
    assert staged is not None and staged["requested-packages"] == ["krb5-workstation", "libkadm5", "sysstat"]


def test_unknown_extension_is_refused_and_nothing_is_written(node: Node) -> None:
    node.apply(config("rendered-a"))
    before, deployments, seen = walk(node.root), node.deployments(), len(node.calls())
    stat_before = os.stat(node.root / "etc/os-step.conf")

    # refused by the parse already, as `mcd validate` refuses it (the update's own check stays behind it)
    with pytest.raises(InputError, match=r"spec.extensions\[1\]: invalid extension 'bogus'"):
        node.apply(config("rendered-bogus", text="b", extensions=["usbguard", "bogus"]))
    after = walk(node.root)
    assert after == before, _diff(after, before)
    assert TXN not in after
    stat_after = os.stat(node.root / "etc/os-step.conf")
    # not even written and put back: the same file, untouched
    assert (stat_after.st_ino, stat_after.st_mtime_ns) == (stat_before.st_ino, stat_before.st_mtime_ns)
    assert changes(node.calls()[seen:]) == []
    assert node.deployments() == deployments


@pytest.mark.skipif(os.uname().machine in ("aarch64", "arm64"), reason="64k-pages is valid on aarch64")
def test_64k_pages_off_aarch64_fails_after_the_kernel_arguments_and_rolls_back(node: Node) -> None:
    """Upstream runs the OS commands up to the kernel switch, fails there and rolls back."""
    node.apply(config("rendered-a"))
    node.reboot()
    before, deployments, seen = walk(node.root), node.deployments(), len(node.calls())
    with pytest.raises(UpdateError) as info:
        node.apply(config("rendered-64k", text="b", kernelType="64k-pages", kernelArguments=["a=1"]))
    assert str(info.value) == (
        "update to rendered-64k failed and was rolled back: "
        "64k-pages is only supported for aarch64 architecture"
    )
    assert changes(node.calls()[seen:]) == [
        CLEANUP,
        ["kargs", "--append=a=1"],
        CLEANUP,  # the rollback discards what was staged
    ]
    after = walk(node.root)
    assert after == before, _diff(after, before)
    assert node.deployments() == deployments


def test_extension_package_missing_from_the_staged_deployment_rolls_back(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node.apply(config("rendered-a"))
    node.reboot()
    before, deployments, seen = walk(node.root), node.deployments(), len(node.calls())

    monkeypatch.setenv("RPMOSTREE_STANDIN_DROP_PACKAGES", "kata-containers")
    with pytest.raises(UpdateError) as info:
        node.apply(config("rendered-ext", text="b", extensions=["sandboxed-containers", "usbguard"]))
    assert str(info.value) == (
        "update to rendered-ext failed and was rolled back: "
        "the following extension packages are missing from the staged deployment: [kata-containers]"
    )
    assert changes(node.calls()[seen:]) == [
        CLEANUP,
        ["update", "--install", "kata-containers", "--install", "usbguard"],
        CLEANUP,  # the rollback discards what was staged
    ]
    after = walk(node.root)
    assert after == before, _diff(after, before)
    assert node.deployments() == deployments


# ---------------------------------------------------------------- Fedora CoreOS (not EL)


def test_fedora_coreos_skips_the_kernel_type_and_extensions(node: Node) -> None:
    """Upstream switches kernels and installs extensions on RHCOS/SCOS only; FCOS skips both."""
    (node.root / "etc/os-release").write_text('NAME="Fedora Linux"\nID=fedora\nVARIANT_ID=coreos\n')
    node.apply(config("rendered-a"))
    seen = len(node.calls())
    rt = config("rendered-rt", "b", kernelType="realtime", extensions=["usbguard"], kernelArguments=["a=1"])
    node.apply(rt)
    # the pending deployment is discarded and the kernel arguments still change: nothing else
    assert changes(node.calls()[seen:]) == [CLEANUP, ["kargs", "--append=a=1"]]
    staged = node.staged()
    assert staged is not None and staged.get("requested-packages", []) == []
    assert (node.root / "etc/os-step.conf").read_text() == "b\n"


def test_a_coreos_sandbox_is_rhcos(node: Node) -> None:
    """`mcd-sim sandbox --coreos` roots say RHCOS, so the kernel type is switched there."""
    assert 'ID="rhcos"' in (node.root / "usr/lib/os-release").read_text()
    node.apply(config("rendered-a"))
    seen = len(node.calls())
    node.apply(config("rendered-rt", text="b", kernelType="realtime"))
    assert changes(node.calls()[seen:]) == [CLEANUP, RT_REMOVE]


def test_every_rpm_ostree_call_names_the_client(node: Node) -> None:
    """Upstream's daemon exports RPMOSTREE_CLIENT_ID=machine-config-operator for all it runs."""
    node.apply(config("rendered-a"))
    node.apply(config("rendered-b", "b", osImageURL=IMAGE_A, kernelType="realtime", extensions=["usbguard"]))
    state: dict[str, Any] = json.loads(node.state.read_text())
    calls = state["standin"]["calls"]
    assert {c["argv"][0] for c in calls} >= {"status", "cleanup", "rebase", "override", "update"}
    assert {c["client-id"] for c in calls} == {"machine-config-operator"}


# ---------------------------------------------------------------- on-disk check of the OS image


def _check(node: Node, obj: dict[str, Any]) -> DiskCheck:
    path = node.tmp / f"check-{obj['metadata']['name']}.json"
    path.write_text(json.dumps(obj))
    return check_disk(Host.for_root(HostRoot(node.root), SubprocessRunner()), str(path))


def test_an_empty_os_image_url_is_compared_on_coreos(node: Node) -> None:
    """Upstream compares the strings: an empty osImageURL never matches a booted image."""
    node.apply(config("rendered-a"))
    result = _check(node, config("rendered-a"))
    assert result.reason() == (
        "unexpected on-disk state validating against rendered-a: "
        f'expected target osImageURL "", have "{BOOTED}"'
    )
    assert _check(node, config("rendered-a", osImageURL=BOOTED)).clean


def test_the_on_disk_reason_names_the_layered_image(node: Node) -> None:
    node.apply(config("rendered-a"))
    obj = config("rendered-a", osImageURL=BOOTED)
    obj["metadata"]["annotations"] = {"machineconfiguration.openshift.io/ocl-osimageurl": IMAGE_A}
    assert _check(node, obj).reason() == (
        f"unexpected on-disk state validating against {IMAGE_A}: "
        f'expected target osImageURL "{IMAGE_A}", have "{BOOTED}"'
    )
