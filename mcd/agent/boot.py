"""The parts of upstream's boot path that look back at how the node came up (the first sync of
each process runs them; `mcd.agent.sync` orders them as upstream's `syncNode` does).

* What the first boot left: an encapsulated config a firstboot that never finished left in
  place is renamed `.bak`, Ignition's `20-ignition.preset` is removed (`mcd.host.bootfiles`).
* The bootstrap annotations (`loadNodeAnnotations`): a node without `currentConfig` gets those of
  `node-annotations.json`, or, without that file, only `currentConfig` (and `currentImage`) of the
  config recorded on disk.
* A failed `ostree-finalize-staged.service` in the previous boot (CoreOS): its first `error:` line
  goes to the node annotation `ostree-finalize-staged-failure` (and a `FailedFinalization` Event),
  and is appended to an on-disk check failure as its `possible root cause`: a staged update that
  did not finalize leaves the node booted in the old deployment.
* The extensions of the config the node is in, checked in the booted deployment before Done.
"""

from __future__ import annotations

import logging

from mcd.agent.errors import HostCommandError, TransientError
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.config.machineconfig import MachineConfig
from mcd.host import state
from mcd.host.bootfiles import IGNITION_PRESET
from mcd.node import annotations as ann
from mcd.node.annotations import NodeView
from mcd.node.errors import McdError
from mcd.planner import steps
from mcd.planner.plan import Plan
from mcd.planner.rpmostree_args import EXTENSIONS_VERIFICATION_FAILED

LOG = logging.getLogger(__name__)

FAILED_FINALIZATION = "FailedFinalization"


class BootChecks:
    """The boot path's look back; keeps the previous boot's finalization failure for the process."""

    def __init__(self, applier: NodeApplier, writer: NodeWriter, events: EventRecorder) -> None:
        self.applier, self.writer, self.events = applier, writer, events
        # the previous boot's finalization error ("" none), as upstream caches it for the process
        self.finalize_failure = ""

    @property
    def name(self) -> str:
        return self.writer.name

    def retire_leftovers(self) -> None:
        """Upstream's `upgradeHackFor44AndBelow` and `removeIgnitionArtifacts`, on every try of the
        boot path (both do nothing once done)."""
        if self.applier.retire_encapsulated_config():
            LOG.warning("Failed to complete machine-config-daemon-firstboot before joining cluster!")
        if self.applier.remove_ignition_preset():
            LOG.info("removed %s: the units of later configs keep their own enablement", IGNITION_PRESET)
        self.applier.persist_nic_names()  # EL 9 pins NIC names, EL 10 unpins them (upstream's order)

    def load_annotations(self, node: NodeView) -> NodeView:
        """Upstream's loadNodeAnnotations: a node without currentConfig gets the bootstrap ones."""
        if node.current_config:
            return node
        boot = self.applier.bootstrap_annotations()
        if boot is not None:
            LOG.info("Setting initial node config: %s", boot.get(ann.CURRENT_CONFIG, ""))
            changes: dict[str, str | None] = {k if "/" in k else ann.PREFIX + k: v for k, v in boot.items()}
            return self.writer.set_annotations(changes)
        # upstream's best effort for a node that lost its annotations: the config on disk names
        # the current config (and image); desiredConfig and state are the controller's to say
        disk = self.applier.disk_config()
        if disk is None:
            if node.desired_config:
                return node  # a node mcd never ran on: the sync takes desiredConfig as its first
            # a node that just joined: no config of its own yet, nothing of mcd's to check, and no
            # config named for it yet; not Degraded (upstream's node, bootstrapped by the MCO,
            # always has one): wait, untouched, for the pool controller to name its first
            raise TransientError(
                f"node {node.name} has no {ann.DESIRED_CONFIG} yet and no config on disk "
                f"({state.CURRENT_CONFIG}): waiting for its pool to name one"
            )
        LOG.info("Setting initial node config based on current configuration on disk: %s", disk.name)
        fallback: dict[str, str | None] = {ann.CURRENT_CONFIG: disk.name}
        image = self.applier.disk_image()
        if image:
            fallback[ann.CURRENT_IMAGE] = image
        return self.writer.set_annotations(fallback)

    def adopt(self, mc: MachineConfig) -> None:
        """`--adopt`: `mc` recorded as the node's config without writing it; what differs told."""
        differs = self.applier.adopt(mc)
        if differs is None:
            self.events.normal("AdoptedNode", f"Node {self.name} adopted in config {mc.name} as it is")
            return
        message = f"Node {self.name} adopted in config {mc.name} without writing it; differs: {differs}"
        LOG.warning("%s", message)
        self.events.warning("AdoptedNodeDiffers", message)

    def announce_first_config(self, node: NodeView, desired: str, p: Plan) -> str:
        """Upstream's first boot writes the pool's rendered config; here the agent does, and says
        first (log and Event; the node's reason while Working) whether it drains and reboots."""
        then = [
            what
            for what, needed in (
                ("drained", p.drain and not node.single_replica),
                ("rebooted", any(isinstance(s, steps.Reboot) for s in p.steps)),
            )
            if needed
        ]
        message = (
            f"Node {self.name} has no machine-config-daemon state: writing {desired} as its first config "
            f"(files, units, SSH keys){'; the node is ' + ' and '.join(then) if then else ''}"
        )
        LOG.info("%s", message)
        self.events.normal("FirstConfig", message)
        return message

    def sync_finalize_failure(self) -> None:
        """Upstream's syncFinalizationFailureAnnotation: the previous boot's finalization error on
        the node, written when there is one or the key is already there (then emptied)."""
        try:
            failure = self.applier.finalize_failure()
        except HostCommandError as exc:
            # no previous boot in the journal (a first boot) is this too: nothing is known
            LOG.warning("failed to query for deployment failure: %s", exc)
            return
        if failure is None:  # not CoreOS
            return
        if failure:
            LOG.warning("Failed to finalize previous deployment: %s", failure)
            failure = ann.truncate_reason(failure)  # upstream's %.2000s
        else:
            LOG.info("Previous boot ostree-finalize-staged.service appears successful")
        previous, self.finalize_failure = self.finalize_failure, failure
        if not failure and ann.FINALIZE_FAILURE not in self.writer.node().annotations:
            return
        if failure and failure != previous:
            self.events.warning(FAILED_FINALIZATION, failure)
        self.writer.set_annotations({ann.FINALIZE_FAILURE: failure})

    def with_root_cause(self, reason: str) -> str:
        """An on-disk check failure with the previous boot's finalization error, as upstream words it."""
        if not self.finalize_failure:
            return reason
        return f"{reason}; possible root cause: {self.finalize_failure}"

    def verify_extensions(self, mc: MachineConfig) -> None:
        """Upstream's check before Done (OCPBUGS-65645): the booted deployment has every package
        of the config's extensions; McdError with upstream's text when not."""
        error = self.applier.missing_extensions(mc)
        if error is not None:
            raise McdError(f"{EXTENSIONS_VERIFICATION_FAILED}: {error}")
