"""Upstream's OS update events (spec §5.1, §12), from the plan the sync runs: pure, no I/O."""

from __future__ import annotations

from mcd.config.machineconfig import MachineConfig
from mcd.planner import steps
from mcd.planner.plan import Plan


def os_events_before(p: Plan, new: MachineConfig) -> list[tuple[str, str]]:
    """`InClusterUpgrade` and `OSUpdateStarted`, as upstream posts them before an OS change."""
    d = p.diff
    out: list[tuple[str, str]] = []
    if d.os_update or d.extensions or d.kernel_type or d.ocl_enabled:
        out.append(("InClusterUpgrade", f"Updating from oscontainer {new.os_image_url}"))
    what = [
        text
        for flag, text in (
            (d.os_update, "Upgrading OS"),
            (d.extensions, "Installing extensions"),
            (d.kernel_type, "Changing kernel type"),
            (d.kargs, "Changing kernel arguments"),
        )
        if flag
    ]
    if what:
        out.append(("OSUpdateStarted", "; ".join(what)))
    elif new.kernel_type in _REAPPLIED_KERNELS:
        # upstream re-applies a non-default kernel on every update
        out.append(("OSUpdateStarted", f"Updating to a target config with {new.kernel_type} kernel"))
    return out


OS_UPDATE_STAGED = "OSUpdateStaged"
# the kernels upstream applies again on every update, whatever changed
_REAPPLIED_KERNELS = ("realtime", "64k-pages")


def os_update_staged(p: Plan, new: MachineConfig) -> bool:
    """Whether upstream's OS step ran to its end, where it posts `OSUpdateStaged`: it runs for
    an OS change (image, extensions, kernel type, kernel arguments) or a kernel it re-applies,
    and returns early, before the event, under on-cluster layering."""
    d = p.diff
    if d.ocl_enabled:
        return False
    return d.os_update or d.extensions or d.kernel_type or d.kargs or new.kernel_type in _REAPPLIED_KERNELS


def os_events_after(p: Plan, old: MachineConfig, new: MachineConfig) -> list[tuple[str, str]]:
    """`OSUpgradeApplied`, or `OSUpgradeSkipped` when the node already booted the new image."""
    if not p.diff.os_update:
        return []
    url = new.ocl_image or new.os_image_url
    if any(isinstance(s, steps.Rebase) for s in p.steps):
        applied = f"OS upgrade applied; new MachineConfig ({new.name}) has new OS image ({url})"
        return [("OSUpgradeApplied", applied)]
    return [
        (
            "OSUpgradeSkipped",
            f"OS upgrade skipped; new MachineConfig ({new.name}) has same OS image ({url}) "
            f"as old MachineConfig ({old.name})",
        )
    ]
