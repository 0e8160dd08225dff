"""The legacy post-config action table (firstboot, once-from, HyperShift). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from mcd.config.record import record
from mcd.policy.action import (
    LEGACY_NONE,
    LEGACY_REBOOT,
    LEGACY_RELOAD_CRIO,
    LEGACY_RESTART_CRIO,
    drain_required,
    from_legacy,
)
from mcd.policy.decide import go_dir
from mcd.policy.model import REGISTRIES_CONF

# --------------------------------------------------------------------------------------------
# Legacy table (firstboot, once-from, HyperShift)
# --------------------------------------------------------------------------------------------

_LEGACY_NO_CHANGE_FILES = ("/etc/kubernetes/kubelet-ca.crt", "/var/lib/kubelet/config.json")
_LEGACY_RELOAD_FILES = (
    REGISTRIES_CONF,
    "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
    "/etc/containers/policy.json",
)
_LEGACY_RELOAD_DIRS = ("/etc/containers/registries.d",)
_LEGACY_RESTART_FILES = ("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",)
_LEGACY_NO_CHANGE_DIRS = ("/etc/nmstate/openshift",)


@record
class LegacyDecision:
    """The legacy action for one changed file; `action` None means "leaves the result unchanged"."""

    action: str | None
    rule: str


def legacy_file_decision(path: str) -> LegacyDecision:
    """Legacy action for one changed file path (rules tried in upstream's order).

    Directory rules match direct children only (the cleaned parent directory must equal the rule),
    unlike NDP's any-depth parent matching.
    """
    parent = go_dir(path)
    if path in _LEGACY_NO_CHANGE_FILES:
        return LegacyDecision(None, f"legacy: {path} needs no action")
    if path in _LEGACY_RELOAD_FILES:
        return LegacyDecision(LEGACY_RELOAD_CRIO, f"legacy: {path}: reload crio")
    if parent in _LEGACY_RELOAD_DIRS:
        return LegacyDecision(LEGACY_RELOAD_CRIO, f"legacy: file in {parent}: reload crio")
    if path in _LEGACY_RESTART_FILES:
        return LegacyDecision(LEGACY_RESTART_CRIO, f"legacy: {path}: restart crio")
    if parent in _LEGACY_NO_CHANGE_DIRS:
        return LegacyDecision(None, f"legacy: file in {parent} needs no action")
    return LegacyDecision(LEGACY_REBOOT, f"legacy: no rule for {path}: reboot")


def combine_legacy(decisions: Iterable[LegacyDecision]) -> list[str]:
    """Fold legacy decisions as upstream does while walking the changed files.

    Start ``["none"]``; reload crio replaces the result unless restart crio was already chosen;
    restart crio replaces it; the first reboot ends the walk with ``["reboot"]``.
    """
    actions = [LEGACY_NONE]
    for decision in decisions:
        if decision.action in (None, LEGACY_NONE):
            continue
        if decision.action == LEGACY_RELOAD_CRIO:
            if LEGACY_RESTART_CRIO not in actions:
                actions = [LEGACY_RELOAD_CRIO]
        elif decision.action == LEGACY_RESTART_CRIO:
            actions = [LEGACY_RESTART_CRIO]
        elif decision.action == LEGACY_REBOOT:
            return [LEGACY_REBOOT]
        else:
            raise ValueError(f"unknown legacy action {decision.action!r}")
    return actions


def legacy_actions_for_files(paths: Iterable[str]) -> tuple[list[str], tuple[LegacyDecision, ...]]:
    """Legacy actions for changed file paths, plus the per-path decisions (per-path part only)."""
    decisions = tuple(legacy_file_decision(p) for p in paths)
    return combine_legacy(decisions), decisions


def legacy_drain_required(
    actions: Sequence[str], registries_changed: bool, registries_change_safe: Callable[[], bool]
) -> bool:
    """Whether the node must be drained before applying legacy `actions` (`action.drain_required`).

    reboot ⇒ yes; reload/restart crio ⇒ only when registries.conf changed and the change is not
    safe; none ⇒ no; an empty list ⇒ yes, upstream's safe default.
    """
    return drain_required(
        from_legacy(actions),
        legacy=True,
        registries_changed=registries_changed,
        registries_change_safe=registries_change_safe,
    )
