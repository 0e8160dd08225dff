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
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from mcd import failpoints, policy
from mcd.config.ignition import EMPTY_IGNITION, IgnitionConfig, Unit
from mcd.config.machineconfig import MachineConfig, empty_machineconfig, machineconfig_from_object
from mcd.host import fsops, ondisk, state
from mcd.host.accounts import Accounts
from mcd.host.errors import HostError
from mcd.host.files import UNIT_DIR, FileWriter, dropin_path, noorig_path, orig_path, unit_path
from mcd.host.reboot import Rebooter, Reboots
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.rpmostree import RpmOstree, RpmOstreeError, booted_image
from mcd.host.runner import ChrootRunner, Runner
from mcd.host.ssh import SshKeyWriter
from mcd.host.systemd import SystemdManager, UnitWriter, make_manager
from mcd.osupdate import node_arch
from mcd.plan import Facts, Plan, plan

LOG = logging.getLogger(__name__)

SSH_DIR = "/home/core/.ssh/authorized_keys.d"
KUBECONFIG = "/etc/kubernetes/kubeconfig"
KUBELET_CA = "/etc/kubernetes/kubelet-ca.crt"
OSTREE_BOOTED = "/run/ostree-booted"


class UpdateError(RuntimeError):
    """The update failed; the node was rolled back to the old config."""


class Unreconcilable(UpdateError):
    """The update cannot be applied in place; nothing was changed."""

    def __init__(self, plan_: Plan) -> None:
        self.plan = plan_
        super().__init__(plan_.reason)


@dataclass
class Host:
    """Everything an update touches on one root, wired once."""

    root: HostRoot
    runner: Runner
    coreos: bool
    accounts: Accounts
    files: FileWriter
    systemd: SystemdManager
    units: UnitWriter
    ssh: SshKeyWriter
    rpmostree: RpmOstree | None
    rebooter: Reboots
    # a running system (the live `/`): services can be reloaded and the machine rebooted
    live: bool = False

    @classmethod
    def for_root(
        cls,
        root: HostRoot,
        runner: Runner,
        *,
        coreos: bool | None = None,
        rpmostree_binary: str = "rpm-ostree",
    ) -> Host:
        if coreos is None:
            coreos = root.join(OSTREE_BOOTED).exists()
        accounts = Accounts.load(root)
        files = FileWriter(root, accounts, coreos=coreos)
        live = root.runs_systemd
        # the node mounted in the pod: systemd over the node's bus, host commands inside its root
        host_runner: Runner = runner
        if live and not root.is_live:
            host_runner = ChrootRunner(runner, str(root.prefix))
            systemd = make_manager(root, host_runner, live=True, bus_address=_bus_address(root))
        else:
            systemd = make_manager(root, runner)
        units = UnitWriter(
            root,
            systemd,
            write_files=files.write_unit_files,
            remove_file=files.remove_unit_path,
            mask_file=files.mask_unit_path,
            unmask_file=files.unmask_unit_path,
        )
        return cls(
            root=root,
            runner=runner,
            coreos=coreos,
            accounts=accounts,
            files=files,
            systemd=systemd,
            units=units,
            ssh=SshKeyWriter(root, accounts, runner),
            rpmostree=RpmOstree(host_runner, binary=rpmostree_binary) if coreos else None,
            rebooter=Rebooter(host_runner, coreos=coreos),
            live=live,
        )


def _bus_address(root: HostRoot) -> str:
    """The D-Bus system bus of the system mounted at `root` (its socket, through the mount)."""
    return f"unix:path={root.prefix}/run/dbus/system_bus_socket"


@dataclass(frozen=True)
class Outcome:
    """What an update did."""

    plan: Plan
    reboot: bool
    rebooted: bool
    actions_run: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


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


def facts_for(host: Host) -> Facts:
    """Facts the planner needs, read from the root (the planner itself never reads them)."""
    fips_path = host.root.join("/proc/sys/crypto/fips_enabled")
    node_fips: bool | None = None
    try:
        node_fips = fips_path.read_text().strip() == "1"
    except OSError:
        node_fips = None
    arch = node_arch(os.uname().machine)
    if host.rpmostree is None:
        return Facts(
            forcefile=state.forcefile_present(host.root), node_fips=node_fips, coreos=host.coreos, arch=arch
        )
    # the OS step works from what the node boots, not from what the old config says (spec §5.1)
    try:
        status = host.rpmostree.status()
        image = booted_image(status)
    except RpmOstreeError as exc:
        raise UpdateError(f"cannot read the booted deployment: {exc}") from exc
    return Facts(
        forcefile=state.forcefile_present(host.root),
        node_fips=node_fips,
        coreos=host.coreos,
        arch=arch,
        booted_image=image,
        requested_packages=status.booted.requested_packages,
        requested_base_removals=status.booted.requested_base_removals,
    )


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
) -> Outcome:
    """Apply `new` over `old` on the host; on failure roll back and raise UpdateError."""
    # an update joins thousands of paths in a few directories: resolve each directory once
    with host.root.caching_dirs():
        return _apply(
            host,
            old,
            new,
            legacy=legacy,
            policies=policies,
            skip_reboot=skip_reboot,
            skip_certificate_write=skip_certificate_write,
            facts=facts,
        )


