"""The update transaction: turn a plan into the desired on-disk state, or leave the old one.

Upstream's `update()` order is kept: files, units, stale data, SSH keys and passwords, OS
(rpm-ostree), persisted current config, post-config action. Each completed step registers
its undo; when a later step fails, the undos run in reverse and the node is back in the old
config. Crash safety comes from three facts: every single write is atomic (fsops), every step
is idempotent (re-writing identical content writes nothing, backups are taken once), and a
write-ahead record (`state.TRANSACTION`) is on disk from before the first change to after the
last — a restarted process finds it and re-runs the same transaction, which converges.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mcd import failpoints, policy
from mcd import steps as st
from mcd.config.ignition import EMPTY_IGNITION, IgnitionConfig, Unit
from mcd.config.machineconfig import MachineConfig, empty_machineconfig, machineconfig_from_object
from mcd.host import fsops, ondisk, state
from mcd.host.errors import HostError
from mcd.host.facts import probe
from mcd.host.files import noorig_path, orig_path
from mcd.host.root import PathEscapeError
from mcd.host.systemd import SystemdError
from mcd.host.wiring import Host
from mcd.nodefacts import Facts
from mcd.paths import KUBELET_CA, UNIT_DIR, dropin_path, unit_path
from mcd.plan import Plan, plan
from mcd.steps import Step

__all__ = ["Host", "Outcome", "Ran", "Unreconcilable", "UpdateError", "recover", "request_reboot", "update"]

LOG = logging.getLogger(__name__)

SSH_DIR = "/home/core/.ssh/authorized_keys.d"
UNIT_FILE_MODE = 0o644
# a drain callback: only a cluster agent has one (once-from reports the drain skipped)
Drainer = Callable[[], None]


class UpdateError(RuntimeError):
    """The update failed; the node was rolled back to the old config."""


class Unreconcilable(UpdateError):
    """The update cannot be applied in place; nothing was changed."""

    def __init__(self, plan_: Plan) -> None:
        self.plan = plan_
        super().__init__(plan_.reason)


@dataclass(frozen=True)
class Ran:
    """A step the update carried out, or `skipped` saying why it could not here."""

    step: Step
    skipped: str = ""

    def to_json(self) -> dict[str, object]:
        out = st.step_json(self.step)
        if self.skipped:
            out["skipped"] = self.skipped
        return out


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


def load_mc(obj: Mapping[str, Any] | None, what: str) -> MachineConfig:
    """A persisted config back into a MachineConfig (None: upstream's empty config)."""
    if obj is None:
        return empty_machineconfig()
    return machineconfig_from_object(obj, what)


def facts_for(
    host: Host, old: MachineConfig, new: MachineConfig, *, skip_certificate_write: bool = False
) -> Facts:
    """The probe's facts, its failures as UpdateError (nothing was changed yet)."""
    try:
        return probe(host, old, new, skip_certificate_write=skip_certificate_write)
    except HostError as exc:
        raise UpdateError(str(exc)) from exc


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
    drain: Drainer | None = None,
    storage_overrides: Sequence[str] = (),
) -> Outcome:
    """Apply `new` over `old` on the host; on failure roll back and raise UpdateError.

    The host is probed (unless `facts` are given), the pure planner turns the facts into steps,
    and exactly those steps run, in order. `drain` is the cluster agent's drain (without one a
    planned drain is reported skipped); `storage_overrides` are the MachineConfiguration's
    irreconcilableValidationOverrides.storage.
    """
    # an update joins thousands of paths in a few directories: resolve each directory once
    with host.root.caching_dirs():
        if facts is None:
            facts = facts_for(host, old, new, skip_certificate_write=skip_certificate_write)
        p = plan(old, new, facts, policies, legacy=legacy, storage_overrides=storage_overrides)
        return _apply(host, old, new, p, facts, skip_reboot=skip_reboot, drain=drain)


