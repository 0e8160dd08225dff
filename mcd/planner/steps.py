"""The typed steps of an update: what the planner promises and the executor runs. Pure: no I/O.

The planner emits these in the order the executor runs them; `mcd plan` prints them and
`mcd start --once-from` reports the ones it ran, in the same JSON shape (`step_json`). Each
step is one host operation, so "the plan is what runs" can be checked step for step.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from mcd.config.record import fields, record

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import ClassVar


@record
class ConsumeForcefile:
    """Delete /run/machine-config-daemon-force: it forces one update only (as upstream)."""

    kind: ClassVar[str] = "consume-forcefile"


@record
class Drain:
    """Drain the node before changing it (only a cluster agent can; once-from reports it skipped)."""

    kind: ClassVar[str] = "drain"


@record
class WriteFiles:
    """Write these Ignition files, originals recorded first, as one atomic batch."""

    kind: ClassVar[str] = "write-files"
    paths: tuple[str, ...]


@record
class RemoveFile:
    """Delete a path the config no longer declares (and its `.mcdnoorig` stamp)."""

    kind: ClassVar[str] = "remove-file"
    path: str


@record
class RestoreOriginal:
    """Put back the original a config replaced (`.mcdorig` backup), path no longer declared."""

    kind: ClassVar[str] = "restore-original"
    path: str


@record
class WriteUnitFiles:
    """Write unit files and dropins, originals recorded first, as one atomic batch."""

    kind: ClassVar[str] = "write-unit-files"
    paths: tuple[str, ...]


@record
class Mask:
    """Link the unit's file in /etc/systemd/system to /dev/null (what was there is kept)."""

    kind: ClassVar[str] = "mask"
    unit: str


@record
class Unmask:
    """Undo a mask (`mask: false` without contents): the original comes back, or the link goes."""

    kind: ClassVar[str] = "unmask"
    unit: str


@record
class Enable:
    """`systemctl enable` these units, in one call."""

    kind: ClassVar[str] = "enable"
    units: tuple[str, ...]


@record
class Disable:
    """`systemctl disable` these units, in one call; `reason` says why (`config`, `rewrite`, `removed`)."""

    kind: ClassVar[str] = "disable"
    units: tuple[str, ...]
    reason: str = "config"


@record
class Preset:
    """`systemctl preset` one unit (a failure is only logged, as upstream)."""

    kind: ClassVar[str] = "preset"
    unit: str


@record
class Chmod:
    """Set the mode of an existing regular file (the kubelet's kubeconfig is made private)."""

    kind: ClassVar[str] = "chmod"
    path: str
    mode: int


@record
class WriteSshKeys:
    """Write core's `authorized_keys.d/ignition` from every user's keys (`keys`: how many)."""

    kind: ClassVar[str] = "ssh-keys"
    user: str
    keys: int


@record
class SetPassword:
    """Set a user's password hash (`*` when the config declares none); the hash is never shown."""

    kind: ClassVar[str] = "password"
    user: str


@record
class ClearPassword:
    """Empty the hash of a user the config no longer declares (a failure is only logged)."""

    kind: ClassVar[str] = "clear-password"
    user: str


@record
class OsCommand:
    """One rpm-ostree run of the OS step; `role` names it (OS_CLEANUP …)."""

    kind: ClassVar[str] = "rpm-ostree"
    role: str
    argv: tuple[str, ...]


# the OS step's runs, in upstream's order (spec §5.1); a rebase is its own step (`Rebase`)
OS_CLEANUP = "cleanup"
OS_OVERRIDE_RESET = "override-reset"
OS_KARGS = "kargs"
OS_KERNEL_SWITCH = "kernel-switch"
OS_EXTENSIONS = "extensions"
OS_TUNING = "tuning"  # a kernel argument the legacy /etc/pivot/kernel-args file asks for


@record
class CheckRpmOstree:
    """`rpm-ostree --version` must list the `container` feature a rebase onto an image needs.

    Upstream then updates through a privileged container instead (spec §5.3); mcd fails the
    update (docs/upstream-differences.md).
    """

    kind: ClassVar[str] = "check-rpm-ostree"
    feature: str = "container"


@record
class LinkPullSecret:
    """Link `/run/ostree/auth.json` to the pull secret before a rebase, as upstream (spec §5.2)."""

    kind: ClassVar[str] = "link-pull-secret"


@record
class Rebase:
    """Stage the new OS image (`rpm-ostree rebase`, retried: registries fail transiently)."""

    kind: ClassVar[str] = "rebase"
    image: str
    argv: tuple[str, ...]


@record
class VerifyExtensions:
    """Check that the staged deployment requests every extension package (spec §5.6)."""

    kind: ClassVar[str] = "verify-extensions"
    packages: tuple[str, ...]


@record
class OsFailure:
    """Where the OS step fails on this node (e.g. 64k-pages off aarch64): the update stops here.

    Upstream runs the rpm-ostree commands before it, then fails and rolls back (`cleanup -p`,
    the old files); the plan shows the same, and the executor does the same.
    """

    kind: ClassVar[str] = "os-failure"
    message: str


@record
class ReloadService:
    """`systemctl reload` a service (a post-config action)."""

    kind: ClassVar[str] = "reload"
    unit: str