def _apply(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    *,
    legacy: bool,
    policies: policy.ClusterPolicies,
    skip_reboot: bool,
    skip_certificate_write: bool,
    facts: Facts | None,
) -> Outcome:
    facts = facts if facts is not None else facts_for(host)
    old_ign = old.config or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    _sweep_temp_files(host, old_ign, new_ign)
    p = plan(old, new, facts, policies, legacy=legacy)
    if not p.reconcilable:
        raise Unreconcilable(p)
    _refuse_bad_os_fields(p)
    if p.diff.is_empty and not facts.forcefile and state.pending(host.root) is None:
        drift = ondisk.first_error(host.root, new.config or EMPTY_IGNITION, host.systemd.is_enabled)
        if drift is None and state.read_current_config(host.root) == mc_json(new):
            # already there: no transaction record, no write, no action (re-runs are no-ops);
            # only backups of restored originals left by an interrupted commit are collected
            host.files.collect_restored(None, new_ign)
            owed = state.pending_reboot(host.root)
            if owed is None:
                return Outcome(p, reboot=False, rebooted=False, notes=("already in the desired config",))
            # applied, but the reboot it needs failed, was skipped or was cut short: ask again
            return _reboot(host, p, owed.reason, skip_reboot=skip_reboot, notes=("reboot still pending",))
    if facts.forcefile:
        # upstream deletes the forcefile when it computes the actions: it forces one update only
        state.remove_forcefile(host.root)
    # everything the host could refuse is checked before anything is recorded or written
    changed_units = {c.name for c in p.diff.unit_changes}
    # the units written: the changed ones (all with the forcefile, as upstream)
    units = new_ign.units if facts.forcefile else tuple(u for u in new_ign.units if u.name in changed_units)
    unchanged = _unchanged_paths(old_ign, new_ign)
    try:
        host.files.check(
            new_ign.files, units, skip=(KUBELET_CA,) if skip_certificate_write else (), unchanged=unchanged
        )
        # pruning touches the old config's units that go away
        host.files.check((), [u for u in old_ign.units if u.name in changed_units])
    except HostError as exc:
        raise UpdateError(f"update to {new.name} refused, nothing was changed: {exc}") from exc
    old_json, new_json = mc_json(old), mc_json(new)
    state.begin(host.root, state.Transaction(old_json, new_json, "apply", "legacy" if legacy else "policy"))
    failpoints.hit("transaction recorded")
    undo: list[tuple[str, Callable[[], None]]] = []
    reboot = _needs_reboot(p)
    reason = f"Node will reboot into config {new.name}"
    try:
        # directory entries are made durable once per directory, before the commit
        with fsops.deferred_dir_sync():
            _run_steps(
                host,
                p,
                old_ign,
                new_ign,
                undo,
                units=units,
                unchanged=unchanged,
                skip_certs=skip_certificate_write,
            )
        # reloads and restarts run before the commit: when one fails the update is rolled back
        # (as upstream); a reboot is requested once the new config is committed
        actions_run = () if reboot else _run_actions(host, p)
        if reboot:
            state.mark_reboot(host.root, new.name, reason)
        state.commit(host.root, new.ocl_image)
        failpoints.hit("transaction committed")
    except Exception as exc:
        try:
            _roll_back(host, old_ign, undo, failed=new.name)
        except UpdateError as rollback_exc:
            # both matter: why the update failed, and why the node could not be put back
            raise UpdateError(f"update to {new.name} failed: {exc}; {rollback_exc}") from exc
        if isinstance(exc, UpdateError):
            raise
        raise UpdateError(f"update to {new.name} failed and was rolled back: {exc}") from exc
    # committed: no re-run can follow, so the backups of restored originals can go
    host.files.collect_restored(None, new_ign)
    if reboot:
        return _reboot(host, p, reason, skip_reboot=skip_reboot)
    owed = state.pending_reboot(host.root)
    if owed is not None:
        # this change needs none, but an earlier one still does (skipped or failed): say so, ask
        outcome = _reboot(host, p, owed.reason, skip_reboot=skip_reboot, notes=("reboot still pending",))
        return replace(outcome, actions_run=actions_run)
    return Outcome(p, reboot=False, rebooted=False, actions_run=actions_run)


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