def _apply(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    p: Plan,
    facts: Facts,
    *,
    skip_reboot: bool,
    drain: Drainer | None,
) -> Outcome:
    old_ign = old.config or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    _sweep_temp_files(host, old_ign, new_ign)
    if not p.reconcilable:
        raise Unreconcilable(p)
    if p.os_errors:
        raise UpdateError(f"update to {p.new_name} refused: {'; '.join(p.os_errors)}")
    if p.diff.is_empty and not facts.forcefile and state.pending(host.root) is None:
        drift = ondisk.first_error(host.root, new_ign, host.systemd.is_enabled)
        if drift is None and state.read_current_config(host.root) == mc_json(new):
            # already there: no transaction record, no write, no action (re-runs are no-ops);
            # only backups of restored originals left by an interrupted commit are collected
            host.files.collect_restored(None, new_ign)
            owed = state.pending_reboot(host.root)
            if owed is None:
                return Outcome(p, reboot=False, rebooted=False, notes=("already in the desired config",))
            # applied, but the reboot it needs failed, was skipped or was cut short: ask again
            return _reboot(host, p, owed.reason, skip_reboot=skip_reboot, notes=("reboot still pending",))
    _check(host, old_ign, new_ign, p, facts)
    old_json, new_json = mc_json(old), mc_json(new)
    state.begin(host.root, state.Transaction(old_json, new_json, "apply", "legacy" if p.legacy else "policy"))
    failpoints.hit("transaction recorded")
    for note in p.notes:
        LOG.info("%s", note)
    run = _Run(host, old_ign, new_ign, drain)
    reboot = next((s for s in p.steps if isinstance(s, st.Reboot)), None)
    try:
        # directory entries are made durable once per directory, before the commit
        with fsops.deferred_dir_sync(), host.files.replacing(old_ign):
            for step in p.steps:
                if not isinstance(step, st.ACTION_STEPS):
                    run.step(step)
        # reloads and restarts run before the commit: when one fails the update is rolled back
        # (as upstream); a reboot is requested once the new config is committed
        for step in p.steps:
            if isinstance(step, st.ACTION_STEPS) and not isinstance(step, st.Reboot):
                run.action(step)
        if reboot is not None and not reboot.owed:
            state.mark_reboot(host.root, new.name, reboot.reason)
        state.commit(host.root, new.ocl_image)
        failpoints.hit("transaction committed")
    except Exception as exc:
        try:
            _roll_back(host, old_ign, run.undo, failed=new.name)
        except UpdateError as rollback_exc:
            # both matter: why the update failed, and why the node could not be put back
            raise UpdateError(f"update to {new.name} failed: {exc}; {rollback_exc}") from exc
        if isinstance(exc, UpdateError):
            raise
        raise UpdateError(f"update to {new.name} failed and was rolled back: {exc}") from exc
    # committed: no re-run can follow, so the backups of restored originals can go
    host.files.collect_restored(None, new_ign)
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
    changed_units = {c.name for c in p.diff.unit_changes}
    units = new_ign.units if facts.forcefile else tuple(u for u in new_ign.units if u.name in changed_units)
    try:
        host.files.check(
            new_ign.files,
            units,
            skip=(KUBELET_CA,) if facts.skip_certificate_write else (),
            unchanged=_unchanged_paths(old_ign, new_ign),
        )
        # pruning touches the old config's units that go away
        host.files.check((), [u for u in old_ign.units if u.name in changed_units])
    except HostError as exc:
        raise UpdateError(f"update to {p.new_name} refused, nothing was changed: {exc}") from exc


