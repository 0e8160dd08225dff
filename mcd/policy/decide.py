"""Node disruption decisions: the actions a changed file, unit or SSH key set calls for. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from mcd.config.record import record
from mcd.policy.action import drain_required, from_api
from mcd.policy.model import NONE, REBOOT, Action, ClusterPolicies, FilePolicy, go_clean

# --------------------------------------------------------------------------------------------
# Node disruption decisions
# --------------------------------------------------------------------------------------------


@record(init=False)
class Decision:
    """The actions one changed thing (file, unit, SSH keys) contributes, and the rule that gave them."""

    actions: tuple[Action, ...]
    rule: str
    # False when no policy matched and the default Reboot applied
    matched: bool = True

    def __init__(self, actions: tuple[Action, ...], rule: str, matched: bool = True) -> None:
        # one dict update instead of a frozen setattr per field: one per changed thing
        self.__dict__.update(actions=actions, rule=rule, matched=matched)


# the actions of a change no policy matches (one immutable value for all of them)
_REBOOT = (Action(REBOOT),)


def _is_clean(path: str) -> bool:
    """Whether `go_clean(path) == path` is certain without cleaning: absolute, no "//", no
    component starting with "." (so no "." or ".."), no trailing slash: every path a parsed
    config declares but hidden files, which are cleaned as before."""
    return path[:1] == "/" and "//" not in path and "/." not in path and path[-1] != "/"


def go_dir(path: str) -> str:
    """Go's ``filepath.Dir``: everything before the last slash, cleaned."""
    return go_clean(path[: path.rfind("/") + 1])


def file_decision(path: str, policies: ClusterPolicies) -> Decision:
    """Actions for a changed file: the policy with the longest path equal to it or a parent of it.

    Parents match at any depth; equal-length ties go to the earlier entry; no match ⇒ Reboot.
    """
    best: FilePolicy | None = None
    # A parent matches as upstream IsSubdirectory: clean both, then a plain string-prefix test on
    # "dir/"; a policy path "/" therefore never matches as a parent (its prefix would be "//").
    target = path if _is_clean(path) else go_clean(path)  # cleaned once for all policies
    if path not in policies.file_paths and not target.startswith(policies.file_prefixes):
        return Decision(_REBOOT, f"no policy for {path}: reboot", matched=False)
    for policy in policies.files:
        # Length is compared on the raw policy path, and only a strictly longer one wins, as upstream.
        if (path == policy.path or target.startswith(policy.prefix)) and (
            best is None or len(policy.path) > len(best.path)
        ):
            best = policy
    if best is None:
        return Decision(_REBOOT, f"no policy for {path}: reboot", matched=False)
    return Decision(best.actions, f"{best.origin} policy {best.path}")


def unit_decision(name: str, policies: ClusterPolicies) -> Decision:
    """Actions for a changed (added, updated or removed) unit: exact name match; none ⇒ Reboot."""
    for policy in policies.units:
        if policy.name == name:
            return Decision(policy.actions, f"unit policy {name} ({policy.origin})")
    return Decision(_REBOOT, f"no policy for unit {name}: reboot", matched=False)


def sshkey_decision(policies: ClusterPolicies) -> Decision:
    """Actions for a passwd (SSH keys / password hash) change: the sshkey policy."""
    return Decision(policies.sshkey, f"sshkey policy ({policies.sshkey_origin})")


def combine_actions(actions: Iterable[Action]) -> tuple[Action, ...]:
    """Fold the per-path action lists (already concatenated in order) into the final list.

    Any Reboot ⇒ ``(Reboot,)``. If None appears with any other action, the Nones are dropped; if
    only Nones appear ⇒ ``(None,)``. Otherwise the list is kept as is: same order, duplicates kept
    (two files reloading crio reload it twice, as upstream). An empty list stays empty, as upstream
    (possible only with an empty policy action list; `mcd.planner.plan` maps "nothing changed" to
    None itself).
    """
    collected = tuple(actions)
    types = {a.type for a in collected}
    if REBOOT in types:
        return (Action(REBOOT),)
    if NONE in types:
        if types - {NONE}:
            return tuple(a for a in collected if a.type != NONE)
        return (Action(NONE),)
    return collected


def actions_for_changes(
    files: Iterable[str], units: Iterable[str], passwd_changed: bool, policies: ClusterPolicies
) -> tuple[tuple[Action, ...], tuple[Decision, ...]]:
    """Final NDP actions for changed file paths, unit names and an SSH/passwd change, plus why.

    Per-path part only (see the module docstring): files first, then units, then sshkey.
    """
    decisions = (
        *(file_decision(p, policies) for p in files),
        *(unit_decision(u, policies) for u in units),
        *((sshkey_decision(policies),) if passwd_changed else ()),
    )
    return combine_actions(a for d in decisions for a in d.actions), decisions


def ndp_drain_required(actions: Sequence[Action], registries_change_safe: Callable[[], bool]) -> bool:
    """Whether the node must be drained before applying `actions` (`action.drain_required`).

    Reboot or Drain ⇒ yes. Else Special (registries.conf) ⇒ only if the registries.conf change is
    not safe — `registries_change_safe` is called only then (it may parse TOML; the caller folds in
    the image-registry drain-override ConfigMap). Anything else ⇒ no.
    """
    # registries_changed: Special is registries.conf's own policy, so the change is a given
    typed, safe = from_api(actions), registries_change_safe
    return drain_required(typed, legacy=False, registries_changed=True, registries_change_safe=safe)
