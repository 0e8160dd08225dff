"""`mcd firstboot-complete-machineconfig`: apply the encapsulated config before the kubelet starts.

The config the Machine Config Server left on the node is applied over the node as it booted
(its OS image, running kernel arguments and FIPS state), with the legacy action table, and
the node reboots into it (upstream's firstboot service).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from mcd.config.findings import Finding, InputError
from mcd.config.load import load_machineconfig
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.host import atomicfs, bootfiles, rootlock
from mcd.host.facts import node_fips
from mcd.planner import kargs as kargs_mod
from mcd.planner.diff import diff
from mcd.update.transaction import Host, Outcome, recover, request_reboot, update

LOG = logging.getLogger(__name__)


def firstboot(host: Host, mc_file: str, *, default_path: bool, skip_reboot: bool) -> Outcome | None:
    """Upstream `firstboot-complete-machineconfig`: apply the encapsulated config before kubelet starts.

    None when the node already was in the config (the file is only removed).
    """
    with rootlock.hold(host.root, timeout=host.lock_timeout):
        return _firstboot(host, mc_file, default_path=default_path, skip_reboot=skip_reboot)


def _firstboot(host: Host, mc_file: str, *, default_path: bool, skip_reboot: bool) -> Outcome | None:
    path = host.root.join(mc_file)
    data = atomicfs.read_bytes_nofollow(path)
    if data is None:
        raise InputError(mc_file, [Finding((), "cannot read: no such file")])
    new = load_machineconfig(data, mc_file)
    recover(host)
    old = _booted_state(host, new)
    if diff(old, new).is_empty:
        atomicfs.remove(path)
        LOG.info("node already in config %s: nothing to do", new.name)
        return None
    outcome = update(host, old, new, legacy=True, skip_reboot=True)
    # before the config file goes: a run killed in between finds the file and does it again
    _remove_revert_service(host)
    if default_path:
        # kept as `.bak` (one rename), as upstream: what the node was installed with stays readable
        bootfiles.retire_encapsulated_config(host.root, mc_file)
    if not skip_reboot and request_reboot(host, f"Completing firstboot provisioning to {new.name}"):
        outcome = replace(outcome, rebooted=True)
    return outcome


REVERT_SERVICE = "machine-config-daemon-revert.service"


def _remove_revert_service(host: Host) -> None:
    """Drop the unit that reverts a layered (OCL) image once firstboot applied the config (as upstream)."""
    path = host.root.join(f"/etc/systemd/system/{REVERT_SERVICE}")
    if atomicfs.lstat_or_none(path) is None:
        return
    host.systemd.disable([REVERT_SERVICE])
    atomicfs.remove(path)
    LOG.info("removed %s", REVERT_SERVICE)


def _booted_state(host: Host, new: MachineConfig) -> MachineConfig:
    """The empty config as the node really is: booted OS image, running kargs, FIPS."""
    old = empty_machineconfig()
    os_image = ""
    running: list[str] = []
    if host.rpmostree is not None:
        os_image = host.rpmostree.booted_image()
        running = kargs_mod.running_kargs(host.rpmostree.kargs_output(), list(new.kernel_arguments))
    else:
        cmdline = host.root.join("/proc/cmdline")
        if cmdline.exists():
            running = kargs_mod.running_kargs(cmdline.read_text(), list(new.kernel_arguments))
    fips = node_fips(host.root)
    return replace(
        old,
        os_image_url=os_image,
        kernel_arguments=tuple(running),
        fips=fips if fips is not None else new.fips,
    )
