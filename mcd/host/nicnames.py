"""NIC-name pinning for the RHEL 9 → 10 move (upstream's PersistNetworkInterfaces, spec §2.2).

RHEL 10 may name network interfaces differently; a node installed from an older boot image whose
static addresses name the old interfaces would lose them. On EL 9 `nmstatectl persist-nic-names`
pins today's names (link files under the root, and kernel arguments it writes to a file, which
go to `rpm-ostree kargs`); on EL 10 the same with `--cleanup` undoes it (its failure is expected
when nothing was pinned, and ignored). Any other OS: nothing. Run at the agent's first sync and
by `firstboot-complete-machineconfig --persist-nics`.
"""

from __future__ import annotations

import logging
import os
import tempfile

from mcd.host.osrelease import os_version, read_os_release
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.rpmostree import RpmOstree, RpmOstreeError
from mcd.host.runner import CommandError, Runner
from mcd.host.wiring import Host
from mcd.planner.nodefacts import is_el

LOG = logging.getLogger(__name__)

NMSTATECTL = "nmstatectl"


class NicNamesError(RuntimeError):
    """nmstatectl or the kernel-argument change failed while pinning (upstream's words)."""


def for_host(host: Host) -> list[str]:
    """`persist_nic_names` on the node `host` is wired to."""
    chrooted = host.node_runner is not None or host.root.is_live
    return persist_nic_names(host.node_runner or host.runner, host.root, host.rpmostree, chrooted=chrooted)


def persist_nic_names(
    runner: Runner, root: HostRoot, rpmostree: RpmOstree | None, *, chrooted: bool, binary: str = NMSTATECTL
) -> list[str]:
    """Pin (EL 9) or unpin (EL 10) the NIC names of the node at `root`; the kernel arguments changed.

    The node's own nmstatectl runs (`runner` inside the node when `chrooted`, with `--root /`; a
    plain directory is named with `--root`); upstream runs the copy in its daemon's image, which
    mcd's image does not carry. The kernel arguments go through the node's rpm-ostree.
    """
    text = read_os_release(root)
    major = os_version(text)[0] if is_el(text) else -1
    if major not in (9, 10):
        return []
    cleanup = major == 10
    # in the node's /run, so that nmstatectl inside the node writes the file the agent reads
    try:
        fd, kargs_file = tempfile.mkstemp(prefix="nmstate-kargs", dir=root.join("/run", follow_final=True))
    except (OSError, PathEscapeError) as exc:
        raise NicNamesError(f"cannot make the kernel arguments file for nmstatectl: {exc}") from exc
    os.close(fd)
    seen = f"/run/{os.path.basename(kargs_file)}" if chrooted else kargs_file
    try:
        node_root = "/" if chrooted else str(root.prefix)
        argv = [binary, "persist-nic-names", "--root", node_root, "--kargs-out", seen]
        argv += ["--cleanup"] if cleanup else []
        LOG.info("%s: %s", "Cleaning up NIC name persistence" if cleanup else "Persisting NIC names", argv)
        try:
            runner.run(argv)
        except (CommandError, OSError) as exc:
            if cleanup:  # nothing was pinned (no stamp file, no link directory): fine
                LOG.info("Cleanup error ignored: %s", exc)
                return []
            raise NicNamesError(f"failed to run nmstatectl: {exc}") from exc
        with open(kargs_file, encoding="utf-8") as f:
            kargs = f.read().split()
    finally:
        os.unlink(kargs_file)
    if kargs:
        _change_kargs(rpmostree, kargs, cleanup=cleanup)
    return kargs


def _change_kargs(rpmostree: RpmOstree | None, kargs: list[str], *, cleanup: bool) -> None:
    if rpmostree is None:
        raise NicNamesError(f"nmstatectl asked for kernel arguments {kargs} on a node without rpm-ostree")
    # the clean-up removes what the pinning appended, tolerating what is gone already
    flag = "--delete-if-present" if cleanup else "--append"
    argv = ["rpm-ostree", "kargs", *(f"{flag}={k}" for k in kargs)]
    try:
        rpmostree.run_planned(argv)
    except RpmOstreeError as exc:
        raise NicNamesError(f"failed to run rpm-ostree kargs: {exc}") from exc
