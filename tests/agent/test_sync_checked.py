"""The sync hands the config its on-disk check passed to the update's probe (in process)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from builders import ign_file, mc_object
from harness import make_root
from recording import RecordingRunner

from mcd.agent.node_apply import NodeApplier
from mcd.agent.sync import Syncer
from mcd.config.machineconfig import MachineConfig
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.planner.nodefacts import Facts

OLD = mc_object("rendered-old", files=[ign_file("/etc/mcd-test/a.conf", "a1")])
NEW = mc_object("rendered-new", files=[ign_file("/etc/mcd-test/a.conf", "a2")])


class Stop(Exception):
    """Ends the update right after the probe: only its arguments are under test."""


class RecordingApplier(NodeApplier):
    def __init__(self, root: Path) -> None:
        super().__init__(HostRoot(root), RecordingRunner())
        self.checked: list[MachineConfig | None] = []
        self.checks: list[MachineConfig] = []

    def check(self, mc: MachineConfig, *, only: Collection[str] | None = None) -> str | None:
        self.checks.append(mc)
        return super().check(mc, only=only)

    def facts(
        self, old: MachineConfig, new: MachineConfig, topology: str, *, checked: MachineConfig | None = None
    ) -> Facts:
        assert old is self.disk_config()
        self.checked.append(checked)
        raise Stop


class Api:
    def get_machineconfig_json(self, name: str) -> tuple[dict[str, Any], bytes | None]:
        assert name == "rendered-new"
        text = json.dumps(NEW).encode()
        return json.loads(text), text

    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None:
        return None


def _syncer(applier: NodeApplier) -> Syncer:
    writer = mock.MagicMock()
    writer.name = "worker-0"
    writer.node.return_value = ann.NodeView(
        "worker-0",
        {ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: "rendered-new", ann.STATE: "Done"},
    )
    syncer = Syncer(
        api=Api(),
        writer=writer,
        events=mock.MagicMock(),
        metrics=mock.MagicMock(),
        applier=applier,
        drainer=mock.MagicMock(),
    )
    return syncer


@pytest.mark.parametrize("booting", [False, True], ids=["preflight", "boot"])
def test_the_checked_config_reaches_the_probe(tmp_path: Path, booting: bool) -> None:
    applier = RecordingApplier(make_root(tmp_path, OLD))
    with pytest.raises(Stop):
        _syncer(applier).sync(boot=booting)
    assert len(applier.checks) == 1
    assert applier.checked == [applier.checks[0]]
    assert applier.checks[0] is applier.disk_config()


def test_without_a_check_the_probe_reads_the_disk(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    (root / "run/machine-config-daemon-force").parent.mkdir(parents=True, exist_ok=True)
    (root / "run/machine-config-daemon-force").touch()
    applier = RecordingApplier(root)
    with pytest.raises(Stop):
        _syncer(applier).sync(boot=False)
    assert (applier.checks, applier.checked) == ([], [None])
