"""Upstream's values for mcd_update_state and mcd_local_unsupported_packages
(pkg/daemon/daemon.go updateConfigAndState and getUnsupportedPackages)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.metrics import Metrics, update_label
from mcd.agent.sync import Result
from mcd.host.root import HostRoot
from mcd.host.rpmostree import parse_status, unsupported_packages
from mcd.node import annotations as ann
from mcd.node.errors import McdError

POLICY = "/etc/containers/policy.json"
OLD = mc_object("rendered-old", files=[ign_file(POLICY, "{}\n")])
NEW = mc_object("rendered-new", files=[ign_file(POLICY, '{"default": []}\n')])
UPDATING = {ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: "rendered-new", ann.STATE: "Done"}


def _samples(m: Metrics, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for f in m.registry.collect() for s in f.samples if s.name == name]


def test_the_config_label_is_upstreams_current_name() -> None:
    assert update_label("rendered-a", "") == "MachineConfig: rendered-a"
    image = "quay.io/openshift/os@sha256:" + "a" * 64
    assert update_label("rendered-a", image) == f"MachineConfig: rendered-a / Image: {image}"


def test_done_sets_the_update_state_with_upstreams_label(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    api = MemoryApi(UPDATING)
    api.mcs["rendered-new"] = NEW
    s = syncer(root, api)
    assert s.sync(boot=False) is Result.IDLE
    [(labels, _)] = _samples(s.metrics, "mcd_update_state")
    assert labels == {"config": "MachineConfig: rendered-new", "err": ""}


def test_a_failed_uncordon_sets_the_error_with_no_config(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    api = MemoryApi(UPDATING)
    api.mcs["rendered-new"] = NEW
    s = syncer(root, api)
    failed = "failed to uncordon node: worker-0 after 10 minutes. Please see machine-config-controller logs …"
    s.drainer.uncordon.side_effect = McdError(failed)  # type: ignore[attr-defined]
    with pytest.raises(McdError):
        s.sync(boot=False)
    [(labels, _)] = _samples(s.metrics, "mcd_update_state")
    assert labels == {"config": "", "err": failed}


def _deployment(booted: bool, **requested: list[str]) -> dict[str, Any]:
    return {"id": "d", "osname": "fedora-coreos", "checksum": "c" * 64, "booted": booted,
            **{k.replace("_", "-"): v for k, v in requested.items()}}  # fmt: skip


STATUS = {
    "deployments": [
        _deployment(False, requested_packages=["strace", "htop", "tmux"]),  # staged: not counted
        _deployment(
            True,
            requested_packages=["usbguard", "strace"],
            requested_local_packages=["local-thing"],
            requested_local_fileoverride_packages=["override-thing"],
            requested_base_removals=["moby-engine"],
            requested_base_local_replacements=["kernel-devel", "replaced"],
        ),
    ]
}


def test_unsupported_packages_are_the_booted_changes_no_extension_installs() -> None:
    status = parse_status(json.dumps(STATUS))
    # usbguard and kernel-devel are supported extensions' packages; the rest are counted
    assert unsupported_packages(status.booted) == [
        "strace", "local-thing", "override-thing", "moby-engine", "replaced",
    ]  # fmt: skip


def test_the_count_is_read_from_rpm_ostree_status_on_a_coreos_root(tmp_path: Path) -> None:
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    runner = RecordingRunner().expect(["rpm-ostree", "status", "--json"], stdout=json.dumps(STATUS))
    assert NodeApplier(HostRoot(root), runner).unsupported_packages() == 5
    failing = RecordingRunner().expect(["rpm-ostree", "status", "--json"], 1, stderr="error: denied")
    assert NodeApplier(HostRoot(root), failing).unsupported_packages() == 0  # upstream: 0 on failure
    plain = make_sandbox_root(tmp_path / "plain")
    assert NodeApplier(HostRoot(plain), RecordingRunner()).unsupported_packages() == 0  # no rpm-ostree
