"""`Host`: everything an update touches on one root, wired once (writers, systemd, rpm-ostree).

The pod mounts the node at a prefix: systemd is then reached over the node's bus and host
commands run inside its root; a plain directory gets offline `systemctl --root`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcd.host.accounts import Accounts
from mcd.host.bootloader import Bootloader
from mcd.host.dirsync import DirSync
from mcd.host.files import FileWriter
from mcd.host.reboot import Rebooter, Reboots
from mcd.host.root import HostRoot
from mcd.host.rootlock import DEFAULT_TIMEOUT
from mcd.host.rpmdb import RpmDb
from mcd.host.rpmostree import RpmOstree
from mcd.host.runner import ChrootRunner, Runner
from mcd.host.ssh import SshKeyWriter
from mcd.host.systemd import SystemdManager, make_manager
from mcd.host.units import UnitFiles, UnitWriter

OSTREE_BOOTED = "/run/ostree-booted"


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
    # how long an update or a reader waits for another process's lock on the root
    lock_timeout: float = DEFAULT_TIMEOUT
    # the booted deployment's package database (CoreOS): what an image-mode node's image carries
    rpmdb: RpmDb | None = None
    # a running CoreOS node's bootloader, updated before a rebase on Secure Boot hosts (None:
    # not CoreOS, or a root that is not a running system, which has no bootloader of its own)
    bootloader: Bootloader | None = None
    # the runner inside a mounted running node (chroot into it); None: `runner` already is
    node_runner: Runner | None = None

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
        # the update's directory syncs, deferred within its steps; every writer of it shares them
        dirsync = DirSync()
        files = FileWriter(root, accounts, coreos=coreos, dirsync=dirsync)
        live = root.runs_systemd
        host_runner: Runner = runner
        if live and not root.is_live:
            host_runner = ChrootRunner(runner, str(root.prefix))
            systemd = make_manager(root, host_runner, live=True, bus_address=_bus_address(root))
        else:
            systemd = make_manager(root, runner)
        units = UnitWriter(root, systemd, UnitFiles(files.originals))
        return cls(
            root=root,
            runner=runner,
            coreos=coreos,
            accounts=accounts,
            files=files,
            systemd=systemd,
            units=units,
            ssh=SshKeyWriter(root, accounts, runner, dirsync=dirsync),
            rpmostree=RpmOstree(host_runner, binary=rpmostree_binary, root=root) if coreos else None,
            rebooter=Rebooter(host_runner, coreos=coreos),
            live=live,
            rpmdb=RpmDb(host_runner, root, chrooted=host_runner is not runner) if coreos else None,
            bootloader=Bootloader(host_runner, root) if coreos and live else None,
            node_runner=host_runner if host_runner is not runner else None,
        )


def _bus_address(root: HostRoot) -> str:
    """The D-Bus system bus of the system mounted at `root` (its socket, through the mount)."""
    return f"unix:path={root.prefix}/run/dbus/system_bus_socket"
