"""Finding the `MachineConfiguration` object (operator.openshift.io/v1) in a file a plan reads.
Pure: no I/O.

The object carries the node disruption policy and the `irreconcilableValidationOverrides` the
reconcilability check honours; `mcd.policy.settings_of` reads both.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.load import load_objects
from mcd.config.record import record

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

KIND = "MachineConfiguration"


@record
class MachineConfiguration:
    """The one MachineConfiguration of a file: the file, where the object sits in it, the object."""

    source: str
    path: JsonPath
    obj: Mapping[str, Any]


def load_machineconfiguration(data: bytes, source: str) -> MachineConfiguration:
    """The single MachineConfiguration in `data` (YAML or JSON, lists too); InputError naming `source`."""
    found = [(path, obj) for path, obj in load_objects(data, source) if obj.get("kind") == KIND]
    if len(found) != 1:
        raise InputError(source, [Finding((), f"expected one {KIND}, found {len(found)}")])
    path, obj = found[0]
    return MachineConfiguration(source, path, obj)
