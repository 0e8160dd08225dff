"""The OS step updates a Secure Boot host's bootloader before it rebases (spec §5.2 step 1), on a
CoreOS sandbox with the rpm-ostree stand-in; a failed bootloader update does not stop the rebase."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from builders import mc_object
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.oncefrom import run_once_from
from mcd.host.bootloader import UPDATE_SERVICE, Bootloader
from mcd.host.root import HostRoot
from mcd.host.runner import CommandError, CommandResult, SubprocessRunner
from mcd.update.transaction import Host

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
IMAGE = "quay.io/openshift/os@sha256:" + "d" * 64
EL96 = 'ID="rhcos"\nVARIANT_ID=coreos\nRHEL_VERSION="9.6"\n'


class NodeCommands:
    """The node's mokutil and systemctl: each call noted with the rebases rpm-ostree had run by then."""

    def __init__(self, state: Path, *, unit_fails: bool = False) -> None:
        self.state, self.unit_fails = state, unit_fails
        self.seen: list[tuple[tuple[str, ...], int]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        calls = json.loads(self.state.read_text())["standin"]["calls"] if self.state.exists() else []
        self.seen.append((tuple(argv), sum(c["argv"][0] == "rebase" for c in calls)))
        if argv[0] in ("systemctl", "systemd-run") and self.unit_fails:
            raise CommandError(CommandResult(tuple(argv), 1, "", "Job failed"))
        if argv[0] == "podman":
            raise FileNotFoundError(2, "No such file or directory: podman")
        return CommandResult(tuple(argv), 0, "SecureBoot enabled\n" if argv[0] == "mokutil" else "", "")


def _update(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: NodeCommands) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm-ostree").symlink_to(STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(commands.state))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    host = Host.for_root(HostRoot(root), SubprocessRunner())
    assert host.bootloader is None  # a sandbox is no running system: it has no bootloader of its own
    host.bootloader = Bootloader(commands, HostRoot(root), machine="x86_64", os_release=EL96)
    path = tmp_path / "rendered-a.json"
    path.write_text(json.dumps(mc_object("rendered-a", osImageURL=IMAGE)))
    run_once_from(host, str(path), skip_reboot=True)
    state: dict[str, Any] = json.loads(commands.state.read_text())
    return next(d for d in state["deployments"] if d["staged"])


def test_the_bootloader_is_updated_before_the_rebase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = NodeCommands(tmp_path / "rpm-ostree.json")
    staged = _update(tmp_path, monkeypatch, commands)
    assert commands.seen == [(("mokutil", "--sb-state"), 0), (("systemctl", "start", UPDATE_SERVICE), 0)]
    assert staged["container-image-reference"] == f"ostree-unverified-registry:{IMAGE}"


def test_a_failed_bootloader_update_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = NodeCommands(tmp_path / "rpm-ostree.json", unit_fails=True)
    staged = _update(tmp_path, monkeypatch, commands)  # the pull from the image fails too
    assert [argv[0] for argv, _ in commands.seen] == ["mokutil", "systemctl", "podman", "systemd-run"]
    assert staged["container-image-reference"] == f"ostree-unverified-registry:{IMAGE}"
