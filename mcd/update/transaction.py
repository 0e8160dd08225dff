"""The update transaction: turn a plan into the desired on-disk state, or leave the old one.

Upstream's `update()` order is kept: files, units, stale data, SSH keys and passwords, OS
(rpm-ostree), persisted current config, post-config action. Each completed step registers
its undo; when a later step fails, the undos run in reverse and the node is back in the old
config. Crash safety comes from three facts: every single write is atomic (atomicfs), every step
is idempotent (re-writing identical content writes nothing, backups are taken once), and a
write-ahead record (`state.TRANSACTION`) is on disk from before the first change to after the
last — a restarted process finds it and re-runs the same transaction, which converges.

Its errors, for its callers (`mcd start --once-from` and the other commands, and the agent's
`NodeApplier`): `UpdateError`, and `Unreconcilable`, an UpdateError that carries the plan which
refused the change. Everything below (the host layer's `HostError`s, `perform`'s `OsStepError`
and `ActionError`, a failed command) reaches them as an UpdateError.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mcd import policy
from mcd.config.ignition import DEFAULT_PARSE, EMPTY_IGNITION, IgnitionConfig, ParseOptions
from mcd.config.machineconfig import MachineConfig, empty_machineconfig, machineconfig_from_object
from mcd.config.text import shown
from mcd.host import failpoints, ondisk, rootlock, state, unitdirs
from mcd.host.errors import HostError
from mcd.host.facts import probe
from mcd.host.wiring import OSTREE_BOOTED, Host
from mcd.planner import steps as st
from mcd.planner.managed_paths import KUBECONFIG, KUBELET_CA, dropin_path, unit_path
from mcd.planner.nodefacts import Facts
from mcd.planner.plan import Plan, plan
from mcd.planner.steps import Step
from mcd.update.perform import DrainHook, Ran, StepRunner, created_paths, sweep_temp_files

__all__ = ["Host", "Outcome", "Ran", "Unreconcilable", "UpdateError", "recover", "request_reboot", "update"]

LOG = logging.getLogger(__name__)


class UpdateError(RuntimeError):
    """An update (or the recovery of one) did not happen; the message says whether nothing was
    changed, the node was rolled back to the old config, or the rollback failed too."""


class Unreconcilable(UpdateError):
    """The plan says the change cannot be applied in place; nothing was changed."""

    def __init__(self, plan_: Plan) -> None:
        self.plan = plan_
        super().__init__(plan_.reason)


@dataclass(frozen=True)
class Outcome:
    """What an update did."""

    plan: Plan
    reboot: bool
    rebooted: bool
    actions_run: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # the plan's steps, in the order they ran (empty when the node already was in the config)
    ran: tuple[Ran, ...] = ()


def mc_json(mc: MachineConfig) -> Mapping[str, Any]:
    """The object persisted for a config (the source object; a bare Ignition is wrapped)."""
    raw = mc.raw
    if raw.get("kind") == "MachineConfig":
        return raw
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": mc.name},
        "spec": {"config": dict(raw)} if raw else {},
    }


def load_mc(obj: Mapping[str, Any] | None, what: str, options: ParseOptions = DEFAULT_PARSE) -> MachineConfig:
    """A persisted config back into a MachineConfig (None: upstream's empty config)."""
    if obj is None:
        return empty_machineconfig()
    return machineconfig_from_object(obj, what, options=options)


def facts_for(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    *,
    skip_certificate_write: bool = False,
    old_on_disk: bool = False,
) -> Facts:
    """The probe's facts, its failures as UpdateError (nothing was changed yet)."""
    try:
        return probe(host, old, new, skip_certificate_write=skip_certificate_write, old_on_disk=old_on_disk)
    except HostError as exc:
        raise UpdateError(str(exc)) from exc
    except FileNotFoundError as exc:  # a command the probe runs is not installed
        raise UpdateError(_missing_command(host, exc)) from exc


def _missing_command(host: Host, exc: FileNotFoundError) -> str:
    command = shown(str(exc.filename or exc))
    text = f"{command}: command not found"
    if host.rpmostree is not None:
        # the marker decides: a root marked as rpm-ostree based needs the tool to plan at all
        text += (
            f", but {OSTREE_BOOTED} marks {shown(str(host.root.prefix))} as an rpm-ostree system "
            f"(install {command}, or remove {OSTREE_BOOTED} for a root that is not one)"
        )
    return f"{text}; nothing was changed"


def plan_on_host(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    *,
    legacy: bool,
    policies: policy.ClusterPolicies = policy.DEFAULT_POLICIES,
    skip_certificate_write: bool = False,
    storage_overrides: Sequence[str] = (),
) -> Plan:
    """The plan `update` would run on this host now (what `mcd plan --root-mount` prints)."""
    facts = facts_for(host, old, new, skip_certificate_write=skip_certificate_write)
    return plan(old, new, facts, policies, legacy=legacy, storage_overrides=storage_overrides)


def update(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    *,
    legacy: bool,
    policies: policy.ClusterPolicies = policy.DEFAULT_POLICIES,
    skip_reboot: bool = False,
    skip_certificate_write: bool = False,
    facts: Facts | None = None,
    drain: DrainHook | None = None,
    storage_overrides: Sequence[str] = (),
    earlier_created: Sequence[str] = (),
    planned: Plan | None = None,
    staged: state.Staged | None = None,
    drop_record: bool = True,
) -> Outcome:
    """Apply `new` over `old` on the host; on failure roll back and raise UpdateError.

    The host is probed (unless `facts` are given), the pure planner turns the facts into steps,
    and exactly those steps run, in order. `drain` is the cluster agent's drain (without one a
    planned drain is reported skipped); `storage_overrides` are the MachineConfiguration's
    irreconcilableValidationOverrides.storage; `earlier_created` what an interrupted run of this
    update had found absent (its record's `created`), for a rollback to remove as well;
    `planned` the plan the caller made of the same configs, `facts`, policies and overrides;
    `staged` the new config's text written ahead (`state.stage`), for the record to take over;
    `drop_record` False leaves the finished record to the caller (`state.commit`).
    """
    # one update per root at a time; an update joins thousands of paths in a few directories:
    # resolve each directory once
    with rootlock.hold(host.root, timeout=host.lock_timeout), host.root.caching_dirs():
        if facts is None:
            facts = facts_for(host, old, new, skip_certificate_write=skip_certificate_write)
        # `planned`: the caller's plan of these very configs, facts and policies (not made twice)
        p = planned or plan(old, new, facts, policies, legacy=legacy, storage_overrides=storage_overrides)
        return _apply(
            host,
            old,
            new,
            p,
            facts,
            skip_reboot=skip_reboot,
            drain=drain,
            earlier=earlier_created,
            staged=staged,
            drop_record=drop_record,
        )


def _apply(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    p: Plan,
    facts: Facts,
    *,
    skip_reboot: bool,
    drain: DrainHook | None,
    earlier: Sequence[str],
    staged: state.Staged | None = None,
    drop_record: bool = True,
) -> Outcome:
    old_ign = old.config or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    sweep_temp_files(host, old_ign, new_ign)
    if not p.reconcilable:
        raise Unreconcilable(p)
    there = _already_there(host, new, new_ign, p, facts, skip_reboot=skip_reboot)
    if there is not None:
        return there
    _check(host, old_ign, new_ign, p, facts)
    # found before anything is written, recorded with the update (see perform.created_paths)
    created = created_paths(host, p.steps, earlier)
    run = StepRunner(host, old_ign, new_ign, drain, legacy=p.legacy, created=created)
    lead = _run_lead(run, p)
    _record(host, old, new, p, created=created, staged=staged)
    for note in p.notes:
        LOG.info("%s", note)
    reboot = next((s for s in p.steps if isinstance(s, st.Reboot)), None)
    _run_and_commit(host, run, p.steps[lead:], new, reboot, drop_record=drop_record)
    # committed: no re-run can follow, so the backups of restored originals can go
    host.files.originals.collect_restored(None, new_ign)
    return _outcome(host, p, run, reboot, skip_reboot=skip_reboot)


def _already_there(
    host: Host, new: MachineConfig, new_ign: IgnitionConfig, p: Plan, facts: Facts, *, skip_reboot: bool
) -> Outcome | None:
    """The outcome when the node already holds `new` exactly (nothing to record or write), else None."""
    if not p.diff.is_empty or facts.forcefile or state.pending(host.root) is not None:
        return None
    drift = ondisk.first_error(host.root, new_ign, host.systemd.is_enabled)
    if drift is not None or p.repairs or state.read_current_config(host.root) != mc_json(new):
        return None
    # re-runs are no-ops; only backups of restored originals left by an interrupted commit are collected
    host.files.originals.collect_restored(None, new_ign)
    owed = state.pending_reboot(host.root)
    if owed is None:
        return Outcome(p, reboot=False, rebooted=False, notes=("already in the desired config",))
    # applied, but the reboot it needs failed, was skipped or was cut short: ask again
    return _reboot(host, p, owed.reason, skip_reboot=skip_reboot, notes=("reboot still pending",))


def _run_lead(run: StepRunner, p: Plan) -> int:
    """Run the forcefile's removal and the drain that lead the plan; how many steps that was.

    They change nothing a rollback could undo, so they run before the write-ahead record: a
    process killed while draining then starts the whole sync again (drain included) instead of
    replaying the update without it, and a drain that fails (blocked by a budget, timed out)
    reaches the caller as it was raised.
    """
    lead = 0
    while lead < len(p.steps) and isinstance(p.steps[lead], st.ConsumeForcefile | st.Drain):
        run.step(p.steps[lead])
        lead += 1
    return lead


def _record(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    p: Plan,
    *,
    created: Sequence[str],
    staged: state.Staged | None,
) -> None:
    """Write the update's write-ahead record; UpdateError (nothing changed) when it cannot be."""
    record = state.Transaction(
        mc_json(old),
        mc_json(new),
        "apply",
        "legacy" if p.legacy else "policy",
        new_text=new.source_text,
        created=tuple(created),
        staged=staged,
    )
    try:
        state.begin(host.root, record)
    except HostError as exc:
        # no record, no change: a half-written record must not make the next run replay this update
        with contextlib.suppress(OSError):
            state.finish(host.root)
        raise UpdateError(f"update to {new.name} failed {exc}; nothing was changed") from exc
    failpoints.hit("transaction recorded")


def _run_and_commit(
    host: Host,
    run: StepRunner,
    steps: Sequence[Step],
    new: MachineConfig,
    reboot: st.Reboot | None,
    *,
    drop_record: bool,
) -> None:
    """Run the recorded steps, then the actions, and commit; any failure rolls the node back."""
    try:
        # directory entries are made durable once per directory, before the commit
        with host.files.dirsync.deferred(), host.files.originals.replacing(run.old_ign):
            for step in steps:
                if not isinstance(step, st.ACTION_STEPS):
                    run.step(step)
        # reloads and restarts run before the commit: when one fails the update is rolled back
        # (as upstream); a reboot is requested once the new config is committed
        for step in steps:
            if isinstance(step, st.ACTION_STEPS) and not isinstance(step, st.Reboot):
                run.action(step)
        if reboot is not None and not reboot.owed:
            state.mark_reboot(host.root, new.name, reboot.reason)
        state.commit(host.root, new.ocl_image, drop_record=drop_record)
        failpoints.hit("transaction committed")
    except Exception as exc:
        try:
            _roll_back(host, run.old_ign, run.undo, failed=new.name, cause=str(exc))
        except UpdateError as rollback_exc:
            # it holds both: why the update failed, and why the node could not be put back
            raise UpdateError(f"update to {new.name} failed: {rollback_exc}") from exc
        if isinstance(exc, UpdateError):
            raise
        raise UpdateError(f"update to {new.name} failed and was rolled back: {exc}") from exc


def _outcome(host: Host, p: Plan, run: StepRunner, reboot: st.Reboot | None, *, skip_reboot: bool) -> Outcome:
    """What the committed update ran, with the reboot it asks for (requested here unless skipped)."""
    actions_run = tuple(_label(r) for r in run.ran if isinstance(r.step, st.ACTION_STEPS))
    if reboot is None:
        return Outcome(p, reboot=False, rebooted=False, actions_run=actions_run, ran=tuple(run.ran))
    # an owed reboot: this change needs none, but an earlier one never happened (skipped or failed)
    notes = ("reboot still pending",) if reboot.owed else ()
    outcome = _reboot(host, p, reboot.reason, skip_reboot=skip_reboot, notes=notes)
    skipped = "" if outcome.rebooted else "not rebooting here (--skip-reboot or not a running system)"
    return replace(outcome, actions_run=actions_run, ran=(*run.ran, Ran(reboot, skipped)))


def _label(r: Ran) -> str:
    """An action as `actionsRun` has always named it (`reload crio.service`, `daemon-reload`)."""
    argv = st.command(r.step) or (r.step.kind,)
    text = " ".join(argv[1:] if argv[0] == "systemctl" else argv)
    return f"{text} (skipped: {r.skipped})" if r.skipped else text


def _check(host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig, p: Plan, facts: Facts) -> None:
    """Everything the host could refuse, checked before anything is recorded or written."""
    if host.coreos and facts.kubeconfig_mode is None:
        # upstream's chmod of the kubelet's kubeconfig fails the update on a node without one;
        # found here, before anything is written (a sandbox or plain root has no kubelet: skipped)
        raise UpdateError(f"cannot stat {KUBECONFIG}: no such regular file; nothing was changed")
    changed_units = {c.name for c in p.diff.unit_changes}
    # units written: the changed ones and those a repair writes again (a path or name in `repairs`)
    repairs = set(p.repairs)
    units = (
        new_ign.units
        if facts.forcefile
        else tuple(
            u
            for u in new_ign.units
            if u.name in changed_units
            or u.name in repairs
            or unit_path(u.name) in repairs
            or any(dropin_path(u.name, d.name) in repairs for d in u.dropins)
        )
    )
    try:
        host.files.check(
            new_ign.files,
            units,
            skip=(KUBELET_CA,) if facts.skip_certificate_write else (),
            # declared as in the applied config: every new path the diff does not name
            unchanged={f.path for f in new_ign.files}.difference(p.diff.changed_paths, repairs),
        )
        # pruning touches the old config's units that go away
        host.files.check((), [u for u in old_ign.units if u.name in changed_units])
    except HostError as exc:
        raise UpdateError(f"update to {p.new_name} refused, nothing was changed: {exc}") from exc
    if units or changed_units:
        # enablement, masks and dropins: systemctl --root must not be led out of the root
        problems = unitdirs.escapes(host.root)
        if problems:
            raise UpdateError(f"update to {p.new_name} refused, nothing was changed: {problems[0]}")


# upstream's name for each phase in "error rolling back <what>: …" (spec §2.5); mcd undoes SSH
# keys and password hashes as one phase, named as upstream names the keys
ROLLBACK_NAMES = {"files and units": "files writes", "ssh keys": "SSH keys updates", "os": "changes to OS"}


def go_aggregate(messages: Sequence[str]) -> str:
    """The text of Kubernetes' errors.NewAggregate: one message as it is, else `[a, b]` (repeats dropped)."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def rollback_error(what: str, error: str, cause: str) -> str:
    """A failed undo wrapping the error it was undoing for, as upstream's deferred rollbacks do."""
    return f"error rolling back {ROLLBACK_NAMES.get(what, what)}: {go_aggregate([error, cause])}"


def _roll_back(
    host: Host,
    old_ign: IgnitionConfig,
    undo: list[tuple[str, Callable[[], None]]],
    *,
    failed: str,
    cause: str,
) -> None:
    owed = state.pending_reboot(host.root)
    if owed is not None and owed.config == failed:
        state.clear_reboot(host.root)  # the failed config will not be booted into
    new_record = state.pending(host.root)
    if new_record is not None:
        try:
            state.begin(
                host.root,
                state.Transaction(
                    new_record.old, new_record.new, "rollback", new_record.mode, created=new_record.created
                ),
            )
        except HostError as exc:
            # the record stays in phase "apply": a restart re-runs the update, which converges
            # just the same; the undo below must run whatever happened to this marker
            LOG.warning("%s", exc)
    message, failures = cause, 0
    for what, fn in reversed(undo):
        try:
            fn()
        except Exception as exc:  # every undo runs; each failure wraps the error so far
            message, failures = rollback_error(what, str(exc), message), failures + 1
    if failures:
        # the record stays: a restart re-runs the transaction and converges
        raise UpdateError(message)
    state.finish(host.root)
    host.files.originals.collect_restored(None, old_ign)


def _reboot(host: Host, p: Plan, reason: str, *, skip_reboot: bool, notes: tuple[str, ...] = ()) -> Outcome:
    """Request the reboot the committed config needs (it stays recorded until the node has rebooted).

    A failed request raises RebootError (upstream's message); the record makes the next run ask
    again instead of taking the node as done.
    """
    if skip_reboot:
        # --skip-reboot, or the cluster agent, which asks for the reboot itself after this
        LOG.info("reboot required (%s), left to the caller (--skip-reboot or the agent)", reason)
        return Outcome(p, reboot=True, rebooted=False, notes=notes)
    if not request_reboot(host, reason):
        return Outcome(p, reboot=True, rebooted=False, notes=(*notes, "reboot skipped: not a running system"))
    return Outcome(p, reboot=True, rebooted=True, notes=notes)


def request_reboot(host: Host, reason: str) -> bool:
    """Reboot the node; False (nothing done) under a root that is not a running system.

    Raises RebootError when the reboot could not be requested.
    """
    if not host.live:
        LOG.info("reboot required (%s), skipped: %s is not a running system", reason, host.root.prefix)
        return False
    host.rebooter.reboot(reason)
    return True


def recover(host: Host, *, skip_reboot: bool = True) -> Outcome | None:
    """Finish an interrupted update: re-run the recorded transaction, which converges.

    A record in phase "apply" means the process died while applying: the same update runs
    again. In phase "rollback" it died while undoing a failed update: the update runs again
    too, fails at the same step if the cause persists, and rolls back completely this time.
    """
    with rootlock.hold(host.root, timeout=host.lock_timeout):
        return _recover(host, skip_reboot=skip_reboot)


def _recover(host: Host, *, skip_reboot: bool) -> Outcome | None:
    txn = state.pending(host.root)
    if txn is None:
        return None
    LOG.warning("found an interrupted update (phase %s): re-running it", txn.phase)
    old = load_mc(txn.old, state.TRANSACTION)
    new = load_mc(txn.new, state.TRANSACTION)
    # re-run as recorded: the record's text becomes currentconfig, as it would have
    new = replace(new, raw_text=(new.raw, txn.new_text)) if txn.new_text is not None else new
    try:
        return update(
            host,
            old,
            new,
            legacy=txn.mode == "legacy",
            skip_reboot=skip_reboot,
            # what the interrupted run found absent: it may have created some of it since
            earlier_created=txn.created,
        )
    except HostError as exc:
        raise UpdateError(str(exc)) from exc
