"""Cluster-less modes: `start --once-from`, `firstboot-complete-machineconfig`, `check-disk`.

These apply or verify a config on a root without any Kubernetes API: the legacy action table
decides the post-update action (upstream uses it for firstboot and once-from), there is no
drain and no node annotation.

Decision beyond upstream: once-from diffs against the config recorded on disk
(`/etc/machine-config-daemon/currentconfig`) when there is one, instead of always against the
empty config. Applying B after A then removes what A wrote and B dropped, and re-applying the
same config is a no-op.
"""

from __future__ import annotations

import logging
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

from mcd import kargs as kargs_mod
from mcd.config.findings import Finding, InputError
from mcd.config.load import load_machineconfig
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.diff import diff
from mcd.host import fsops, ondisk, state
from mcd.host.facts import node_fips
from mcd.host.root import HostRoot
from mcd.plan import Plan
from mcd.update import Host, Outcome, load_mc, plan_on_host, recover, request_reboot, update

LOG = logging.getLogger(__name__)

FETCH_TIMEOUT = 30.0
MAX_FETCH_BYTES = 64 << 20


def read_source(src: str) -> tuple[bytes, str]:
    """Bytes of a once-from source: a local file or an http(s) URL."""
    if src.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(src, timeout=FETCH_TIMEOUT) as resp:  # the scheme is checked above
                data: bytes = resp.read(MAX_FETCH_BYTES + 1)
        except OSError as exc:
            raise InputError(src, [Finding((), f"cannot fetch: {exc}")]) from None
        if len(data) > MAX_FETCH_BYTES:
            raise InputError(src, [Finding((), f"larger than {MAX_FETCH_BYTES} bytes")])
        return data, src
    path = Path(src).absolute()
    try:
        return path.read_bytes(), src
    except OSError as exc:
        raise InputError(src, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None


def current_config(root: HostRoot) -> MachineConfig:
    """The config recorded on disk, or upstream's empty config on a node that has none."""
    return load_mc(state.read_current_config(root), state.CURRENT_CONFIG)


def run_once_from(host: Host, src: str, *, skip_reboot: bool) -> Outcome:
    """Apply a MachineConfig or Ignition config once (upstream `start --once-from`)."""
    data, source = read_source(src)
    new = load_machineconfig(data, source)
    errors = [f.located(new.ignition_path) for f in new.ignition.errors]
    if errors:
        raise InputError(source, errors)
    recover(host)
    old = current_config(host.root)
    outcome = update(host, old, new, legacy=True, skip_reboot=skip_reboot)
    encapsulated = host.root.join(state.ENCAPSULATED_CONFIG)
    fsops.remove(encapsulated)
    return outcome


def plan_once_from(host: Host, src: str) -> Plan:
    """What `run_once_from(host, src)` would do now: the same facts, config pair and action table."""
    data, source = read_source(src)
    new = load_machineconfig(data, source)
    errors = [f.located(new.ignition_path) for f in new.ignition.errors]
    if errors:
        raise InputError(source, errors)
    return plan_on_host(host, current_config(host.root), new, legacy=True)


def firstboot(host: Host, mc_file: str, *, default_path: bool, skip_reboot: bool) -> Outcome | None:
    """Upstream `firstboot-complete-machineconfig`: apply the encapsulated config before kubelet starts.

    None when the node already was in the config (the file is only removed).
    """
    path = host.root.join(mc_file)
    data = fsops.read_bytes_nofollow(path)
    if data is None:
        raise InputError(mc_file, [Finding((), "cannot read: no such file")])
    new = load_machineconfig(data, mc_file)
    recover(host)
    old = _booted_state(host, new)
    if diff(old, new).is_empty:
        fsops.remove(path)
        LOG.info("node already in config %s: nothing to do", new.name)
        return None
    outcome = update(host, old, new, legacy=True, skip_reboot=True)
    # before the config file goes: a run killed in between finds the file and does it again
    _remove_revert_service(host)
    if default_path:
        bak = host.root.join(mc_file + ".bak")
        fsops.copy_preserving(path, bak)
        fsops.remove(path)
    if not skip_reboot and request_reboot(host, f"Completing firstboot provisioning to {new.name}"):
        outcome = replace(outcome, rebooted=True)
    return outcome


REVERT_SERVICE = "machine-config-daemon-revert.service"


def _remove_revert_service(host: Host) -> None:
    """Drop the unit that reverts a layered (OCL) image once firstboot applied the config (as upstream)."""
    path = host.root.join(f"/etc/systemd/system/{REVERT_SERVICE}")
    if fsops.lstat_or_none(path) is None:
        return
    host.systemd.disable([REVERT_SERVICE])
    fsops.remove(path)
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


@dataclass(frozen=True)
class DiskCheck:
    config_name: str
    errors: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.errors

    def reason(self) -> str:
        """The Degraded reason upstream writes for the first problem."""
        return f"unexpected on-disk state validating against {self.config_name}: {self.errors[0]}"


def check_disk(host: Host, config_file: str | None = None) -> DiskCheck:
    """Verify files, units and (on CoreOS) kernel arguments and OS image against a config."""
    if config_file is not None:
        data, source = read_source(config_file)
        mc = load_machineconfig(data, source)
    else:
        recorded = state.read_current_config(host.root)
        if recorded is None:
            raise InputError(state.CURRENT_CONFIG, [Finding((), "no config recorded on this node; name one")])
        mc = load_mc(recorded, state.CURRENT_CONFIG)
    if mc.config is None:
        raise InputError(mc.name, [f.located(mc.ignition_path) for f in mc.ignition.errors])
    errors: list[str] = []
    if host.rpmostree is not None:
        booted = host.rpmostree.booted_image()
        want = mc.ocl_image or mc.os_image_url
        if want and booted != want:
            errors.append(f'expected target osImageURL "{want}", have "{booted}"')
        missing = kargs_mod.missing_kargs_error(host.rpmostree.kargs_output(), list(mc.kernel_arguments))
        if missing:
            errors.append(missing)
    errors += ondisk.check_config(host.root, mc.config, host.systemd.is_enabled)
    return DiskCheck(mc.name, tuple(errors))


def describe(outcome: Outcome) -> dict[str, object]:
    """A JSON-able summary of what an update did."""
    p = outcome.plan
    return {
        "config": p.new_name,
        "from": p.old_name,
        "actions": [a if isinstance(a, str) else a.to_api() for a in p.actions],
        "reboot": {"required": outcome.reboot, "done": outcome.rebooted},
        "actionsRun": list(outcome.actions_run),
        "steps": [r.to_json() for r in outcome.ran],
        "changes": len(p.changes),
        "notes": list(outcome.notes),
    }