def _run_steps(
    host: Host,
    p: Plan,
    old_ign: IgnitionConfig,
    new_ign: IgnitionConfig,
    undo: list[tuple[str, Callable[[], None]]],
    *,
    units: Sequence[Unit],
    unchanged: Collection[str],
    skip_certs: bool,
) -> None:
    # files, units and stale data are undone together by applying the old config back
    undo.append(("files and units", lambda: _undo_files_units(host, new_ign, old_ign)))
    # update() ran the host checks on exactly these files and units before recording the update
    skip = (KUBELET_CA,) if skip_certs else ()
    _apply_files_units(host, old_ign, new_ign, units, skip=skip, unchanged=unchanged, checked=True)
    failpoints.hit("files and units written")
    # upstream makes the kubelet's kubeconfig private on every update; only a regular file is
    # touched (chmod would follow a symlink, possibly out of the root)
    kubeconfig = host.root.join(KUBECONFIG)
    st = fsops.lstat_or_none(kubeconfig)
    if st is not None and stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != 0o600:
        os.chmod(kubeconfig, 0o600)
    if p.diff.passwd:
        undo.append(("ssh keys", lambda: _apply_passwd(host, new_ign, old_ign)))
        _apply_passwd(host, old_ign, new_ign)
        failpoints.hit("ssh keys written")
    if host.rpmostree is not None and _os_commands(p):
        rpm = host.rpmostree
        undo.append(("os", rpm.cleanup_pending))
        _apply_os(host, rpm, p)
        failpoints.hit("os staged")


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


def _os_commands(p: Plan) -> list[tuple[str, ...]]:
    """The plan's rpm-ostree commands; UpdateError when the plan found OS fields the node cannot apply."""
    _refuse_bad_os_fields(p)
    return [c for c in p.commands if c and c[0] == "rpm-ostree"]


def _apply_os(host: Host, rpm: RpmOstree, p: Plan) -> None:
    """Run the plan's rpm-ostree commands (the plan already encodes upstream's order), then check
    that the staged deployment requests every extension package."""
    for cmd in _os_commands(p):
        rpm.run_planned(list(cmd))
        failpoints.hit("rpm-ostree command done")
    rpm.verify_extensions(p.extension_packages)


def _refuse_bad_os_fields(p: Plan) -> None:
    """UpdateError when the new config names OS changes this node cannot make (nothing is run)."""
    if p.os_errors:
        raise UpdateError(f"update to {p.new_name} refused: {'; '.join(p.os_errors)}")


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


def _needs_reboot(p: Plan) -> bool:
    return any((a if isinstance(a, str) else a.type) in ("reboot", "Reboot") for a in p.actions)


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


def _run_actions(host: Host, p: Plan) -> tuple[str, ...]:
    """Run the plan's post-config actions other than a reboot; a failure raises (the update rolls back).

    Under a root that is not a running system nothing runs: the services pick the change up
    when that root boots, and the actions are reported as skipped.
    """
    todo: list[tuple[str, Callable[[], None]]] = []
    for a in p.actions:
        kind = a if isinstance(a, str) else a.type
        if kind in {"reload crio", "Special"}:
            todo.append(("reload crio.service", partial(host.systemd.reload, "crio.service")))
        elif kind == "restart crio":
            todo.append(("restart crio.service", partial(_update_ca_trust_then_restart_crio, host)))
        elif kind == "Reload":
            todo.append((f"reload {a.service}", partial(host.systemd.reload, a.service)))
        elif kind == "Restart":
            todo.append((f"restart {a.service}", partial(_restart, host, a.service)))
        elif kind == "DaemonReload":
            todo.append(("daemon-reload", host.systemd.daemon_reload))
    if not host.live:
        return tuple(f"{label} (skipped: not the live root)" for label, _ in todo)
    for _, action in todo:
        action()
        failpoints.hit("post-config action done")
    return tuple(label for label, _ in todo)


def _update_ca_trust_then_restart_crio(host: Host) -> None:
    host.runner.run(["update-ca-trust"], check=False)
    host.systemd.restart("crio.service")


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
            # the recorded update ran with the forcefile's effect already decided; not again
            facts=replace(facts_for(host), forcefile=False),
        )
    except HostError as exc:
        raise UpdateError(str(exc)) from exc
