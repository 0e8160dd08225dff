"""The agent's one door to the executor and the host layer.

Every call the daemon makes into the update transaction, the host wiring, the on-disk records
and the on-disk check goes through `NodeApplier`, so the executor can change shape (typed plan
steps, a facts probe) by re-pointing this module only. Nothing here talks to Kubernetes.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from mcd import policy
from mcd.agent.applied import AGENT_PARSE, Applied, ApplyError, action_event, service_action
from mcd.agent.errors import HostCommandError
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig
from mcd.host import atomicfs, bootfiles, nicnames, ondisk, rootlock, state, unitdirs
from mcd.host.errors import HostError
from mcd.host.facts import node_is_el
from mcd.host.reboot import RebootError
from mcd.host.root import HostRoot
from mcd.host.rootlock import DEFAULT_TIMEOUT as DEFAULT_LOCK_TIMEOUT
from mcd.host.rpmdb import RpmQueryError
from mcd.host.rpmostree import RpmOstreeError, unsupported_packages
from mcd.host.runner import Runner
from mcd.host.systemd import OfflineSystemctl
from mcd.host.unitlinks import UnitLinks
from mcd.node.errors import McdError
from mcd.planner import kargs as kargs_mod
from mcd.planner.plan import Facts, Plan, plan
from mcd.planner.rpmostree_args import extensions_not_installed
from mcd.update.transaction import (
    Host,
    Unreconcilable,
    UpdateError,
    facts_for,
    load_mc,
    mc_json,
    recover,
    request_reboot,
    update,
)

LOG = logging.getLogger(__name__)

NODE_ANNOTATIONS = "/etc/machine-config-daemon/node-annotations.json"
# upstream's backup name has "annotation" in the singular
NODE_ANNOTATIONS_BAK = "/etc/machine-config-daemon/node-annotation.json.bak"


class NodeApplier:
    """The daemon's node: one root, one runner, the records the executor keeps on it."""

    def __init__(
        self,
        root: HostRoot,
        runner: Runner,
        *,
        rpmostree_binary: str = "rpm-ostree",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.root = root
        self.runner = runner
        self.rpmostree_binary = rpmostree_binary
        # how long an update or recovery waits for another process's lock on the root
        self.lock_timeout = lock_timeout
        self._host: Host | None = None
        self._disk_cache: tuple[atomicfs.FileVersion, MachineConfig] | None = None
        # the MachineConfig watch's thread reads it too (`mcd.agent.mccache`): one parse per version
        self._disk_lock = threading.Lock()
        self._staged: state.Staged | None = None
        self._staged_lock = threading.Lock()
        # an update's clean-up left to `settle` (see `defer_cleanup`): the applied config's
        # second name, whether a finished update record is to be removed
        self._deferring = False
        self._aside: Path | None = None
        self._finished = False

    def host(self) -> Host:
        """The host wiring; built again after each update (accounts may have changed)."""
        if self._host is None:
            self._host = Host.for_root(self.root, self.runner, rpmostree_binary=self.rpmostree_binary)
            self._host.lock_timeout = self.lock_timeout
        return self._host

    @property
    def live(self) -> bool:
        """A running system: services are reloaded and reboots are real (else they are simulated)."""
        return self.host().live

    @property
    def coreos(self) -> bool:
        return self.host().coreos

    # -- records

    def recover(self) -> None:
        """Finish an update a killed process left half done (it converges to its new config);
        first remove what such a process left of its own (`state.remove_leftovers`)."""
        for path in state.remove_leftovers(self.root):
            LOG.info("removed %s, left by a process killed around an update", path)
        try:
            recover(self.host(), skip_reboot=True)
        except UpdateError as exc:
            raise McdError(f"finishing an interrupted update failed: {exc}") from exc
        finally:
            self._host = None

    def disk_config(self) -> MachineConfig | None:
        """The config recorded on disk (`currentconfig`), or None on a node that never had one.

        Parsed once per version of the file: a rendered config is megabytes, and every sync
        reads it.
        """
        with self._disk_lock:
            return self._disk_config()

    def _disk_config(self) -> MachineConfig | None:
        key = atomicfs.version_of(self.root.join(state.CURRENT_CONFIG))
        if key is not None and self._disk_cache is not None and self._disk_cache[0] == key:
            return self._disk_cache[1]
        try:
            obj = state.read_current_config(self.root)
        except state.StateError as exc:
            raise McdError(str(exc)) from None
        mc = None if obj is None else load_mc(obj, state.CURRENT_CONFIG, AGENT_PARSE)
        self._disk_cache = None if key is None or mc is None else (key, mc)
        return mc

    # -- the update record written ahead (`state.stage`)

    def stage(self, text: bytes) -> None:
        """Start writing the update record of the config whose JSON text (as read) is `text`, on
        a writer thread: the next `apply` of that config only renames it. One at a time."""
        with self._staged_lock:
            old = self._staged
            if old is not None and old.text is text:
                return
            self._staged = state.stage(self.root, text)
        if old is not None:
            old.discard()

    def _unstage(self) -> None:
        with self._staged_lock:
            staged, self._staged = self._staged, None
        if staged is not None:
            staged.discard()

    def defer_cleanup(self) -> None:
        """Leave the next `apply`'s clean-up to `settle`, off the way to Done: the applied
        config's file gets a second name (the commit's rename frees no blocks, milliseconds for
        a rendered config on ext4) and the finished update record stays (its removal would
        wait for the commit's journal flush); a process killed before `settle` leaves both to
        the next start (`recover`)."""
        self._deferring = True
        if self._aside is None:
            self._aside = state.keep_aside(self.root)

    def settle(self, after: Future[Any] | None = None) -> None:
        """The loose ends of a sync, once it is over: the staged record dropped unless an update
        took it, the old config's second name removed. `after`: a task that may stage still."""
        if after is not None:
            wait([after])
        self._unstage()
        self._deferring = False
        if self._finished:
            self._finished = False
            state.drop_finished_record(self.root)
        aside, self._aside = self._aside, None
        if aside is not None:
            state.release_aside(aside)

    def disk_image(self) -> str | None:
        data = atomicfs.read_bytes_nofollow(self.root.join(state.CURRENT_IMAGE))
        return None if data is None else data.decode(errors="replace").strip()

    def forcefile_present(self) -> bool:
        return state.forcefile_present(self.root)

    def reboot_pending(self) -> bool:
        return state.pending_reboot(self.root) is not None

    def bootstrap_annotations(self) -> dict[str, str] | None:
        """The node-annotations.json the Machine Config Server left for the first start, if any."""
        data = atomicfs.read_bytes_nofollow(self.root.join(NODE_ANNOTATIONS))
        if data is None:
            return None
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise McdError(f"cannot parse {NODE_ANNOTATIONS}: {exc}") from None
        if not isinstance(obj, dict):
            raise McdError(f"{NODE_ANNOTATIONS} does not hold a JSON object")
        return {str(k): str(v) for k, v in obj.items()}

    def retire_bootstrap_annotations(self) -> None:
        """Keep node-annotations.json as upstream's `.bak` once the bootstrap check passed."""
        src = self.root.join(NODE_ANNOTATIONS)
        if atomicfs.lstat_or_none(src) is None:
            return
        os.replace(src, self.root.join(NODE_ANNOTATIONS_BAK))
        atomicfs.fsync_dir(src.parent)

    # -- what the first boot left, and what the last shutdown logged

    def retire_encapsulated_config(self) -> bool:
        """The encapsulated config left by a firstboot that did not finish, renamed `.bak` (True)."""
        try:
            return bootfiles.retire_encapsulated_config(self.root)
        except bootfiles.BootFileError as exc:
            raise McdError(str(exc)) from None

    def remove_ignition_preset(self) -> bool:
        """Ignition's `20-ignition.preset` removed (True when there was one)."""
        try:
            return bootfiles.remove_ignition_preset(self.root)
        except bootfiles.BootFileError as exc:
            raise McdError(str(exc)) from None

    def persist_nic_names(self) -> None:
        """Upstream's PersistNetworkInterfaces at the first sync (`mcd.host.nicnames`)."""
        try:
            nicnames.for_host(self.host())
        except nicnames.NicNamesError as exc:
            raise McdError(str(exc)) from None

    def finalize_failure(self) -> str | None:
        """What ostree-finalize-staged.service failed with in the previous boot ("" when it did
        not); None off CoreOS, where there is nothing to finalize. HostCommandError when the
        journal cannot be read."""
        rpm = self.host().rpmostree
        if rpm is None:
            return None
        try:
            return rpm.previous_deployment_error() or ""
        except RpmOstreeError as exc:
            raise HostCommandError(str(exc)) from None

    def missing_extensions(self, mc: MachineConfig) -> str | None:
        """Upstream's verdict when the booted deployment lacks a package of `mc`'s extensions
        (RHCOS/SCOS only, as upstream); None when all are there."""
        host = self.host()
        if not mc.extensions or host.rpmostree is None or not node_is_el(host):
            return None
        if host.rpmdb is not None and (mc.ocl_image or self.disk_image()):
            # image mode: the image carries the packages, rpm-ostree layers none; rpm is asked
            try:
                return host.rpmdb.extensions_verdict(mc.extensions)
            except RpmQueryError as exc:
                raise HostCommandError(str(exc)) from None
        try:
            booted = host.rpmostree.status().booted
        except RpmOstreeError as exc:
            raise HostCommandError(str(exc)) from None
        # a layered package is listed under `packages`; one the base image already provides
        # stays requested but inactive (not listed there): installed either way
        installed = (*booted.packages, *booted.requested_packages)
        return extensions_not_installed(mc.extensions, installed)

    # -- checks

    def check(self, mc: MachineConfig, *, only: Collection[str] | None = None) -> str | None:
        """The first difference between the node and `mc` (OS image, kernel arguments, files, units);
        with `only`, of the files, units and dropins those paths name (the rest is known as declared)."""
        host = self.host()
        try:
            if host.rpmostree is not None:
                booted = host.rpmostree.booted_image()
                want = mc.ocl_image or mc.os_image_url
                if booted != want:  # an empty osImageURL too: upstream compares the strings
                    return f'expected target osImageURL "{want}", have "{booted}"'
                missing = kargs_mod.missing_kargs_error(
                    host.rpmostree.kargs_output(), list(mc.kernel_arguments)
                )
                if missing:
                    return missing
        except RpmOstreeError as exc:
            raise HostCommandError(str(exc)) from None
        if mc.config is None:
            return None
        # a systemd directory leading out of the root: the links systemd reads are not the root's
        # (check-disk and every update refuse it too)
        escapes = unitdirs.escapes(self.root) if mc.config.units else []
        if escapes:
            return escapes[0]
        is_enabled = host.systemd.is_enabled
        if isinstance(host.systemd, OfflineSystemctl):
            is_enabled = partial(_settled_enablement, self.root, mc.config, host.systemd.is_enabled)
        # owners too (upstream compares none): mcd writes exact owners, and the drift monitor
        # reports a chown, which the next sync must not call clean
        return ondisk.first_error(self.root, mc.config, is_enabled, host.files.owner_of, only)

    def cleanup_rollback(self) -> None:
        """`rpm-ostree cleanup -r` at start, as upstream (CoreOS only)."""
        rpm = self.host().rpmostree
        if rpm is None:
            return
        try:
            rpm.cleanup_rollback()
        except RpmOstreeError as exc:
            raise HostCommandError(str(exc)) from None

    def unsupported_packages(self) -> int | None:
        """Upstream's count for mcd_local_unsupported_packages, taken once at start: 0 without
        rpm-ostree or when its status fails; None (the gauge left unset, as upstream) when the
        status cannot be parsed or nothing is booted."""
        rpm = self.host().rpmostree
        if rpm is None:
            return 0
        try:
            status = rpm.status()
        except FileNotFoundError:
            return 0
        except RpmOstreeError as exc:
            LOG.error("Failed to run rpm-ostree status: %s", exc)
            return 0 if exc.result is not None else None
        found = unsupported_packages(status.booted)
        LOG.info("Found %d unsupported local package change(s) in the booted deployment", len(found))
        for name in found:
            LOG.info("Unsupported package %s", name)
        return len(found)

    # -- the update

    def facts(
        self, old: MachineConfig, new: MachineConfig, topology: str, *, checked: MachineConfig | None = None
    ) -> Facts:
        """The probe's facts. `checked`: the config `check` has just found on disk (None when
        none was checked); when it is `old` itself, the probe trusts that instead of reading
        the unchanged files again (a different or re-parsed config proves nothing)."""
        on_disk = checked is not None and checked.config is not None and checked.config is old.config
        try:
            facts = facts_for(self.host(), old, new, skip_certificate_write=True, old_on_disk=on_disk)
            return replace(facts, topology=topology)
        except UpdateError as exc:
            raise HostCommandError(str(exc)) from None

    def plan(
        self,
        old: MachineConfig,
        new: MachineConfig,
        facts: Facts,
        policies: policy.ClusterPolicies,
        storage_overrides: Sequence[str] = (),
    ) -> Plan:
        return plan(old, new, facts, policies, legacy=False, storage_overrides=storage_overrides)

    def apply(
        self,
        old: MachineConfig,
        new: MachineConfig,
        facts: Facts,
        policies: policy.ClusterPolicies,
        *,
        drain: Callable[[], None] | None = None,
        storage_overrides: Sequence[str] = (),
        planned: Plan | None = None,
    ) -> Applied:
        """Run the update transaction (rolled back on failure); the reboot is left to the caller.
        `planned`: what `plan` gave for the same arguments (it is not made again). The record
        staged (`stage`) is taken over when it holds `new`'s text.

        The drain comes first, outside the root's lock: it waits for the controller (up to
        --drain-timeout), and `mcd check-disk`, `--once-from` and firstboot must not wait behind
        it. The lock is taken next, and the config on disk looked at again under it: another
        mcd on this root that applied `new` meanwhile leaves nothing to do (and no second
        reboot to ask for)."""
        if drain is not None and planned is not None and planned.drain:
            drain()
            drain = _drained
        with rootlock.hold(self.root, timeout=self.lock_timeout):
            disk = self.disk_config()
            if disk is not None and disk.name == new.name != old.name:
                LOG.info(
                    "%s was applied by another process while this one waited for the root's lock: "
                    "nothing left to do",
                    new.name,
                )
                return Applied(planned or self.plan(old, new, facts, policies), False, (), elsewhere=True)
            return self._apply(
                old, new, facts, policies, drain=drain, storage_overrides=storage_overrides, planned=planned
            )

    def _apply(
        self,
        old: MachineConfig,
        new: MachineConfig,
        facts: Facts,
        policies: policy.ClusterPolicies,
        *,
        drain: Callable[[], None] | None,
        storage_overrides: Sequence[str],
        planned: Plan | None,
    ) -> Applied:
        with self._staged_lock:
            staged = self._staged
        try:
            outcome = update(
                self.host(),
                old,
                new,
                legacy=False,
                policies=policies,
                skip_reboot=True,
                skip_certificate_write=True,
                facts=facts,
                drain=drain,
                storage_overrides=storage_overrides,
                planned=planned,
                staged=staged,
                drop_record=not self._deferring,
            )
        except Unreconcilable as exc:
            raise McdError(exc.plan.reason) from exc
        except UpdateError as exc:
            raise ApplyError(str(exc), action_event(exc)) from exc
        finally:
            self._host = None
            self._unstage()  # taken, or of no use any more (the config's text held for nothing)
        self._finished = self._deferring
        # `new` is what was just recorded as currentconfig: no need to read and parse it back;
        # without its JSON text, which was for the record (megabytes held for nothing)
        key = atomicfs.version_of(self.root.join(state.CURRENT_CONFIG))
        if key is not None:
            self._disk_cache = (key, replace(new, raw_text=None))
        return Applied(outcome.plan, outcome.reboot, tuple(service_action(a) for a in outcome.actions_run))

    def adopt(self, mc: MachineConfig) -> str | None:
        """Record `mc` as the node's config without writing any of it (`--adopt`); the first
        difference between it and the disk (None: none)."""
        with rootlock.hold(self.root, timeout=self.lock_timeout):
            differs = self.check(mc)
            txn = state.Transaction(None, mc_json(mc), "apply", "policy", new_text=mc.source_text)
            try:
                state.begin(self.root, txn)
                state.commit(self.root, mc.ocl_image)
            except HostError as exc:
                raise McdError(f"recording {mc.name} as the node's config: {exc}") from None
        return differs

    def reboot(self, reason: str) -> bool:
        """Reboot a live node (True); on a root that is not a running system, False: simulate it."""
        try:
            return request_reboot(self.host(), reason)
        except RebootError as exc:
            raise HostCommandError(str(exc)) from None

    def simulated_boot(self) -> None:
        """What a boot does to the records: the reboot owed is done (a sandbox root has no boot id)."""
        state.clear_reboot(self.root)


def _drained() -> None:
    """The plan's drain step once `NodeApplier.apply` drained before taking the root's lock."""


def _settled_enablement(
    root: HostRoot,
    config: IgnitionConfig,
    ask: Callable[[Sequence[str]], Mapping[str, str]],
    names: Sequence[str],
) -> dict[str, str]:
    """Enablement states for the on-disk check, with systemctl asked only where links do not settle it.

    The check only needs to know whether a unit expected enabled is enabled, and whether one
    expected disabled is not: the root's links answer both for plain units (`mcd.host.unitlinks`),
    where `systemctl --root is-enabled` costs a process of about half a second for a few hundred
    units on every check. Any unit the links leave in doubt is asked about as before.
    """
    expected = {u.name: u.enabled for u in config.units}
    links = UnitLinks(root)
    scan = links.enablement_links()
    states: dict[str, str] = {}
    unsure: list[str] = []
    for name in names:
        want = expected.get(name)
        if want and links.surely_enabled(name, scan):
            states[name] = "enabled"
        elif want is False and links.surely_not_enabled(name, scan):
            # not enabled, not enabled-runtime: no link on the search path names or leads to it
            states[name] = "disabled"
        else:
            unsure.append(name)
    if unsure:
        states.update(ask(unsure))
    return states
