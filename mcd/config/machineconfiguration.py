"""Loading the `MachineConfiguration` object (operator.openshift.io/v1) a plan reads. Pure: no I/O.

The object carries the node disruption policy (parsed by `mcd.policy`) and the
`irreconcilableValidationOverrides` the reconcilability check honours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.load import load_objects

KIND = "MachineConfiguration"


@dataclass(frozen=True)
class MachineConfiguration:
    """The one MachineConfiguration of a file: where it sits in the file, the object, its overrides."""

    source: str
    path: JsonPath
    obj: Mapping[str, Any]
    # spec.irreconcilableValidationOverrides.storage: storage sections allowed to change in place
    storage_overrides: tuple[str, ...]


def load_machineconfiguration(data: bytes, source: str) -> MachineConfiguration:
    """The single MachineConfiguration in `data` (YAML or JSON, lists too); InputError naming `source`."""
    found = [(path, obj) for path, obj in load_objects(data, source) if obj.get("kind") == KIND]
    if len(found) != 1:
        raise InputError(source, [Finding((), f"expected one {KIND}, found {len(found)}")])
    path, obj = found[0]
    return MachineConfiguration(source, path, obj, _storage_overrides(obj))


def _storage_overrides(obj: Mapping[str, Any]) -> tuple[str, ...]:
    spec = obj.get("spec") or {}
    ivo = spec.get("irreconcilableValidationOverrides") if isinstance(spec, Mapping) else None
    storage = ivo.get("storage") if isinstance(ivo, Mapping) else None
    return tuple(s for s in storage if isinstance(s, str)) if isinstance(storage, list) else ()
