"""Can an update be applied in place? Upstream's reconcilability rules. Pure: no I/O.

Upstream stops at the first reason; mcd lists every reason it finds, in upstream's order, so
the first one is exactly what upstream would report and the rest save the admin a round trip.
"""

from __future__ import annotations

from collections.abc import Collection

from mcd.config.findings import Finding
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig
from mcd.config.overrides import OVERRIDE_DISKS, OVERRIDE_FILESYSTEMS, OVERRIDE_RAID

CORE_USER = "core"
FORCEFILE = "/run/machine-config-daemon-force"
UNSUPPORTED_USER = "ignition passwd user section contains unsupported changes"
FIPS_MESSAGE = "detected change to FIPS flag; refusing to modify FIPS on a running cluster"


def unreconcilable_reason(old_name: str, new_name: str, error: str) -> str:
    """The node `reason` annotation upstream writes for an unreconcilable update."""
    return (
        f"can't reconcile config {old_name} with {new_name}: configs {old_name}, {new_name} "
        f"are not reconcilable: {error}"
    )


def _details(findings: Collection[Finding]) -> str:
    return "; ".join(f.message for f in findings if f.severity == "error")


def reconcile(
    old: MachineConfig,
    new: MachineConfig,
    storage_overrides: Collection[str] = (),
    node_fips: bool | None = None,
) -> list[str]:
    """Every reason the update from `old` to `new` cannot be applied in place (empty: it can)."""
    errors: list[str] = []
    # the old config is held to parsing only: upstream does not re-run the new-config rules
    # (modes, sources) on what a node already runs
    old_cfg = old.config or (old.ignition.partial if old.ignition.stage == "validate" else None)
    if old_cfg is None:
        errors.append(
            f'parsing old Ignition config from machineconfig "{old.name}" failed: '
            f"failed to parse Ignition config: {_details(old.ignition.findings)}"
        )
    if new.config is None:
        if new.ignition.stage == "validate":
            errors.append(
                f'validating new Ignition config from machineconfig "{new.name}" failed: '
                f"{_details(new.ignition.findings)}"
            )
        else:
            errors.append(
                f'parsing new Ignition config from machineconfig "{new.name}" failed: '
                f"failed to parse Ignition config: {_details(new.ignition.findings)}"
            )
    # a new config with only semantic errors is still compared, to report every reason at once
    new_cfg = new.config or new.ignition.partial
    if old_cfg is not None and new_cfg is not None:
        prefix = f'new machineconfig "{old.name}" is not reconcilable against "{new.name}": '
        errors.extend(
            prefix + e for e in config_changes_errors(old, new, old_cfg, new_cfg, storage_overrides)
        )
    elif old.fips != new.fips:
        errors.append(
            f'new machineconfig "{old.name}" is not reconcilable against "{new.name}": {FIPS_MESSAGE}'
        )
    if node_fips is not None and node_fips != new.fips:
        # the daemon's own check against /proc/sys/crypto/fips_enabled (a fact given by the caller)
        errors.append(FIPS_MESSAGE)
    return errors


def config_changes_errors(
    old_mc: MachineConfig,
    new_mc: MachineConfig,
    old: IgnitionConfig,
    new: IgnitionConfig,
    storage_overrides: Collection[str],
) -> list[str]:
    """Upstream's isConfigReconcilable checks, in its order."""
    errors: list[str] = []
    if old.passwd != new.passwd:
        errors.extend(f"invalid passwd change(s): {e}" for e in _passwd_errors(old, new))
    if old.kernel_arguments != new.kernel_arguments:
        errors.append("ignition kargs section contains changes")
    if OVERRIDE_DISKS not in storage_overrides and old.disks != new.disks:
        errors.append("ignition disks section contains changes")
    if OVERRIDE_FILESYSTEMS not in storage_overrides and old.filesystems != new.filesystems:
        errors.append("ignition filesystems section contains changes")
    if OVERRIDE_RAID not in storage_overrides and old.raid != new.raid:
        errors.append("ignition raid section contains changes")
    if old.directories != new.directories:
        errors.append("ignition directories section contains changes")
    # removing every link is allowed (old configs shipped links that were later dropped)
    if old.links != new.links and new.links is not None:
        errors.append("ignition links section contains changes")
    for f in new.files:
        if f.append:
            errors.append(f"ignition file {f.path} includes append")
        if f.path == FORCEFILE:
            errors.append(f"cannot create {FORCEFILE} via Ignition")
    if old_mc.fips != new_mc.fips:
        errors.append(FIPS_MESSAGE)
    return errors


def _passwd_errors(old: IgnitionConfig, new: IgnitionConfig) -> list[str]:
    if old.groups != new.groups:
        return ["ignition Passwd Groups section contains changes"]
    if old.users == new.users:
        return []
    if any(u.name != CORE_USER for u in new.users):
        return [f"{UNSUPPORTED_USER}: non-core user"]
    if not new.users:
        # no users does not mean "delete the user": the keys file is emptied instead
        return []
    # upstream inspects only the last entry of the list
    last = new.users[-1]
    if last.password_hash is None and not last.ssh_authorized_keys:
        return [f"{UNSUPPORTED_USER}: user must be core and have 1 or more sshKeys"]
    if last.extra is not None:
        return ["SSH keys and password hash are not reconcilable"]
    return []
