"""The host probe: what the planner must know about a node, read from its root into `Facts`.

Everything the update depends on is read here, before planning, so the planner stays pure and
the executor runs the plan without deciding anything: the forcefile, FIPS, the booted
deployment, which files already match, which dropped paths have an original to restore, which
units are enabled or have a unit file, the kubeconfig's mode, the accounts. Reading changes
nothing on the node (`mcd plan --root-mount` runs it too).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from mcd.config.ignition import EMPTY_IGNITION, IgnitionConfig, Unit
from mcd.config.machineconfig import MachineConfig
from mcd.host import atomicfs, ondisk, state
from mcd.host.accounts import Accounts
from mcd.host.errors import HostError
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.rpmostree import RpmOstreeError, booted_image
from mcd.host.ssh import CORE_USER, NO_PASSWORD, SHADOW
from mcd.host.systemd import enabled_among
from mcd.host.wiring import Host
from mcd.planner.diff import REMOVED, ConfigDiff, diff
from mcd.planner.kargs import TUNING_FILE
from mcd.planner.managed_paths import KUBECONFIG, LEAKED_SYMLINKS, dropin_path, unit_path
from mcd.planner.nodefacts import Facts, is_el
from mcd.planner.rpmostree_args import node_arch

CMDLINE = "/proc/cmdline"
# upstream reads /etc/os-release, falling back to /usr/lib/os-release
OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")


class ProbeError(HostError):
    """The node could not be read (e.g. `rpm-ostree status` failed)."""


def probe(
    host: Host,
    old: MachineConfig,
    new: MachineConfig,
    *,
    skip_certificate_write: bool = False,
    old_on_disk: bool = False,
) -> Facts:
    """The facts of `host` that planning `old` -> `new` depends on.

    `old_on_disk`: the caller has just verified that the disk holds `old.config`'s files
    (`ondisk`, owners included: the agent's preflight check), so the files the update leaves
    as they are need not be read again to know that they match.
    """
    forcefile = state.forcefile_present(host.root)
    old_ign = old.config or old.ignition.partial or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    d = diff(old, new, forcefile=forcefile)
    changed = {c.name for c in d.unit_changes}
    written = new_ign.units if forcefile else tuple(u for u in new_ign.units if u.name in changed)
    before = {f.path: f for f in old_ign.files}
    modified = {c.name for c in d.file_changes}
    # files declared as in the applied config (the diff found no change) that are still right
    verified = old_on_disk and old.config is not None
    matching = {
        f.path
        for f in new_ign.files
        if f.path not in modified
        and f.path in before
        # the check skips the files the certificate writer owns: those are read here
        and ((verified and f.path not in ondisk.IGNORED_FILES) or host.files.matches(f))
    }
    # units declared as in the applied config: a re-run repairs whatever of them drifted
    kept = () if forcefile else tuple(u for u in new_ign.units if u.name not in changed)
    if verified:
        # declared as in `old`, whose units (files, masks, dropins, enablement) were just checked
        matching |= {
            p for u in kept for p in (unit_path(u.name), *(dropin_path(u.name, d.name) for d in u.dropins))
        }
    else:
        matching |= ondisk.units_as_declared(host.root, kept)
    new_names = {u.name for u in new_ign.units}
    stale_units = [u.name for u in old_ign.units if u.name not in new_names]
    dropped = _droppable(d, old_ign, changed, new_names)
    rewriting = [u for u in written if not u.mask and u.contents and host.units.install_may_change(u)]
    enabled = enabled_among(host.systemd, [u.name for u in rewriting]) if rewriting else frozenset()
    contentless = [u.name for u in written if u.enabled is not None and not u.contents]
    has_core, has_shadow, password_matches = _accounts(host, old, new)
    booted, packages, removals = _deployment(host)
    tuning_file = cmdline = None
    if host.coreos:
        tuning_file, cmdline = _text(host, TUNING_FILE), _text(host, CMDLINE)
    return Facts(
        forcefile=forcefile,
        node_fips=node_fips(host.root),
        coreos=host.coreos,
        arch=node_arch(os.uname().machine),
        skip_certificate_write=skip_certificate_write,
        matching_paths=frozenset(matching),
        enablement_matches=_enablement_matches(host, kept, verified=verified),
        ssh_keys_match=host.ssh.keys_match(new_ign.users),
        backed_up=frozenset(p for p in dict.fromkeys(dropped) if host.files.originals.has_backup(p)),
        enabled_rewrites=frozenset(u.name for u in rewriting if u.name in enabled),
        unit_files=frozenset(n for n in contentless if host.systemd.unit_file_known(n)),
        regular_unit_files=frozenset(n for n in stale_units if host.units.is_regular_file(unit_path(n))),
        leaked_links=frozenset(link for link in LEAKED_SYMLINKS if _lexists(host, link)),
        kubeconfig_mode=_regular_mode(host, KUBECONFIG),
        has_core=has_core,
        has_shadow=has_shadow,
        password_matches=password_matches,
        booted_image=booted,
        requested_packages=packages,
        requested_base_removals=removals,
        owed_reboot=owed.reason if (owed := state.pending_reboot(host.root)) is not None else None,
        tuning_file=tuning_file,
        cmdline=cmdline or "",
        el=node_is_el(host),
    )


def _droppable(d: ConfigDiff, old_ign: IgnitionConfig, changed: set[str], new_names: set[str]) -> list[str]:
    """Every path a step may drop: dropped files, the old config's unit paths."""
    dropped = [c.name for c in d.file_changes if c.change == REMOVED]
    if d.units:
        # only a removed or changed unit can drop a path; the unchanged ones keep all of theirs
        for u in old_ign.units:
            if u.name in changed or u.name not in new_names:
                dropped += [unit_path(u.name), *(dropin_path(u.name, dr.name) for dr in u.dropins)]
    return dropped


def _enablement_matches(host: Host, units: Sequence[Unit], *, verified: bool = False) -> frozenset[str]:
    """The units of `units` with a file and an enablement whose links say what they declare.

    As the on-disk check, only units with contents are asked about (a unit without is left
    to whoever ships its file); the root's links answer offline, without a systemctl process.
    """
    asked = [u for u in units if u.contents and not u.mask and u.enabled is not None]
    if not asked or verified:
        # the on-disk check just found each as declared (`verified`): nothing to ask
        return frozenset(u.name for u in asked)
    enabled = enabled_among(host.systemd, [u.name for u in asked])
    return frozenset(u.name for u in asked if (u.name in enabled) == u.enabled)


def node_fips(root: HostRoot) -> bool | None:
    """`/proc/sys/crypto/fips_enabled` of the root; None when it cannot be read."""
    try:
        return root.join("/proc/sys/crypto/fips_enabled").read_text().strip() == "1"
    except (OSError, PathEscapeError):
        return None


def _text(host: Host, path: str) -> str | None:
    """A small text file of the root (symlinks followed inside it), None when absent or unreadable."""
    try:
        data = atomicfs.read_bytes_nofollow(host.root.join(path, follow_final=True))
    except (OSError, PathEscapeError):
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


def node_is_el(host: Host) -> bool:
    """An Enterprise Linux CoreOS (RHCOS, SCOS): where upstream manages kernels and extensions."""
    return host.coreos and is_el(_os_release(host))


def _os_release(host: Host) -> str:
    """The root's os-release text ("" when it has none: not an EL CoreOS)."""
    for path in OS_RELEASE_PATHS:
        text = _text(host, path)
        if text is not None:
            return text
    return ""


def _lexists(host: Host, path: str) -> bool:
    try:
        return atomicfs.lstat_or_none(host.root.join(path)) is not None
    except PathEscapeError:  # nothing of ours can be there: leave it be
        return False


def _regular_mode(host: Host, path: str) -> int | None:
    # only a regular file is touched: chmod would follow a symlink, possibly out of the root
    try:
        st = atomicfs.lstat_or_none(host.root.join(path))
    except PathEscapeError:
        return None
    return stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else None


def _accounts(host: Host, old: MachineConfig, new: MachineConfig) -> tuple[bool, bool, frozenset[str]]:
    """core exists, /etc/shadow exists, the users whose hash already is the one wanted."""
    old_users = (old.config or EMPTY_IGNITION).users
    new_users = (new.config or EMPTY_IGNITION).users
    has_shadow = _lexists(host, SHADOW)
    # the shadow file is read afresh: a re-run after a crash sees what the killed run set
    accounts = Accounts.load(host.root) if has_shadow else host.accounts
    new_names = {u.name for u in new_users}
    matches = {u.name for u in new_users if accounts.shadow_hash(u.name) == (u.password_hash or NO_PASSWORD)}
    matches |= {u.name for u in old_users if u.name not in new_names and accounts.shadow_hash(u.name) == ""}
    return host.accounts.has_user(CORE_USER), has_shadow, frozenset(matches)


def _deployment(host: Host) -> tuple[str | None, tuple[str, ...] | None, tuple[str, ...] | None]:
    """The booted deployment: the OS step works from what the node boots (spec §5.1)."""
    if host.rpmostree is None:
        return None, None, None
    try:
        status = host.rpmostree.status()
        image = booted_image(status)
    except RpmOstreeError as exc:
        raise ProbeError(f"cannot read the booted deployment: {exc}") from exc
    return image, status.booted.requested_packages, status.booted.requested_base_removals
