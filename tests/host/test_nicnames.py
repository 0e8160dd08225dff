"""NIC-name pinning (mcd.host.nicnames, spec §2.2): EL 9 pins with `nmstatectl persist-nic-names`
and appends the kernel arguments it asks for; EL 10 cleans up (its failure ignored); any other OS
is left alone. nmstatectl is the node's, pointed at the root it runs in."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.main import main
from mcd.host.nicnames import NicNamesError, persist_nic_names
from mcd.host.root import HostRoot
from mcd.host.rpmostree import RpmOstree
from mcd.host.runner import CommandError, CommandResult

EL9 = 'ID="rhcos"\nVARIANT_ID=coreos\nRHEL_VERSION="9.6"\n'
EL10 = 'ID="rhel"\nVARIANT_ID=coreos\nVERSION_ID="10.1"\n'
KARGS = "ifname=eth0:52:54:00:12:34:56 ifname=eth1:52:54:00:12:34:57\n"


class Node:
    """nmstatectl and rpm-ostree of a node: nmstatectl writes `kargs` to its --kargs-out file."""

    def __init__(self, root: Path, *, kargs: str = KARGS, fails: bool = False) -> None:
        self.root, self.kargs, self.fails = root, kargs, fails
        self.calls: list[list[str]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = list(argv)
        self.calls.append(args)
        if args[0] == "nmstatectl":
            if self.fails:
                raise CommandError(CommandResult(tuple(args), 1, "", "stamp file not found"))
            out = args[args.index("--kargs-out") + 1]
            inside = self.root / out.lstrip("/") if args[args.index("--root") + 1] == "/" else Path(out)
            inside.write_text(self.kargs)
        return CommandResult(tuple(args), 0, "", "")


def _root(tmp_path: Path, os_release: str) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "run").mkdir()
    (root / "etc/os-release").write_text(os_release)
    return root


def _pin(node: Node, *, chrooted: bool = False) -> list[str]:
    return persist_nic_names(node, HostRoot(node.root), RpmOstree(node), chrooted=chrooted)


def test_el9_pins_the_names_and_appends_the_kernel_arguments(tmp_path: Path) -> None:
    node = Node(_root(tmp_path, EL9))
    assert _pin(node) == KARGS.split()
    nmstate, kargs = node.calls
    assert nmstate[:4] == ["nmstatectl", "persist-nic-names", "--root", str(node.root)]
    assert nmstate[4] == "--kargs-out" and Path(nmstate[5]).parent == node.root / "run"
    assert kargs == ["rpm-ostree", "kargs", *(f"--append={k}" for k in KARGS.split())]
    assert os.listdir(node.root / "run") == []  # the kernel arguments file is gone


def test_inside_the_node_it_names_root_slash_and_a_path_of_the_node(tmp_path: Path) -> None:
    node = Node(_root(tmp_path, EL9), kargs="")
    assert _pin(node, chrooted=True) == []  # nmstatectl did everything itself: no kargs to change
    [nmstate] = node.calls
    assert nmstate[2:4] == ["--root", "/"] and nmstate[5].startswith("/run/nmstate-kargs")


def test_el10_cleans_up_and_deletes_what_was_appended(tmp_path: Path) -> None:
    node = Node(_root(tmp_path, EL10))
    _pin(node)
    nmstate, kargs = node.calls
    assert nmstate[-1] == "--cleanup"
    assert kargs == ["rpm-ostree", "kargs", *(f"--delete-if-present={k}" for k in KARGS.split())]


def test_a_failed_cleanup_is_ignored_and_a_failed_pinning_is_an_error(tmp_path: Path) -> None:
    assert _pin(Node(_root(tmp_path / "10", EL10), fails=True)) == []
    with pytest.raises(NicNamesError, match=r"^failed to run nmstatectl: "):
        _pin(Node(_root(tmp_path / "9", EL9), fails=True))


@pytest.mark.parametrize(
    "os_release",
    ['ID=fedora\nVARIANT_ID=coreos\nVERSION_ID="41"\n', 'ID="rhcos"\nRHEL_VERSION="8.6"\n', ""],
    ids=["fcos", "el8", "none"],
)
def test_any_other_os_is_left_alone(tmp_path: Path, os_release: str) -> None:
    node = Node(_root(tmp_path, os_release))
    assert _pin(node) == [] and node.calls == []


STANDINS = Path(__file__).resolve().parents[1] / "standins"


@pytest.mark.allow_commands
def test_firstboot_persist_nics_only_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`firstboot-complete-machineconfig --persist-nics`: only the pinning; the config is the next run's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("rpm-ostree", "nmstatectl"):
        (bin_dir / tool).symlink_to(STANDINS / tool)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(tmp_path / "rpm-ostree.json"))
    monkeypatch.setenv("NMSTATECTL_STANDIN_KARGS", KARGS)
    monkeypatch.setenv("NMSTATECTL_STANDIN_LOG", str(tmp_path / "nmstatectl.log"))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    (root / "etc/os-release").write_text(EL9)
    encapsulated = root / "etc/ignition-machine-config-encapsulated.json"
    encapsulated.write_text("{}")
    argv = ["firstboot-complete-machineconfig", "--root-mount", str(root), "--persist-nics"]
    assert main(argv) == 0
    assert encapsulated.read_text() == "{}"  # the OS update is the next run's
    assert len((tmp_path / "nmstatectl.log").read_text().splitlines()) == 1
    state = json.loads((tmp_path / "rpm-ostree.json").read_text())
    assert [c["argv"] for c in state["standin"]["calls"]] == [
        ["kargs", *(f"--append={k}" for k in KARGS.split())]
    ]
