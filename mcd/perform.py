"""Carrying out one step of a plan: each step is one host operation (the executor's hands).

`StepRunner.step` runs a step that changes the node before the commit, `action` a post-config
action; each phase registers its undo (the old config applied back, the old SSH keys and
passwords, the staged deployment discarded) before its first step, for the executor's rollback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcd import failpoints
from mcd import steps as st
from mcd.config.contents import ContentsError
from mcd.config.ignition import IgnitionConfig, Unit
from mcd.config.text import escape_controls, shown
from mcd.host import state
from mcd.host.errors import StepError, os_error_text
from mcd.host.systemd import SystemdError
from mcd.host.wiring import Host
from mcd.paths import dropin_path, unit_path
from mcd.steps import Step

LOG = logging.getLogger(__name__)

UNIT_FILE_MODE = 0o644
# a drain callback: only a cluster agent has one (once-from reports it skipped)
Drainer = Callable[[], None]


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


def _undo_files_units(host: Host, new_ign: IgnitionConfig, old_ign: IgnitionConfig) -> None:
    """Apply the old config back over a partly applied new one.

    Paths the failed update never reached have no backup or stamp and are left alone.
    """
    _apply_files_units(host, new_ign, old_ign, old_ign.units, keep_unrecorded=True)


def _apply_passwd(host: Host, old_ign: IgnitionConfig, new_ign: IgnitionConfig) -> None:
    host.ssh.apply(new_ign.users)
    host.ssh.set_password_hashes(old_ign.users, new_ign.users)


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
