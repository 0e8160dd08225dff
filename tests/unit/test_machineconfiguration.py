"""Loading the MachineConfiguration object a plan reads (config layer) and its policies."""

from __future__ import annotations

import pytest

from mcd.config.findings import InputError
from mcd.config.machineconfiguration import load_machineconfiguration
from mcd.policy import DEFAULT_POLICIES, policies_of

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
    irreconcilableValidationOverrides: {storage: [disks, 7, raid]}
    nodeDisruptionPolicy:
      files: [{path: /etc/foo, actions: [{type: Bogus}]}]
"""


def test_the_one_machineconfiguration_of_a_list_with_its_storage_overrides() -> None:
    loaded = load_machineconfiguration(MC, "cluster.yaml")
    assert loaded.path == ("items", 1)
    assert loaded.storage_overrides == ("disks", "raid")  # non-strings are ignored


def test_bad_policies_are_located_in_the_file() -> None:
    with pytest.raises(InputError) as info:
        policies_of(load_machineconfiguration(MC, "cluster.yaml"))
    assert info.value.source == "cluster.yaml"
    assert info.value.findings[0].path[:4] == ("items", 1, "spec", "nodeDisruptionPolicy")


def test_no_machineconfiguration_is_an_input_error() -> None:
    with pytest.raises(InputError, match="expected one MachineConfiguration, found 0"):
        load_machineconfiguration(b"kind: MachineConfig\n", "x.yaml")
    plain = load_machineconfiguration(b"kind: MachineConfiguration\n", "m.yaml")
    assert policies_of(plain) == DEFAULT_POLICIES
    assert plain.storage_overrides == ()
