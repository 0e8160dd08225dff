"""The ordered steps of an update, from the diff and the node's facts. Pure: no I/O.

Upstream's order: (forcefile consumed, drain), files, units (rewrite disables, dropins and
masks, unit files, presets, enable, disable), stale data (dropped dropins and units, then
dropped files and leaked links), the kubeconfig mode, SSH keys and passwords, then the OS step
and the post-config actions the planner adds. Where a step depends on what is on the node
(is a file already right, is there a backup to restore, is a unit enabled) the answer comes
from `Facts`; unknown facts (a plan made without a node) assume the node holds the old config.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcd.config.ignition import IgnitionConfig, Unit
from mcd.planner.diff import REMOVED, ConfigDiff
from mcd.planner.managed_paths import (
    INSTALL_HEADER,
    KUBECONFIG,
    KUBELET_CA,
    dropin_path,
    install_section,
    is_static,
    never_deleted,
    path_in_dropins,
    unit_path,
)
from mcd.planner.nodefacts import Facts
from mcd.planner.steps import (
    Chmod,
    ClearPassword,
    Disable,
    Enable,
    Mask,
    Preset,
    RemoveFile,
    RestoreOriginal,
    SetPassword,
    Step,
    Unmask,
    WriteFiles,
    WriteSshKeys,
    WriteUnitFiles,
)

CORE_USER = "core"
# what a repair of core's keys names (mcd.host.ssh.KEYS_PATH)
SSH_KEYS = "/home/core/.ssh/authorized_keys.d/ignition"


def disk_steps(
    old: IgnitionConfig,
    new: IgnitionConfig,
    d: ConfigDiff,
    facts: Facts,
    notes: list[str],
    *,
    repaired: list[str] | None = None,
) -> list[Step]:
    """Files, units, stale data, kubeconfig mode, SSH keys and passwords; `notes` gets what is skipped.

    What the config declares as the applied one did but the node no longer has (a file, unit
    file, dropin or mask edited or deleted, an enablement link gone, the SSH keys) is written
    again, and named in `repaired`: paths, unit names for an enablement, the SSH key file.
    """
    repaired = [] if repaired is None else repaired
    steps: list[Step] = []
    writes = _file_writes(new, d, facts)
    if writes:
        steps.append(WriteFiles(writes))
        modified = {c.name for c in d.file_changes}
        repaired += [p for p in writes if p not in modified]
    changed = {c.name for c in d.unit_changes}
    # the units written: the changed ones (all with the forcefile, as upstream), and the ones
    # declared as applied that drifted on the node
    repair = _drifted_units(new, changed, facts)
    units = (
        new.units if facts.forcefile else tuple(u for u in new.units if u.name in changed or u.name in repair)
    )
    steps += _unit_steps(old, units, facts, notes, repair=repair, repaired=repaired)
    if d.units:  # equal unit lists drop nothing
        steps += _stale_unit_steps(old, new, facts, changed)
    steps += _stale_file_steps(new, d, facts)
    if facts.kubeconfig_mode is not None and facts.kubeconfig_mode != 0o600:
        # upstream makes the kubelet's kubeconfig private on every update
        steps.append(Chmod(KUBECONFIG, 0o600))
    if d.passwd:
        steps += _passwd_steps(old, new, facts, notes)
    elif facts.ssh_keys_match is False and facts.has_core is not False:
        steps.append(WriteSshKeys(CORE_USER, sum(len(u.ssh_authorized_keys) for u in new.users)))
        repaired.append(SSH_KEYS)
    return steps


def _drifted_units(new: IgnitionConfig, changed: set[str], facts: Facts) -> frozenset[str]:
    """Units declared as in the applied config with a path or an enablement not as declared."""
    matching, enabled_ok = facts.matching_paths, facts.enablement_matches
    if facts.forcefile or matching is None:
        return frozenset()  # without a node, the node is assumed to hold the old config
    out: set[str] = set()
    for u in new.units:
        if u.name in changed:
            continue
        paths = [dropin_path(u.name, dr.name) for dr in u.dropins]
        if u.mask or u.contents:
            paths.append(unit_path(u.name))
        # the set lookups first: whether a unit can be enabled at all reads its text
        if any(p not in matching for p in paths) or (
            enabled_ok is not None and u.name not in enabled_ok and _has_enablement(u)
        ):
            out.add(u.name)
    return frozenset(out)


def _has_enablement(u: Unit) -> bool:
    """Whether the unit's enablement is something to repair: a unit file of ours declares one and
    can be enabled (a static unit, without an [Install] entry, has no enablement to lose)."""
    return bool(u.contents) and not u.mask and u.enabled is not None and not _static(u)


def _static(u: Unit) -> bool:
    return is_static(u.contents, tuple(d.contents for d in u.dropins))


def _file_writes(new: IgnitionConfig, d: ConfigDiff, facts: Facts) -> tuple[str, ...]:
    # the diff already compared every declaration: only added and modified ones are rewritten,
    # and those declared as in the applied config when they no longer match on disk
    matching = facts.matching_paths
    skip = KUBELET_CA if facts.skip_certificate_write else None
    if matching is None and new.unique_paths:
        # the diff lists the added and modified paths in the new config's order, each once
        return tuple(c.name for c in d.file_changes if c.change != REMOVED and c.name != skip)
    changed = {c.name for c in d.file_changes if c.change != REMOVED}
    out: list[str] = []
    for f in new.files:
        if facts.skip_certificate_write and f.path == KUBELET_CA:
            continue
        if f.path in changed or (matching is not None and f.path not in matching):
            out.append(f.path)
    return tuple(out)


def _removal(path: str, facts: Facts) -> Step:
    """A dropped path: its original comes back when there is a backup, else it is deleted."""
    if facts.backed_up is not None and path in facts.backed_up:
        return RestoreOriginal(path)
    return RemoveFile(path)


def _rewrite_may_relink(old: Unit | None, new: Unit) -> bool:
    """Without a node: an enabled unit whose [Install] section (or a dropin's) changes."""
    if old is None or old.enabled is not True or old.mask or not old.contents:
        return False
    if old.contents == new.contents:
        return False
    if install_section(old.contents.encode()) != install_section((new.contents or "").encode()):
        return True
    return any(dr.contents and INSTALL_HEADER in dr.contents.encode() for dr in (*old.dropins, *new.dropins))


def _unit_steps(
    old: IgnitionConfig,
    units: Sequence[Unit],
    facts: Facts,
    notes: list[str],
    *,
    repair: frozenset[str] = frozenset(),
    repaired: list[str] | None = None,
) -> list[Step]:
    """The steps of writing `units`; of those in `repair` only the paths that drifted are written."""
    repaired = [] if repaired is None else repaired
    matching = facts.matching_paths or frozenset()

    def wanted(u: Unit, path: str) -> bool:
        if u.name not in repair:
            return True
        if path in matching:
            return False
        repaired.append(path)
        return True

    steps: list[Step] = []
    before = {u.name: u for u in old.units}
    rewriting = [u for u in units if not u.mask and u.contents and u.name not in repair]
    if facts.enabled_rewrites is not None:
        first = [u.name for u in rewriting if u.name in facts.enabled_rewrites]
    else:
        first = [u.name for u in rewriting if _rewrite_may_relink(before.get(u.name), u)]
    if first:
        # links made from the old [Install] section must not outlive it; enable remakes the right ones
        steps.append(Disable(tuple(first), "rewrite"))
    writes: list[str] = []
    for u in units:
        for dr in u.dropins:
            path = dropin_path(u.name, dr.name)
            if not wanted(u, path):
                continue
            if dr.contents:
                writes.append(path)
            else:
                # an empty dropin means "no dropin": deleted even with a backup (upstream); the
                # backup comes back only when a config drops the dropin
                steps.append(RemoveFile(path))
        if u.mask:
            if wanted(u, unit_path(u.name)):
                steps.append(Mask(u.name))
        elif u.contents:
            if wanted(u, unit_path(u.name)):
                writes.append(unit_path(u.name))
        elif u.mask is False and u.name not in repair:
            steps.append(Unmask(u.name))  # an explicit `mask: false` clears an earlier mask
    if writes:
        steps.append(WriteUnitFiles(tuple(writes)))
    enable: list[str] = []
    disable: list[str] = []
    for u in units:
        if u.name in repair and _has_enablement(u) and u.name not in (facts.enablement_matches or ()):
            repaired.append(u.name)
        if u.enabled is None:
            steps.append(Preset(u.name))
        elif u.enabled and not u.mask and _static(u):
            # as systemd: `enable` has nothing to do for it (and says so); `is-enabled` says static
            notes.append(
                f'unit "{u.name}" has no [Install] section (static): enabled: true has nothing to enable'
            )
        elif u.contents or facts.unit_files is None or u.name in facts.unit_files:
            (enable if u.enabled else disable).append(u.name)
            if not u.contents and facts.unit_files is None:
                notes.append(
                    f"{u.name} has no contents: it is {'enabled' if u.enabled else 'disabled'} only if the "
                    "node has its unit file (plan with --root-mount to know)"
                )
        else:
            action = "enable" if u.enabled else "disable"
            notes.append(f'Could not {action} unit "{u.name}", because it has no contents, skipping')
    if enable:
        steps.append(Enable(tuple(enable)))
    if disable:
        steps.append(Disable(tuple(disable)))
    return steps


def _stale_unit_steps(
    old: IgnitionConfig, new: IgnitionConfig, facts: Facts, changed: set[str] | None = None
) -> list[Step]:
    steps: list[Step] = []
    new_names = {u.name for u in new.units}
    olds, news = old.units, new.units
    if changed is not None and old.unique_paths and new.unique_paths:
        # only a changed or removed unit can drop a dropin (a dropin's path names its unit): an
        # unchanged one declares the same dropins in both (one declaration per name: no error)
        olds = tuple(u for u in old.units if u.name in changed)
        news = tuple(u for u in new.units if u.name in changed)
    new_dropins = {dropin_path(u.name, dr.name) for u in news for dr in u.dropins}
    for u in olds:
        for dr in u.dropins:
            path = dropin_path(u.name, dr.name)
            if path not in new_dropins:
                steps.append(_removal(path, facts))
    stale = list(dict.fromkeys(u.name for u in old.units if u.name not in new_names))
    # back to the preset before the files go (a failure is only logged: the unit may not exist)
    steps += [Preset(name) for name in stale]
    if facts.regular_unit_files is not None:
        owned = [name for name in stale if name in facts.regular_unit_files]
    else:
        declared = {u.name: u for u in old.units}
        owned = [name for name in stale if declared[name].contents and not declared[name].mask]
    if owned:
        # no link made from its [Install] section may be left dangling
        steps.append(Disable(tuple(owned), "removed"))
    # a restored original is not preset again (upstream): the preset above already ran
    steps += [_removal(unit_path(name), facts) for name in stale]
    return steps


def _stale_file_steps(new: IgnitionConfig, d: ConfigDiff, facts: Facts) -> list[Step]:
    steps: list[Step] = []
    # the diff lists the dropped paths, in the old config's order
    for path in (c.name for c in d.file_changes if c.change == REMOVED):
        if never_deleted(path):
            continue
        step = _removal(path, facts)
        # a file replaced by a dropin of the new config stays (upstream); a backup still comes back
        if isinstance(step, RemoveFile) and path_in_dropins(path, new.units):
            continue
        steps.append(step)
    steps += [RemoveFile(link) for link in sorted(facts.leaked_links)]
    return steps


def _passwd_steps(old: IgnitionConfig, new: IgnitionConfig, facts: Facts, notes: list[str]) -> list[Step]:
    steps: list[Step] = []
    if facts.has_core is False:
        notes.append("user core does not exist: SSH keys and passwords are left alone")
    else:
        keys = sum(len(u.ssh_authorized_keys) for u in new.users)
        steps.append(WriteSshKeys(CORE_USER, keys))
    if facts.has_shadow is False:
        # usermod would otherwise put the hashes into the world-readable /etc/passwd
        notes.append("/etc/shadow does not exist: passwords are left alone")
        return steps
    before = {u.name: u for u in old.users}
    new_names = {u.name for u in new.users}
    for u in old.users:
        if u.name not in new_names and (
            facts.password_matches is None or u.name not in facts.password_matches
        ):
            steps.append(ClearPassword(u.name))
    if facts.has_core is False:
        return steps
    for u in new.users:
        if facts.password_matches is not None:
            if u.name not in facts.password_matches:
                steps.append(SetPassword(u.name))
        elif (prev := before.get(u.name)) is None or prev.password_hash != u.password_hash:
            steps.append(SetPassword(u.name))
    return steps
