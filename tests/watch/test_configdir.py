"""MachineConfigs from a mounted directory: one consistent snapshot per read while the kubelet swaps
`..data`, and a grace period that turns a burst of updates into one."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from atomicwriter import publish
from builders import ign_file, mc_object

from mcd.agent.watch.configdir import ConfigDirError, ConfigDirSource, read_snapshot


def test_a_hundred_quick_swaps_never_give_a_mixed_set(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    publish(d, {"a.yaml": "0", "b.yaml": "0", "desiredConfig": "0"})
    done = threading.Event()

    def swap() -> None:
        for n in range(1, 101):
            publish(d, {"a.yaml": str(n), "b.yaml": str(n), "desiredConfig": str(n)})
        done.set()

    writer = threading.Thread(target=swap)
    writer.start()
    seen: set[str] = set()
    reads = 0
    while not done.is_set() or reads == 0:
        snap = read_snapshot(d)
        values = {snap.files["a.yaml"], snap.files["b.yaml"], snap.files["desiredConfig"]}
        assert len(values) == 1, f"mixed set: {snap.files}"
        seen |= {v.decode() for v in values}
        reads += 1
    writer.join()
    assert read_snapshot(d).files["a.yaml"] == b"100"
    assert len(seen) > 1  # the reader did run while the versions changed


def test_snapshot_parses_machineconfigs_policies_and_the_desired_name(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    a = mc_object("rendered-a", files=[ign_file("/etc/a", "a")])
    b = mc_object("rendered-b", files=[ign_file("/etc/a", "b")])
    ndp = {"files": [{"path": "/etc/a", "actions": [{"type": "None"}]}]}
    mcfg = {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"}, "spec": {"nodeDisruptionPolicy": ndp,
            "irreconcilableValidationOverrides": {"storage": ["Raid"]}}}  # fmt: skip
    publish(d, {"a.json": json.dumps(a), "b.yaml": json.dumps(b), "policy.yaml": json.dumps(mcfg),
                "desiredConfig": "rendered-b\n", "README": "ignored"})  # fmt: skip
    parsed = read_snapshot(d).parse()
    assert parsed.desired == "rendered-b"
    assert sorted(parsed.machineconfigs) == ["rendered-a", "rendered-b"]
    assert any(f.path == "/etc/a" and f.origin == "user" for f in parsed.policies.files)
    assert parsed.storage_overrides == ("Raid",)


def test_a_machineconfiguration_the_api_would_refuse_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    mcfg = {"kind": "MachineConfiguration", "metadata": {"name": "cluster"},
            "spec": {"irreconcilableValidationOverrides": {"storage": ["Partitions"]}}}  # fmt: skip
    publish(d, {"a.json": json.dumps(mc_object("rendered-a")), "policy.yaml": json.dumps(mcfg)})
    with pytest.raises(ConfigDirError) as info:
        read_snapshot(d).parse()
    assert str(info.value) == (
        f"{read_snapshot(d).source}: MachineConfiguration cluster: spec.irreconcilableValidationOverrides"
        '.storage[0]: Unsupported value: "Partitions": supported values: "Disks", "FileSystems", "Raid"'
    )


def test_a_desired_config_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    publish(d, {"a.json": json.dumps(mc_object("rendered-a")), "desiredConfig": "rendered-x"})
    with pytest.raises(ConfigDirError, match='desired config "rendered-x" is not among its MachineConfigs'):
        read_snapshot(d).parse()


def test_a_plain_directory_is_read_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(mc_object("rendered-a")))
    assert read_snapshot(tmp_path).parse().desired == "rendered-a"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_within_the_grace_period_is_delivered_once_as_its_last_version(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    clock = Clock()
    source = ConfigDirSource(d, lambda: None, grace=5.0, clock=clock)
    for n in range(5):
        publish(d, {"desiredConfig": f"v{n}"})
        source.changed()
        clock.now += 1.0
        assert source.take() is None
    clock.now += 4.0
    snap = source.take()
    assert snap is not None and snap.files["desiredConfig"] == b"v4"
    assert source.take() is None and source.due_in() is None


def test_an_unchanged_or_reverted_set_causes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    clock = Clock()
    source = ConfigDirSource(d, lambda: None, grace=1.0, clock=clock)
    publish(d, {"desiredConfig": "v1"})
    source.changed()
    clock.now += 1.0
    assert source.take() is not None
    publish(d, {"desiredConfig": "v1"})  # a new version with the same content
    source.changed()
    assert source.due_in() is None
    publish(d, {"desiredConfig": "v2"})
    source.changed()
    publish(d, {"desiredConfig": "v1"})  # and back within the grace period
    source.changed()
    clock.now += 10.0
    assert source.take() is None


def test_a_directory_that_never_settles_is_still_applied(tmp_path: Path) -> None:
    d = tmp_path / "cm"
    clock = Clock()
    source = ConfigDirSource(d, lambda: None, grace=1.0, clock=clock)
    for n in range(20):
        publish(d, {"desiredConfig": f"v{n}"})
        source.changed()
        if source.take() is not None:
            break
        clock.now += 0.5
    else:
        pytest.fail("never delivered")
    assert n < 20
