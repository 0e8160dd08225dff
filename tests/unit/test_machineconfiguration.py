"""Loading the MachineConfiguration object a plan reads (config layer), and what mcd takes from it:
its policies and storage overrides, read by one function for every caller."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.config.findings import InputError
from mcd.config.machineconfiguration import load_machineconfiguration
from mcd.policy import (
    DEFAULT_POLICIES,
    DEFAULT_SETTINGS,
    PolicyError,
    settings_from_machineconfiguration,
    settings_of,
)

MC = b"""
apiVersion: v1
kind: List
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata: {name: x}
- apiVersion: operator.openshift.io/v1
  kind: MachineConfiguration
  metadata: {name: cluster}
  spec:
    irreconcilableValidationOverrides: {storage: [Disks, Raid]}
    nodeDisruptionPolicy:
      files: [{path: /etc/foo, actions: [{type: Bogus}]}]
"""
# the same object with a valid policy
GOOD = MC.replace(b"Bogus", b"Reboot")


def test_the_one_machineconfiguration_of_a_list_with_its_storage_overrides() -> None:
    loaded = load_machineconfiguration(MC, "cluster.yaml")
    assert loaded.path == ("items", 1)
    settings = settings_of(load_machineconfiguration(GOOD, "cluster.yaml"))
    assert settings.storage_overrides == ("Disks", "Raid")
    assert any(f.path == "/etc/foo" for f in settings.policies.files)


def test_override_values_the_api_refuses_are_located_errors() -> None:
    bad = GOOD.replace(b"[Disks, Raid]", b"[disks, 7, Raid]")
    with pytest.raises(InputError) as info:
        settings_of(load_machineconfiguration(bad, "cluster.yaml"))
    assert [f.path[-1] for f in info.value.findings] == [0, 1]
    assert info.value.findings[0].path[:2] == ("items", 1)
    assert info.value.findings[0].message == (
        'Unsupported value: "disks": supported values: "Disks", "FileSystems", "Raid"'
    )


def test_bad_policies_are_located_in_the_file() -> None:
    with pytest.raises(InputError) as info:
        settings_of(load_machineconfiguration(MC, "cluster.yaml"))
    assert info.value.source == "cluster.yaml"
    assert info.value.findings[0].path[:4] == ("items", 1, "spec", "nodeDisruptionPolicy")


def test_no_machineconfiguration_is_an_input_error() -> None:
    with pytest.raises(InputError, match="expected one MachineConfiguration, found 0"):
        load_machineconfiguration(b"kind: MachineConfig\n", "x.yaml")
    plain = load_machineconfiguration(b"kind: MachineConfiguration\n", "m.yaml")
    assert settings_of(plain) == (DEFAULT_POLICIES, ())


def test_no_object_means_the_defaults() -> None:
    assert settings_from_machineconfiguration(None) == DEFAULT_SETTINGS == (DEFAULT_POLICIES, ())


def test_one_error_names_the_object_and_holds_both_parts_findings() -> None:
    obj: dict[str, Any] = {
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {
            "irreconcilableValidationOverrides": {"storage": ["Partitions"]},
            "nodeDisruptionPolicy": {"files": [{"path": "/etc/foo", "actions": [{"type": "Bogus"}]}]},
        },
    }
    with pytest.raises(PolicyError) as info:
        settings_from_machineconfiguration(obj)
    text = str(info.value)
    assert text.startswith("MachineConfiguration cluster: spec.nodeDisruptionPolicy.files[0].actions[0]")
    assert text.endswith(
        '; spec.irreconcilableValidationOverrides.storage[0]: Unsupported value: "Partitions": '
        'supported values: "Disks", "FileSystems", "Raid"'
    )
    del obj["metadata"]
    with pytest.raises(PolicyError, match=r"^MachineConfiguration: spec\."):
        settings_from_machineconfiguration(obj)