@record
class RestartService:
    """`systemctl restart` a service (a post-config action)."""

    kind: ClassVar[str] = "restart"
    unit: str


@record
class DaemonReload:
    """`systemctl daemon-reload` (a post-config action)."""

    kind: ClassVar[str] = "daemon-reload"


@record
class UpdateCaTrust:
    """Run `update-ca-trust` before crio restarts (legacy `restart crio`; a failure fails the update)."""

    kind: ClassVar[str] = "update-ca-trust"


@record
class Reboot:
    """Reboot into the new config once it is committed (`argv`: the transient unit upstream uses)."""

    kind: ClassVar[str] = "reboot"
    reason: str
    argv: tuple[str, ...]
    # asked for again: an earlier config's reboot never happened (skipped or failed)
    owed: bool = False


Step = (
    ConsumeForcefile
    | Drain
    | WriteFiles
    | RemoveFile
    | RestoreOriginal
    | WriteUnitFiles
    | Mask
    | Unmask
    | Enable
    | Disable
    | Preset
    | Chmod
    | WriteSshKeys
    | SetPassword
    | ClearPassword
    | OsCommand
    | CheckRpmOstree
    | LinkPullSecret
    | Rebase
    | VerifyExtensions
    | OsFailure
    | ReloadService
    | RestartService
    | DaemonReload
    | UpdateCaTrust
    | Reboot
)

# the post-config actions: they run after everything is written (a reboot after the commit)
ACTION_STEPS = (ReloadService, RestartService, DaemonReload, UpdateCaTrust, Reboot)


def step_json(step: Step) -> dict[str, object]:
    """`{"kind": …, <field>: …}`: the shape of `steps` in `mcd plan -o json` and the start summary."""
    out: dict[str, object] = {"kind": step.kind}
    for f in fields(step):
        value = getattr(step, f.name)
        if f.name == "mode":
            value = f"{value:04o}"
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def command(step: Step) -> tuple[str, ...] | None:
    """The command line a step runs on a live host, or None for a file operation."""
    match step:
        case Enable(units=units):
            return ("systemctl", "enable", *units)
        case Disable(units=units):
            return ("systemctl", "disable", *units)
        case Preset(unit=unit):
            return ("systemctl", "preset", unit)
        case SetPassword(user=user):
            # the hash itself is not shown: plans are printed and logged
            return ("usermod", "-p", "<passwordHash>", user)
        case ClearPassword(user=user):
            return ("usermod", "-p", "", user)
        case OsCommand(argv=argv) | Rebase(argv=argv) | Reboot(argv=argv):
            return argv
        case ReloadService(unit=unit):
            return ("systemctl", "reload", unit)
        case RestartService(unit=unit):
            return ("systemctl", "restart", unit)
        case DaemonReload():
            return ("systemctl", "daemon-reload")
        case UpdateCaTrust():
            return ("update-ca-trust",)
    return None


def _names(names: Sequence[str], limit: int = 4) -> str:
    shown = " ".join(names[:limit])
    return shown + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def step_text(step: Step) -> str:
    """One line for `mcd plan -o text` and logs."""
    match step:
        case WriteFiles(paths=paths):
            return f"write {len(paths)} file(s): {_names(paths)}"
        case WriteUnitFiles(paths=paths):
            return f"write {len(paths)} unit file(s): {_names(paths)}"
        case RemoveFile(path=path):
            return f"remove {path}"
        case RestoreOriginal(path=path):
            return f"restore the original {path}"
        case Mask(unit=unit):
            return f"mask {unit}"
        case Unmask(unit=unit):
            return f"unmask {unit}"
        case Chmod(path=path, mode=mode):
            return f"chmod {mode:04o} {path}"
        case WriteSshKeys(user=user, keys=keys):
            return f"write {keys} SSH key(s) for {user}"
        case ConsumeForcefile():
            return "remove the forcefile /run/machine-config-daemon-force"
        case Drain():
            return "drain the node"
        case VerifyExtensions(packages=packages):
            return f"check the staged deployment requests {_names(packages)}"
        case CheckRpmOstree(feature=feature):
            return f"rpm-ostree --version  (needs the {feature} feature)"
        case LinkPullSecret():
            return "link /run/ostree/auth.json to the pull secret"
        case OsFailure(message=message):
            return f"fail: {message} (the update is rolled back)"
        case Disable(units=units, reason=reason) if reason != "config":
            return f"{shlex.join(('systemctl', 'disable', *units))}  ({reason})"
        case Reboot(reason=reason, owed=owed):
            return f"reboot: {reason}" + ("  (still owed: the node has not rebooted since)" if owed else "")
    argv = command(step)
    return shlex.join(argv) if argv is not None else step.kind


REBOOT_UNIT = "machine-config-daemon-reboot"


def reboot_command(rationale: str, coreos: bool = True) -> tuple[str, ...]:
    """Upstream's reboot through a transient unit, ordered after ostree's staged finalization."""
    cmd = ["systemd-run", "--unit", REBOOT_UNIT, "--description", f"machine-config-daemon: {rationale}"]
    if coreos:
        cmd += ["-p", "Requires=ostree-finalize-staged.service", "-p", "After=ostree-finalize-staged.service"]
    return (*cmd, "/bin/sh", "-c", "systemctl reboot")
