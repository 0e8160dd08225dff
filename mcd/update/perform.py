"""Carrying out one step of a plan: each step is one host operation (the executor's hands).

`StepRunner.step` runs a step that changes the node before the commit, `action` a post-config
action; each phase registers its undo (the old config applied back, the old SSH keys and
passwords, the staged deployment discarded) before its first step, for the executor's rollback.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from mcd.config.contents import ContentsError
from mcd.config.ignition import IgnitionConfig, Unit
from mcd.config.text import escape_controls, shown
from mcd.host import atomicfs, failpoints, state
from mcd.host.errors import StepError, os_error_text
from mcd.host.originals import noorig_path, orig_path
from mcd.host.root import PathEscapeError
from mcd.host.runner import CommandError
from mcd.host.ssh import KEYS_DIR, KEYS_PATH, SSH_DIR
from mcd.host.systemd import SystemdError
from mcd.host.wiring import Host
from mcd.planner import steps as st
from mcd.planner.managed_paths import UNIT_DIR, UNIT_FILE_MODE, dropin_path, unit_path
from mcd.planner.steps import Step

LOG = logging.getLogger(__name__)

# what writing core's SSH keys may create, deepest first
SSH_PATHS = (KEYS_PATH, KEYS_DIR, SSH_DIR)
# what the executor calls at the plan's drain step: a cluster agent passes its drain (mcd.agent.drain
# runs it); once-from has none and reports the step skipped
DrainHook = Callable[[], None]


class OsStepError(RuntimeError):
    """The OS step failed where the plan said it would (an `OsFailure` step); the transaction
    rolls back and reports it as an UpdateError."""


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


class StepRunner:
    """Carries out one plan's steps in order, registering each phase's undo before its first step."""

    def __init__(
        self,
        host: Host,
        old_ign: IgnitionConfig,
        new_ign: IgnitionConfig,
        drain: DrainHook | None,
        *,
        legacy: bool = False,
        created: Sequence[str] = (),
    ):
        self.host, self.old_ign, self.new_ign, self.drain = host, old_ign, new_ign, drain
        # what the update may create and was not there before it (`created_paths`, recorded
        # with the update so a rollback after a restart knows them too)
        self.created = created
        # the legacy actions word a failed crio restart as a reload (upstream's text)
        self.legacy = legacy
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

    def _registered(self, what: str) -> bool:
        return any(name == what for name, _ in self.undo)

    def _phase(self, what: str, undo: Callable[[], None]) -> None:
        if not self._registered(what):
            self.undo.append((what, undo))

    def step(self, step: Step) -> None:
        """Run one step that changes the node before the commit.

        An OS error (a full disk, a name too long) comes out as a StepError naming the step: the
        caller knows whether anything had changed, the message says where it stopped.
        """
        try:
            self._step(step)
        except OSError as exc:
            raise StepError(f"{shown(st.step_text(step))}: {os_error_text(exc)}") from exc
        except ContentsError as exc:  # a large file's contents failed while streamed to disk
            raise StepError(f"{shown(st.step_text(step))}: {escape_controls(str(exc))}") from exc

    def _step(self, step: Step) -> None:
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
                # files, units and stale data are undone together by applying the old config back;
                # the directories the update created go too
                if not self._registered("files and units"):
                    dirs = self.created
                    self._phase(
                        "files and units", lambda: _undo_files_units(host, self.new_ign, self.old_ign, dirs)
                    )
                self._disk(step)
            case st.WriteSshKeys() | st.SetPassword() | st.ClearPassword():
                if not self._registered("ssh keys"):
                    created = self.created
                    self._phase("ssh keys", lambda: _undo_passwd(host, self.new_ign, self.old_ign, created))
                self._passwd(step)
            case st.OsFailure(message=message):
                # the commands before it ran; the executor's rollback discards what they staged
                raise OsStepError(message)
            case (
                st.OsCommand()
                | st.CheckRpmOstree()
                | st.LinkPullSecret()
                | st.Rebase()
                | st.VerifyExtensions()
            ):
                rpm = host.rpmostree
                if rpm is None:
                    skipped = "not an rpm-ostree system"
                else:
                    self._phase("os", rpm.cleanup_pending)
                    match step:
                        case st.CheckRpmOstree(feature=feature):
                            rpm.require_feature(feature)
                        case st.LinkPullSecret():
                            rpm.link_pull_secret()
                        case st.Rebase(image=image):
                            if host.bootloader is not None:
                                # a Secure Boot host must trust the new image's signing keys first
                                host.bootloader.update_before_rebase(image)
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
                host.files.originals.remove_path(path)
            case st.RestoreOriginal(path=path):
                host.files.originals.restore(path)
            case st.WriteUnitFiles(paths=paths):
                host.units.files.write_unit_files([(p, self._unit_files[p], UNIT_FILE_MODE) for p in paths])
            case st.Mask(unit=unit):
                host.units.files.mask_unit_path(unit_path(unit))
            case st.Unmask(unit=unit):
                host.units.files.unmask_unit_path(unit_path(unit))
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
                _act(lambda: host.systemd.reload(unit), reload_failed(unit), reload_event(unit, self.legacy))
            case st.RestartService(unit=unit):
                what = reload_failed(unit) if self.legacy else restart_failed(unit)
                event = reload_event(unit, True) if self.legacy else restart_event(unit)
                _act(lambda: _restart(host, unit), what, event)
            case st.DaemonReload():
                _act(
                    host.systemd.daemon_reload,
                    reload_failed("daemon-reload"),
                    reload_event("daemon-reload", False),
                )
            case st.UpdateCaTrust():
                # upstream stops the legacy `restart crio` when the trust store cannot be rebuilt
                update_ca_trust(host)
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
    *,
    keep_unrecorded: bool,
) -> None:
    with host.files.originals.replacing(old_ign):
        host.files.write_files(new_ign.files, unchanged=unchanged_paths(old_ign, new_ign))
        host.units.write_units(units, keep_unrecorded=keep_unrecorded)
    host.units.remove_units(old_ign.units, new_ign.units, keep_unrecorded=keep_unrecorded)
    host.files.delete_stale(old_ign, new_ign, keep_unrecorded=keep_unrecorded)


def unchanged_paths(old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> set[str]:
    """Files declared in `new` exactly as in `old` (the config already applied)."""
    before = {f.path: f for f in old_ign.files}
    return {f.path for f in new_ign.files if before.get(f.path) == f}


def _undo_files_units(
    host: Host, new_ign: IgnitionConfig, old_ign: IgnitionConfig, created_dirs: Sequence[str]
) -> None:
    """Apply the old config back over a partly applied new one, then drop the directories it made.

    Paths the failed update never reached have no backup or stamp and are left alone.
    `created_dirs` (deepest first) did not exist before the update: those left empty go.
    """
    _apply_files_units(host, new_ign, old_ign, old_ign.units, keep_unrecorded=True)
    _remove_empty_dirs(host, created_dirs)


def _undo_passwd(
    host: Host, new_ign: IgnitionConfig, old_ign: IgnitionConfig, created: Sequence[str]
) -> None:
    """Put back the old keys and hashes; a key file and directories the update made go again."""
    if KEYS_PATH in created:
        # the node had no key file: an empty one would be a file the old config never made
        atomicfs.remove(host.root.join(KEYS_PATH), dirsync=host.files.dirsync)
        _remove_empty_dirs(host, [p for p in created if p != KEYS_PATH])
    else:
        host.ssh.apply(old_ign.users)
    host.ssh.set_password_hashes(new_ign.users, old_ign.users)


def created_paths(host: Host, steps: Sequence[Step], earlier: Iterable[str] = ()) -> list[str]:
    """What the steps may create that is not on the root now, deepest first: the directories
    above the paths they write (and above those paths' backups and stamps), the SSH key file
    and its directories. `earlier`: those an interrupted run of the same update had found (it
    may have created them since). A rollback removes the directories left empty, and the key
    file."""
    paths = _parent_dirs(_written_paths(steps))
    if any(isinstance(s, st.WriteSshKeys | st.SetPassword | st.ClearPassword) for s in steps):
        paths.update(SSH_PATHS)
    found = _absent(host, paths)
    return sorted({*found, *earlier}, key=_deepest_first)


def _deepest_first(path: str) -> tuple[int, str]:
    return (-path.count("/"), path)


def _written_paths(steps: Sequence[Step]) -> list[str]:
    """The paths the steps write (files, unit files, dropins, masks)."""
    paths: list[str] = []
    for step in steps:
        match step:
            case st.WriteFiles(paths=written) | st.WriteUnitFiles(paths=written):
                paths += written
            case st.Mask(unit=unit):
                paths.append(unit_path(unit))
    return paths


def _parent_dirs(paths: Iterable[str]) -> set[str]:
    """Every directory above `paths` and above their backups and stamps."""
    dirs: set[str] = set()
    # paths of one directory have their backups and stamps in one directory each: one will do
    for path in {posixpath.dirname(p): p for p in paths}.values():
        for kept in (path, orig_path(path), noorig_path(path)):
            d = posixpath.dirname(kept)
            while d not in dirs and d != "/":
                dirs.add(d)
                d = posixpath.dirname(d)
    return dirs


def _absent(host: Host, paths: Iterable[str]) -> list[str]:
    """The paths not on the root now."""
    out: list[str] = []
    for p in paths:
        try:
            if atomicfs.lstat_or_none(host.root.join_str(p)) is None:
                out.append(p)
        except PathEscapeError:  # nothing can be created there either
            continue
    return out


def _remove_empty_dirs(host: Host, dirs: Sequence[str]) -> None:
    for d in dirs:
        try:
            os.rmdir(host.root.join(d))
        except (OSError, PathEscapeError):
            continue  # gone already, not empty (something else was put there) or not a directory
        LOG.info("removed %s: the rolled-back update created it", d)


CA_TRUST_SERVICE = "coreos-update-ca-trust.service"
CRIO_SERVICE = "crio.service"


class ActionError(RuntimeError):
    """A post-config action failed (upstream's message); the transaction rolls back and reports
    it as an UpdateError. `event`: the Warning Event upstream posts for it, as (reason, message)."""

    def __init__(self, message: str, event: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.event = event
        # update-ca-trust's failure as Go's exec error words it (`exit status 1`)
        self.exit_text = ""


# upstream's Event texts for a failed action; each takes the service's name, then the error
EventText = Callable[[str], tuple[str, str]]


def event_name(verb: str, unit: str) -> str:
    """The service as upstream's events name it: a reload of crio (the policy's `Special`, the
    legacy `reload crio`) as `crio`; any other as the policy names it."""
    return "crio" if (verb, unit) == ("reload", CRIO_SERVICE) else unit


def reload_event(unit: str, legacy: bool) -> EventText:
    """Upstream's FailedServiceReload: the policy's reloads (daemon-reload too) and the legacy
    crio actions (its failed restart too, named `crio`) are worded differently."""
    if legacy:
        name = "crio" if unit == CRIO_SERVICE else unit
        return lambda error: ("FailedServiceReload", f"Reloading {name} service failed. Error: {error}")
    name = event_name("reload", unit)
    return lambda error: ("FailedServiceReload", f"Reloading service {name} failed. Error: {error}")


def restart_event(unit: str) -> EventText:
    """Upstream's FailedServiceRestart, for the policy's restarts."""
    return lambda error: ("FailedServiceRestart", f"Restarting {unit} service failed. Error: {error}")


def reload_failed(unit: str) -> str:
    """Upstream's prefix for a failed reload (and for the legacy crio restart)."""
    return f"could not apply update: reloading {unit} configuration failed. Error: "


def restart_failed(unit: str) -> str:
    """Upstream's prefix for a failed restart."""
    return f"could not apply update: restarting {unit} service failed. Error: "


def _act(call: Callable[[], None], prefix: str, event: EventText) -> None:
    try:
        call()
    except ActionError as e:
        # update-ca-trust, run in place of its unit, failed: its error is already worded; the
        # Event quotes Go's exec error alone (the exit status, no stderr), as upstream's
        raise ActionError(str(e), event(e.exit_text)) from e
    except (SystemdError, CommandError) as e:
        raise ActionError(f"{prefix}{e}", event(str(e))) from e


def update_ca_trust(host: Host) -> None:
    """Run `update-ca-trust`; a failure raises with its stderr, as upstream words it."""
    result = host.runner.run(["update-ca-trust"], check=False)
    if result.returncode != 0:
        # Go's exec error text for a non-zero exit; stderr is quoted raw, as upstream does
        error = ActionError(
            f"error running update-ca-trust: {result.stderr}: exit status {result.returncode}"
        )
        error.exit_text = f"exit status {result.returncode}"
        raise error


def _restart(host: Host, service: str) -> None:
    try:
        host.systemd.restart(service)
    except Exception:
        if service != CA_TRUST_SERVICE:
            raise
        # the unit may be missing on older images: run what it runs (upstream's fallback)
        LOG.warning("restarting %s failed; running update-ca-trust directly", service)
        update_ca_trust(host)


def sweep_temp_files(host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> None:
    """Remove what writers killed mid-write left behind, in every directory an update writes to.

    Only the daemon's own directory unless an update was interrupted (its record is there):
    every other write happens inside a transaction.
    """
    for leftover in atomicfs.sweep_temp_files(host.root.join(state.STATE_DIR, follow_final=True)):
        LOG.warning("removed %s, left by an interrupted write", leftover)
    if atomicfs.lstat_or_none(host.root.join(state.TRANSACTION)) is None:
        return
    paths = {f"{KEYS_DIR}/x"}
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
        for leftover in atomicfs.sweep_temp_files(host_dir):
            LOG.warning("removed %s, left by an interrupted write", leftover)