def _sweep_temp_files(host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> None:
    """Remove what writers killed mid-write left behind, in every directory an update writes to.

    Only the daemon's own directory unless an update was interrupted (its record is there):
    every other write happens inside a transaction.
    """
    for leftover in fsops.sweep_temp_files(host.root.join(state.STATE_DIR, follow_final=True)):
        LOG.warning("removed %s, left by an interrupted write", leftover)
    if fsops.lstat_or_none(host.root.join(state.TRANSACTION)) is None:
        return
    paths = {f"{SSH_DIR}/x"}
    for ign in (old_ign, new_ign):
        paths.update(f.path for f in ign.files)
        for u in ign.units:
            paths.add(unit_path(u.name))
            paths.update(dropin_path(u.name, d.name) for d in u.dropins)
    dirs = set()
    for path in paths:
        for p in (path, orig_path(path), noorig_path(path)):
            dirs.add(posixpath.dirname(p))
    dirs.add(f"{UNIT_DIR}/multi-user.target.wants")
    for d in sorted(dirs):
        try:
            host_dir = host.root.join(d, follow_final=True)
        except PathEscapeError:
            continue
        for leftover in fsops.sweep_temp_files(host_dir):
            LOG.warning("removed %s, left by an interrupted write", leftover)


class _Run:
    """Carries out one plan's steps in order, registering each phase's undo before its first step."""

    def __init__(self, host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig, drain: Drainer | None):
        self.host, self.old_ign, self.new_ign, self.drain = host, old_ign, new_ign, drain
        self.undo: list[tuple[str, Callable[[], None]]] = []
        self.ran: list[Ran] = []
        self._files = {f.path: f for f in new_ign.files}
        self._unit_files: dict[str, bytes] = {}
        for u in new_ign.units:
            if u.contents:
                self._unit_files[unit_path(u.name)] = u.contents.encode()
            for d in u.dropins:
                if d.contents:
                    self._unit_files[dropin_path(u.name, d.name)] = d.contents.encode()

    def _phase(self, what: str, undo: Callable[[], None]) -> None:
        if all(name != what for name, _ in self.undo):
            self.undo.append((what, undo))

    def step(self, step: Step) -> None:
        """Run one step that changes the node before the commit."""
        host = self.host
        skipped = ""
        match step:
            case st.ConsumeForcefile():
                # upstream deletes the forcefile when it computes the actions: it forces one update only
                state.remove_forcefile(host.root)
            case st.Drain():
                if self.drain is None:
                    skipped = "no cluster to drain from"
                else:
                    self.drain()
            case (
                st.WriteFiles()
                | st.RemoveFile()
                | st.RestoreOriginal()
                | st.WriteUnitFiles()
                | st.Mask()
                | st.Unmask()
                | st.Enable()
                | st.Disable()
                | st.Preset()
                | st.Chmod()
            ):
                # files, units and stale data are undone together by applying the old config back
                self._phase("files and units", lambda: _undo_files_units(host, self.new_ign, self.old_ign))
                self._disk(step)
            case st.WriteSshKeys() | st.SetPassword() | st.ClearPassword():
                self._phase("ssh keys", lambda: _apply_passwd(host, self.new_ign, self.old_ign))
                self._passwd(step)
            case st.OsCommand() | st.Rebase() | st.VerifyExtensions():
                rpm = host.rpmostree
                if rpm is None:
                    skipped = "not an rpm-ostree system"
                else:
                    self._phase("os", rpm.cleanup_pending)
                    match step:
                        case st.Rebase(image=image):
                            rpm.rebase(image)
                        case st.OsCommand(argv=argv):
                            rpm.run_planned(argv)
                        case st.VerifyExtensions(packages=packages):
                            rpm.verify_extensions(packages)
            case _:
                raise AssertionError(f"not a step run before the commit: {step}")
        self.ran.append(Ran(step, skipped))
        failpoints.hit(f"step {step.kind} done")

    def _disk(self, step: Step) -> None:
        host = self.host
        match step:
            case st.WriteFiles(paths=paths):
                # update() ran the host checks on exactly these files before recording the update
                host.files.write_files([self._files[p] for p in paths], checked=True)
            case st.RemoveFile(path=path):
                host.files.remove_path(path)
            case st.RestoreOriginal(path=path):
                host.files.restore(path)
            case st.WriteUnitFiles(paths=paths):
                host.files.write_unit_files([(p, self._unit_files[p], UNIT_FILE_MODE) for p in paths])
            case st.Mask(unit=unit):
                host.files.mask_unit_path(unit_path(unit))
            case st.Unmask(unit=unit):
                host.files.unmask_unit_path(unit_path(unit))
            case st.Enable(units=units):
                _systemd(lambda: host.systemd.enable(units), "error enabling units")
            case st.Disable(units=units, reason=reason):
                what = (
                    f"disabling {' '.join(units)} failed" if reason == "rewrite" else "error disabling unit"
                )
                _systemd(lambda: host.systemd.disable(units), what)
            case st.Preset(unit=unit):
                try:
                    host.systemd.preset(unit)
                except SystemdError as e:  # e.g. a dropin for a unit that does not exist
                    LOG.info("Could not reset unit preset for %s, skipping. (Error msg: %s)", unit, e.output)
            case st.Chmod(path=path, mode=mode):
                os.chmod(host.root.join(path), mode)

    def _passwd(self, step: Step) -> None:
        users = {u.name: u for u in self.new_ign.users}
        match step:
            case st.WriteSshKeys():
                self.host.ssh.apply(self.new_ign.users)
            case st.SetPassword(user=user):
                self.host.ssh.set_password(user, users[user].password_hash)
            case st.ClearPassword(user=user):
                self.host.ssh.clear_password(user)

    def action(self, step: Step) -> None:
        """Run a post-config action other than a reboot; a failure raises (the update rolls back).

        Under a root that is not a running system nothing runs: the services pick the change up
        when that root boots, and the actions are reported as skipped.
        """
        host = self.host
        if not host.live:
            self.ran.append(Ran(step, "not the live root"))
            return
        match step:
            case st.ReloadService(unit=unit):
                host.systemd.reload(unit)
            case st.RestartService(unit=unit):
                _restart(host, unit)
            case st.DaemonReload():
                host.systemd.daemon_reload()
            case st.UpdateCaTrust():
                host.runner.run(["update-ca-trust"], check=False)
        self.ran.append(Ran(step))
        failpoints.hit("post-config action done")


def _systemd(call: Callable[[], None], what: str) -> None:
    try:
        call()
    except SystemdError as e:
        raise SystemdError(f"{what}: {e.output}", dbus_name=e.dbus_name) from e


def _apply_files_units(
    host: Host,
    old_ign: IgnitionConfig,
    new_ign: IgnitionConfig,
    units: Sequence[Unit],
    skip: Sequence[str] = (),
    *,
    unchanged: Collection[str] | None = None,
    checked: bool = False,
) -> None:
    if unchanged is None:
        unchanged = _unchanged_paths(old_ign, new_ign)
    with host.files.replacing(old_ign):
        host.files.write_files(new_ign.files, skip=skip, unchanged=unchanged, checked=checked)
        host.units.write_units(units)
    host.units.remove_units(old_ign.units, new_ign.units)
    host.files.delete_stale(old_ign, new_ign)


def _unchanged_paths(old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> set[str]:
    """Files declared in `new` exactly as in `old` (the config already applied)."""
    before = {f.path: f for f in old_ign.files}
    return {f.path for f in new_ign.files if before.get(f.path) == f}


def _undo_files_units(host: Host, new_ign: IgnitionConfig, old_ign: IgnitionConfig) -> None:
    """Apply the old config back over a partly applied new one.

    Paths the failed update never reached have no backup or stamp and are left alone.
    """
    host.files.delete_unrecorded = False
    try:
        _apply_files_units(host, new_ign, old_ign, old_ign.units)
    finally:
        host.files.delete_unrecorded = True


def _apply_passwd(host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> None:
    host.ssh.apply(new_ign.users)
    host.ssh.set_password_hashes(old_ign.users, new_ign.users)


def _roll_back(
    host: Host, old_ign: IgnitionConfig, undo: list[tuple[str, Callable[[], None]]], *, failed: str
) -> None:
    owed = state.pending_reboot(host.root)
    if owed is not None and owed.config == failed:
        state.clear_reboot(host.root)  # the failed config will not be booted into
    new_record = state.pending(host.root)
    if new_record is not None:
        state.begin(host.root, state.Transaction(new_record.old, new_record.new, "rollback", new_record.mode))
    errors: list[str] = []
    for what, fn in reversed(undo):
        try:
            fn()
        except Exception as exc:  # every undo runs; the failures are reported together
            errors.append(f"{what}: {exc}")
    if errors:
        # the record stays: a restart re-runs the transaction and converges
        raise UpdateError("error rolling back changes: " + "; ".join(errors))
    state.finish(host.root)
    host.files.collect_restored(None, old_ign)


def _reboot(host: Host, p: Plan, reason: str, *, skip_reboot: bool, notes: tuple[str, ...] = ()) -> Outcome:
    """Request the reboot the committed config needs (it stays recorded until the node has rebooted).

    A failed request raises RebootError (upstream's message); the record makes the next run ask
    again instead of taking the node as done.
    """
    if skip_reboot:
        LOG.info("reboot required (%s), skipped (--skip-reboot)", reason)
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


CA_TRUST_SERVICE = "coreos-update-ca-trust.service"


def _restart(host: Host, service: str) -> None:
    try:
        host.systemd.restart(service)
    except Exception:
        if service != CA_TRUST_SERVICE:
            raise
        # the unit may be missing on older images: run what it runs (upstream's fallback)
        LOG.warning("restarting %s failed; running update-ca-trust directly", service)
        host.runner.run(["update-ca-trust"])


def recover(host: Host, *, skip_reboot: bool = True) -> Outcome | None:
    """Finish an interrupted update: re-run the recorded transaction, which converges.

    A record in phase "apply" means the process died while applying: the same update runs
    again. In phase "rollback" it died while undoing a failed update: the update runs again
    too, fails at the same step if the cause persists, and rolls back completely this time.
    """
    txn = state.pending(host.root)
    if txn is None:
        return None
    LOG.warning("found an interrupted update (phase %s): re-running it", txn.phase)
    old = load_mc(txn.old, state.TRANSACTION)
    new = load_mc(txn.new, state.TRANSACTION)
    try:
        return update(
            host,
            old,
            new,
            legacy=txn.mode == "legacy",
            skip_reboot=skip_reboot,
        )
    except HostError as exc:
        raise UpdateError(str(exc)) from exc
