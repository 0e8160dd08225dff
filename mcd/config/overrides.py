"""`MachineConfiguration` `spec.irreconcilableValidationOverrides`: which install-time storage
sections may change on a running node. Pure: no I/O.

Upstream's API (openshift/api) allows `storage` to list `Disks`, `FileSystems` and `Raid`; the
API server refuses any other value, so mcd reports one as an error, located.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mcd.config.findings import Finding

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

OVERRIDE_DISKS, OVERRIDE_FILESYSTEMS, OVERRIDE_RAID = "Disks", "FileSystems", "Raid"
STORAGE_OVERRIDES = (OVERRIDE_DISKS, OVERRIDE_FILESYSTEMS, OVERRIDE_RAID)


def storage_overrides(obj: Mapping[str, Any]) -> tuple[list[str], list[Finding]]:
    """The storage overrides of a MachineConfiguration object, and findings about bad values."""
    spec = obj.get("spec")
    overrides = spec.get("irreconcilableValidationOverrides") if isinstance(spec, Mapping) else None
    if overrides is None:
        return [], []
    where = ("spec", "irreconcilableValidationOverrides")
    if not isinstance(overrides, Mapping):
        return [], [Finding(where, "expected an object")]
    storage = overrides.get("storage")
    if storage is None:
        return [], []
    if not isinstance(storage, list):
        return [], [Finding((*where, "storage"), "expected a list")]
    found: list[str] = []
    findings: list[Finding] = []
    allowed = ", ".join(f'"{v}"' for v in STORAGE_OVERRIDES)
    for i, value in enumerate(storage):
        if value in STORAGE_OVERRIDES:
            found.append(value)
        else:
            # the API server's wording
            shown = json.dumps(value)
            findings.append(
                Finding((*where, "storage", i), f"Unsupported value: {shown}: supported values: {allowed}")
            )
    return found, findings
