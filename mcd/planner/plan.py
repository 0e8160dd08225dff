"""The update plan: reconcilable?, which post-update action, drain?, which commands. Pure: no I/O.

`plan()` answers, before a rollout, what upstream MCD would decide after it: the same
reconcilability verdict, the same post-config actions (NodeDisruptionPolicy, or the legacy
table used for firstboot and once-from), the same drain decision, and the host commands the
update runs in order. Beyond upstream, every changed thing carries its own actions and the
rule that produced them. Node facts (forcefile, FIPS, topology, the booted deployment) are
arguments, never read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mcd import policy
from mcd.config import ostables
from mcd.config.ignition import EMPTY_IGNITION, IgnitionConfig
from mcd.config.machineconfig import MachineConfig
from mcd.config.ostables import canonical_kernel_type
from mcd.config.record import field, record, replace
from mcd.planner import kargs as kargs_mod
from mcd.planner import rpmostree_args
from mcd.planner import steps as st
from mcd.planner.diff import Change, ConfigDiff, diff
from mcd.planner.nodefacts import NO_FACTS, SINGLE_REPLICA, Facts
from mcd.planner.reconcile import reconcile, unreconcilable_reason
from mcd.planner.registries import is_safe_registries_change
from mcd.planner.steps import Step, reboot_command
from mcd.planner.updatesteps import disk_steps
from mcd.policy import ActionKind, PostConfigAction
from mcd.policy.model import REGISTRIES_CONF

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Facts", "Plan", "PlannedChange", "plan", "reboot_command"]


@record(init=False)
class PlannedChange:
    """One changed thing, the actions it calls for and why."""

    kind: str
    name: str
    change: str
    actions: tuple[PostConfigAction, ...]
    rule: str
    details: tuple[str, ...] = ()

    def __init__(  # noqa: PLR0917  (the dataclass's positional order, which its callers use)
        self,
        kind: str,
        name: str,
        change: str,
        actions: tuple[PostConfigAction, ...],
        rule: str,
        details: tuple[str, ...] = (),
    ) -> None:
        # one dict update instead of a frozen setattr per field: a plan builds one per change
        self.__dict__.update(kind=kind, name=name, change=change, actions=actions, rule=rule, details=details)


@record
class Plan:
    old_name: str
    new_name: str
    reconcilable: bool
    errors: tuple[str, ...]
    diff: ConfigDiff
    legacy: bool
    actions: tuple[PostConfigAction, ...]
    action_rule: str
    drain: bool
    drain_rule: str
    changes: tuple[PlannedChange, ...] = ()
    # what the update does, in order: the executor runs exactly these
    steps: tuple[Step, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    # OS fields the node cannot apply (unknown extension, 64k-pages off aarch64): the update must
    # fail before it changes anything; `warnings` says the same for `mcd plan`
    os_errors: tuple[str, ...] = ()
    # extension packages the staged deployment must request once the OS step ran (spec §5.6)
    extension_packages: tuple[str, ...] = ()
    # what the update leaves alone and why (a unit with no file to enable, no /etc/shadow …)
    notes: tuple[str, ...] = ()
    # what the node lost of the config it already has and the update writes again: paths of
    # files, unit files, dropins and masks, names of units whose enablement drifted, the SSH keys
    repairs: tuple[str, ...] = ()

    @property
    def commands(self) -> tuple[tuple[str, ...], ...]:
        """The command lines of the steps, in order (file operations have none)."""
        return tuple(c for c in map(st.command, self.steps) if c is not None)

    @property
    def reason(self) -> str:
        """The node `reason` annotation upstream would write for this plan ("" when reconcilable)."""
        if self.reconcilable:
            return ""
        return unreconcilable_reason(self.old_name, self.new_name, self.errors[0])

    def to_json(self) -> dict[str, Any]:
        """The `mcd plan -o json` contract (fields may be added, never renamed)."""
        return {
            "old": self.old_name,
            "new": self.new_name,
            "reconcilable": self.reconcilable,
            "errors": list(self.errors),
            "reason": self.reason,
            "diff": self.diff.flags(),
            "mode": "legacy" if self.legacy else "nodeDisruptionPolicy",
            "actions": [a.to_json() for a in self.actions],
            "actionRule": self.action_rule,
            "drain": self.drain,
            "drainRule": self.drain_rule,
            "changes": [
                {
                    "kind": c.kind,
                    "name": c.name,
                    "change": c.change,
                    "actions": [a.to_json() for a in c.actions],
                    "rule": c.rule,
                    "details": list(c.details),
                }
                for c in self.changes
            ],
            "commands": [list(c) for c in self.commands],
            "warnings": list(self.warnings),
            "osErrors": list(self.os_errors),
            "steps": [st.step_json(s) for s in self.steps],
            "notes": list(self.notes),
            "repairs": list(self.repairs),
        }


def plan(
    old: MachineConfig,
    new: MachineConfig,
    facts: Facts = NO_FACTS,
    policies: policy.ClusterPolicies = policy.DEFAULT_POLICIES,
    *,
    legacy: bool = False,
    storage_overrides: Sequence[str] = (),
) -> Plan:
    """Plan the update from `old` to `new` on a node described by `facts`."""
    if facts.node_fips is not None and facts.node_fips == new.fips:
        # upstream trusts the node over the old config when the node already matches the target
        old = replace(old, fips=facts.node_fips)
    d = diff(old, new, forcefile=facts.forcefile)
    errors = reconcile(old, new, storage_overrides, facts.node_fips)
    if errors:
        return Plan(
            old.name,
            new.name,
            False,
            tuple(errors),
            d,
            legacy,
            (),
            "unreconcilable: nothing is applied",
            False,
            "unreconcilable: no drain",
        )
    old_ign = old.config or old.ignition.partial or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    if legacy:
        changes, actions, action_rule = _legacy_actions(d, facts)
    else:
        changes, actions, action_rule = _policy_actions(d, facts, policies)
    drain, drain_rule = _drain(d, facts, actions, legacy, _registries_check(old_ign, new_ign))
    os_step = _os_step(old, new, d, facts)
    steps: list[Step] = []
    notes: list[str] = _os_skipped_note(d, facts)
    repairs: list[str] = []
    if facts.forcefile:
        steps.append(st.ConsumeForcefile())
    if drain:
        steps.append(st.Drain())
    steps += disk_steps(old_ign, new_ign, d, facts, notes, repaired=repairs)
    steps += os_step.steps
    if not os_step.errors:
        # an OS step that fails ends the update there (its last step is the OsFailure)
        steps += _tuning_steps(facts)
        steps += _action_steps(actions, new.name, facts.coreos)
        if facts.owed_reboot is not None and not any(isinstance(s, st.Reboot) for s in steps):
            # this change needs none, but an earlier one still does: ask again
            steps.append(
                st.Reboot(facts.owed_reboot, reboot_command(facts.owed_reboot, facts.coreos), owed=True)
            )
    # upstream fails such an update on the node (Degraded); say so before the rollout
    warnings = [f"the update would fail on the node: {e}" for e in os_step.errors]
    return Plan(
        old.name,
        new.name,
        True,
        (),
        d,
        legacy,
        actions,
        action_rule,
        drain,
        drain_rule,
        tuple(changes),
        tuple(steps),
        tuple(warnings),
        os_step.errors,
        os_step.extension_packages,
        tuple(notes),
        tuple(repairs),
    )


def _drain(
    d: ConfigDiff,
    facts: Facts,
    actions: Sequence[PostConfigAction],
    legacy: bool,
    registries_safe: Callable[[], bool],
) -> tuple[bool, str]:
    """Whether the update drains the node first, and the rule that decided it."""
    drain = policy.drain_required(
        actions,
        legacy=legacy,
        registries_changed=REGISTRIES_CONF in d.changed_paths,
        registries_change_safe=registries_safe,
    )
    if facts.topology == SINGLE_REPLICA:
        return False, "single-node topology (SingleReplica): drain skipped"
    return drain, _drain_rule(drain, actions, d)


def _registries_check(old: IgnitionConfig, new: IgnitionConfig) -> Callable[[], bool]:
    """A lazy registries.conf safety check: decoded only when a rule asks for it."""

    def text(cfg: IgnitionConfig) -> str | None:
        for f in cfg.files:
            if f.path == REGISTRIES_CONF:
                return f.data.decode("utf-8", errors="replace")
        return None

    def check() -> bool:
        return is_safe_registries_change(text(old), text(new))

    return check


def _os_reason(d: ConfigDiff, forcefile: bool) -> str | None:
    if forcefile:
        return "forcefile /run/machine-config-daemon-force present: reboot"
    names = [
        n
        for n, flag in (
            ("osImageURL", d.os_update),
            ("kernelArguments", d.kargs),
            ("fips", d.fips),
            ("kernelType", d.kernel_type),
            ("extensions", d.extensions),
        )
        if flag
    ]
    return f"{', '.join(names)} changed: reboot" if names else None


def _policy_actions(
    d: ConfigDiff, facts: Facts, policies: policy.ClusterPolicies
) -> tuple[list[PlannedChange], tuple[PostConfigAction, ...], str]:
    reboot = PostConfigAction(ActionKind.REBOOT)
    changes: list[PlannedChange] = [
        PlannedChange(c.kind, c.name, c.change, (reboot,), f"{c.kind} change requires a reboot", c.details)
        for c in d.spec_changes
    ]
    # folded in the API's form (upstream's rules), typed once per distinct action list (a policy's
    # list is one tuple shared by every path it matches; the unmatched ones all reboot)
    per_path: list[policy.Action] = []
    typed: dict[tuple[policy.Action, ...], tuple[tuple[PostConfigAction, ...], bool]] = {}
    rebooters: list[str] = []

    def add(c: Change, decision: policy.Decision, *, counted: bool = True) -> None:
        known = typed.get(decision.actions)
        if known is None:
            acts = _typed(decision.actions)
            known = typed[decision.actions] = (acts, _reboots(acts))
        acts, reboots = known
        if counted:
            per_path.extend(decision.actions)
        if reboots:
            rebooters.append(c.name)
        changes.append(PlannedChange(c.kind, c.name, c.change, acts, decision.rule, c.details))

    for c in d.file_changes:
        add(c, policy.file_decision(c.name, policies))
    for c in d.unit_changes:
        add(c, policy.unit_decision(c.name, policies))
    if d.passwd:
        sd = policy.sshkey_decision(policies)
        # the sshkey policy's actions count once, however many rows the change has
        per_path.extend(sd.actions)
        for c in d.passwd_changes:
            add(c, sd, counted=False)
    os_reason = _os_reason(d, facts.forcefile)
    if os_reason is not None:
        return changes, (reboot,), os_reason
    if not (d.files or d.units or d.passwd):
        return changes, (PostConfigAction(ActionKind.NONE),), "no file, unit or SSH key change: none"
    combined = _typed(policy.combine_actions(per_path))
    if _reboots(combined):
        # the spec changes reboot too, but any of them returned above
        rule = f"reboot required by {_names(rebooters)}"
    else:
        rule = "combined node disruption policy actions of every change"
    return changes, combined, rule


def _typed(actions: Sequence[policy.Action]) -> tuple[PostConfigAction, ...]:
    return tuple(map(PostConfigAction.from_api, actions))


def _reboots(actions: Sequence[PostConfigAction]) -> bool:
    return any(a.kind is ActionKind.REBOOT for a in actions)


def _legacy_actions(
    d: ConfigDiff, facts: Facts
) -> tuple[list[PlannedChange], tuple[PostConfigAction, ...], str]:
    reboot = PostConfigAction(ActionKind.REBOOT, legacy=True)
    changes: list[PlannedChange] = [
        PlannedChange(c.kind, c.name, c.change, (reboot,), f"{c.kind} change requires a reboot", c.details)
        for c in d.spec_changes
    ]
    decisions = []
    for c in d.file_changes:
        ld = policy.legacy_file_decision(c.name)
        decisions.append(ld)
        acts = (PostConfigAction.from_legacy(ld.action),) if ld.action is not None else ()
        changes.append(PlannedChange(c.kind, c.name, c.change, acts, ld.rule, c.details))
    for c in d.unit_changes:
        changes.append(
            PlannedChange(
                c.kind, c.name, c.change, (reboot,), "legacy mode: any unit change reboots", c.details
            )
        )
    for c in d.passwd_changes:
        changes.append(
            PlannedChange(c.kind, c.name, c.change, (), "legacy mode: SSH keys need no action", c.details)
        )
    os_reason = _os_reason(d, facts.forcefile)
    if os_reason is None and d.units:
        os_reason = "units changed (legacy mode): reboot"
    if os_reason is not None:
        return changes, (reboot,), os_reason
    words = policy.combine_legacy(decisions)
    actions = tuple(map(PostConfigAction.from_legacy, words))
    return changes, actions, f"legacy post-config action table: {', '.join(words)}"


def _names(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _drain_rule(drain: bool, actions: Sequence[PostConfigAction], d: ConfigDiff) -> str:
    kinds = {a.kind for a in actions}
    if drain:
        if kinds & {ActionKind.REBOOT, ActionKind.DRAIN}:
            return "a reboot or drain action drains the node"
        return (
            f"{REGISTRIES_CONF} change is not safe (a registry or mirror removed or changed, or a mirror "
            "not digest-only): drain"
        )
    if REGISTRIES_CONF in d.changed_paths:
        return f"{REGISTRIES_CONF} change is safe (only digest-only mirrors added): no drain"
    return "no action needs a drain"


@record
class _OsStep:
    steps: tuple[Step, ...] = ()
    extension_packages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


def _os_step(old: MachineConfig, new: MachineConfig, d: ConfigDiff, facts: Facts) -> _OsStep:
    """The rpm-ostree runs of the OS step, in upstream's order (spec §5.1), or why it must fail.

    Discard any pending deployment; undo a realtime/64k kernel swap the booted deployment
    carries; rebase (unless the node already boots the target image, OCPBUGS-2757); kernel
    arguments; put the realtime/64k kernel in; bring the extension packages to the new set,
    counted against the booted deployment's requests; then, if that ran, check the staged deployment.
    """
    new_type = canonical_kernel_type(new.kernel_type)
    if not facts.coreos or not (
        d.os_update or d.extensions or d.kernel_type or d.kargs or new_type != ostables.KERNEL_TYPE_DEFAULT
    ):
        return _OsStep()
    target = new.ocl_image or new.os_image_url
    os_update = d.os_update and not (facts.booted_image is not None and facts.booted_image == target)
    kernel_swap = not d.ocl_enabled and (os_update or d.kernel_type)
    out: list[Step] = [st.OsCommand(st.OS_CLEANUP, tuple(rpmostree_args.cleanup_pending_command()))]
    if kernel_swap:
        revert = rpmostree_args.kernel_swap_revert_command(
            old.kernel_type, facts.requested_base_removals, facts.requested_packages
        )
        if revert is not None:
            out.append(st.OsCommand(st.OS_OVERRIDE_RESET, tuple(revert)))
    if os_update and target:
        # upstream's updateLayeredOS: rpm-ostree must pull images itself, and gets the pull secret
        out += [st.CheckRpmOstree(), st.LinkPullSecret()]
        out.append(st.Rebase(target, tuple(rpmostree_args.rebase_command(target))))
    if d.kargs:
        cmd = kargs_mod.kargs_command(list(old.kernel_arguments), list(new.kernel_arguments))
        if cmd:
            out.append(st.OsCommand(st.OS_KARGS, tuple(cmd)))
    if d.ocl_enabled or facts.el is False:
        # a layered image carries its kernel and extensions itself; and upstream changes the
        # kernel type and extensions on RHCOS/SCOS only (Fedora CoreOS: skipped without error)
        return _OsStep(tuple(out))
    if kernel_swap:
        try:
            switch = rpmostree_args.kernel_switch_command(new_type, facts.arch)
        except rpmostree_args.KernelTypeError as exc:
            # upstream has run the commands so far when it fails here (then rolls back)
            return _OsStep((*out, st.OsFailure(str(exc))), errors=(str(exc),))
        else:
            if switch is not None:
                out.append(st.OsCommand(st.OS_KERNEL_SWITCH, tuple(switch)))
    expected: tuple[str, ...] = ()
    if (d.extensions or old.os_image_url != new.os_image_url) and (old.extensions or new.extensions):
        try:
            expected = tuple(ostables.extension_packages(list(new.extensions)))
        except ostables.ExtensionError as exc:
            return _OsStep((*out, st.OsFailure(str(exc))), errors=(str(exc),))
        else:
            installed = facts.requested_packages
            if installed is None:
                known = [e for e in old.extensions if e in ostables.SUPPORTED_EXTENSIONS]
                installed = tuple(ostables.extension_packages(known))
            cmd = rpmostree_args.extensions_command(list(installed), list(new.extensions))
            if cmd:
                # upstream checks the staged deployment right after its `update`, and only then
                out.append(st.OsCommand(st.OS_EXTENSIONS, tuple(cmd)))
                out.append(st.VerifyExtensions(tuple(rpmostree_args.staged_check_packages(new.extensions))))
    return _OsStep(tuple(out), expected)


def _os_skipped_note(d: ConfigDiff, facts: Facts) -> list[str]:
    """Say which OS fields change but are left alone: only an rpm-ostree system has an OS step."""
    if facts.coreos:
        return []
    flags = (
        (d.os_update, "osImageURL"),
        (d.kargs, "kernelArguments"),
        (d.kernel_type, "kernelType"),
        (d.extensions, "extensions"),
    )
    fields = [name for changed, name in flags if changed]
    if not fields:
        return []
    return [f"not an rpm-ostree system (no /run/ostree-booted): {', '.join(fields)} not applied"]


def _tuning_steps(facts: Facts) -> list[Step]:
    """The legacy tuning file's kernel arguments: upstream applies them on every CoreOS update."""
    if not facts.coreos or facts.tuning_file is None:
        return []
    argvs = kargs_mod.tuning_commands(facts.tuning_file, facts.cmdline, facts.el is True)
    return [st.OsCommand(st.OS_TUNING, tuple(argv)) for argv in argvs]


CRIO = "crio.service"


def _action_steps(actions: Sequence[PostConfigAction], new_name: str, coreos: bool) -> list[Step]:
    """The post-config actions as steps (a reboot replaces every other one)."""
    out: list[Step] = []
    for a in actions:
        match a.kind, a.service:
            case ActionKind.REBOOT, _:
                reason = f"Node will reboot into config {new_name}"
                return [st.Reboot(reason, reboot_command(reason, coreos))]
            case ActionKind.RELOAD_CRIO, _:
                out.append(st.ReloadService(CRIO))
            case ActionKind.RESTART_CRIO_WITH_CA_TRUST, _:
                out += [st.UpdateCaTrust(), st.RestartService(CRIO)]
            case ActionKind.RELOAD, str(service):
                out.append(st.ReloadService(service))
            case ActionKind.RESTART, str(service):
                out.append(st.RestartService(service))
            case ActionKind.DAEMON_RELOAD, _:
                out.append(st.DaemonReload())
            case ActionKind.NONE | ActionKind.DRAIN, _:
                # a drain is planned ahead of the writes (the drain decision); none does nothing
                pass
    return out
