"""Draining the node before an update and uncordoning it after: two interchangeable drainers.

`HandshakeDrainer` is upstream's protocol (the default): the daemon writes
`desiredDrain=drain-<config>` and waits until the controller's drain controller confirms with
`lastAppliedDrain`; after the update it asks for `uncordon-<config>` the same way.
`BuiltinDrainer` (`--builtin-drainer`) does the work itself, for clusters without the upstream
controller: cordon, evict through `pods/eviction` (429s retried), wait for the pods to go,
uncordon only a node it cordoned.

Both name the PodDisruptionBudgets that allow no disruption of a pod on the node (no upstream
tool says which budget blocks): the node stays Working with a reason naming them, as upstream's
does while its controller retries the drain. The built-in drainer looks after cordoning and its
update stops there, retried every `--eviction-retry` seconds until a budget allows it; the
handshake asks at once and looks only when the controller's drain is still not done after
`--eviction-retry` seconds. Only the drain timeout is Degraded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mcd.agent.errors import StoppingError, WaitingError
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.node import NodeWriter
from mcd.kube.errors import ApiError, NotFoundError
from mcd.node import annotations as ann
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import NodeState, NodeView
from mcd.node.drainrules import blocking_pdbs, duration_text, pods_to_evict
from mcd.node.errors import McdError

LOG = logging.getLogger(__name__)

# the built-in drainer's mark on a node it cordoned (removed when it uncordons)
CORDONED_BY = "mcd/cordoned-for"
WAIT_SLICE = 1.0
POLL_SECONDS = 5.0


class DrainApi(Protocol):
    def list_pods_on_node(self, node: str) -> list[dict[str, Any]]: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]: ...

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None: ...

    def list_pdbs(self) -> list[dict[str, Any]]: ...


class Drainer(Protocol):
    def drain(self, config: str) -> None: ...

    def uncordon(self, config: str) -> None: ...


class _Base:
    def __init__(
        self,
        writer: NodeWriter,
        events: EventRecorder,
        api: DrainApi | None,
        stop: threading.Event,
        *,
        own_pod: tuple[str, str] | None = None,
        mcn: MachineConfigNodeReporter | None = None,
    ) -> None:
        self.writer, self.events, self.api, self.stop = writer, events, api, stop
        self.own_pod = own_pod
        # the handshake's cordon, drain and uncordon are the controller's to report
        self.mcn = mcn or MachineConfigNodeReporter(None, writer)

    @property
    def node(self) -> str:
        return self.writer.name

    def check_budgets(self) -> None:
        """McdError naming the PodDisruptionBudgets that make a drain impossible right now."""
        message = self.blocked()
        if message:
            # as upstream, where the controller retries such a drain and the node stays Working:
            # a budget that allows no disruption now is a wait, not a failure of the node
            raise WaitingError(message)

    def blocked(self) -> str:
        """The reason naming the PodDisruptionBudgets that allow no disruption of a pod to evict
        now (and its Event), or "" when none does."""
        if self.api is None:
            return ""
        try:
            pods = pods_to_evict(self.api.list_pods_on_node(self.node), self.own_pod)
            blocked = blocking_pdbs(self.api.list_pdbs(), pods) if pods else []
        except ApiError as exc:
            if exc.status in (401, 403, 404):
                LOG.info("cannot read pods or budgets (%s): drain without the budget check", exc)
                return ""
            raise
        if not blocked:
            return ""
        names = ", ".join(blocked)
        message = f"drain of node {self.node} blocked: PodDisruptionBudget {names} allows 0 disruptions"
        self.events.warning("DrainBlockedByPodDisruptionBudget", message)
        return message

    def _wait(
        self, predicate: Callable[[NodeView], bool], timeout: float, asked: str | None = None
    ) -> NodeView | None:
        """The node once `predicate` holds, from the watch; read again every few seconds (as
        upstream polls) so a broken watch cannot hold the handshake up. `asked`: the
        desiredDrain this wait is for, written again when the node no longer carries it (it
        was deleted and created again meanwhile), so the controller is asked again."""
        deadline = time.monotonic() + timeout
        next_read = time.monotonic() + POLL_SECONDS
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            node = self.writer.wait_for(predicate, min(WAIT_SLICE, left))
            if node is not None:
                return node
            if asked is not None:
                self._ask_again(asked)
            if time.monotonic() >= next_read:
                next_read = time.monotonic() + POLL_SECONDS
                try:
                    self.writer.refresh()
                except ApiError as exc:
                    LOG.debug("reading node %s failed: %s", self.node, exc)
        raise StoppingError("daemon stopping")

    def _ask_again(self, value: str) -> None:
        node = self.writer.cached
        if node is None or value in (node.desired_drain, node.last_applied_drain):
            return
        LOG.info("node %s no longer asks for %s (created again?): asking again", self.node, value)
        try:
            self.writer.set_annotations({ann.DESIRED_DRAIN: value})
        except (ApiError, McdError) as exc:
            LOG.debug("asking again for %s on node %s failed: %s", value, self.node, exc)


class HandshakeDrainer(_Base):
    """Upstream's drain: ask the controller through `desiredDrain`, wait for `lastAppliedDrain`.
    A drain still not done after `name_after` seconds has the budgets holding it named."""

    def __init__(
        self,
        *args: Any,
        drain_timeout: float,
        uncordon_timeout: float,
        name_after: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.drain_timeout, self.uncordon_timeout = drain_timeout, uncordon_timeout
        self.name_after = name_after

    def drain(self, config: str) -> None:
        value = ann.drain_value(ann.DRAIN, config)
        if self.writer.node().last_applied_drain == value:
            LOG.info("drain is already completed on node %s", self.node)
            return
        self.events.normal("Cordon", "Cordoned node to apply update")
        self.events.normal("Drain", "Draining node to update config.")
        self.writer.set_annotations({ann.DESIRED_DRAIN: value})
        started = time.monotonic()

        def drained(n: NodeView) -> bool:
            return n.last_applied_drain == value

        done = self._wait(drained, min(self.name_after, self.drain_timeout), value)
        named = ""
        if done is None:
            # the controller retries refused evictions at its own pace: a budget at 0 for a
            # moment is routine in a rollout (another node's pod is starting) and not worth an
            # Event and two Node writes; one still holding the drain after a retry is named
            named = self._name_budgets()
            done = self._wait(drained, self.drain_timeout - (time.monotonic() - started), value)
        if done is None:
            failed = (
                f"failed to drain node: {self.node} after {duration_text(self.drain_timeout)}. "
                "Please see machine-config-controller logs for more information"
            )
            self.events.warning("FailedToDrain", failed)  # upstream's Event says what the error says
            raise McdError(failed)
        if named:
            self.writer.set_state(NodeState.WORKING)  # drained: the budget no longer holds it

    def _name_budgets(self) -> str:
        """The budgets allowing no disruption now, named on the node (Working, as upstream's
        while its controller retries the evictions; a Degraded node keeps its state and reason)."""
        if self.writer.node().state is not NodeState.WORKING:
            return ""
        try:
            named = self.blocked()
        except ApiError as exc:
            # only a hint for the operator: the drain is asked for already and goes on waiting
            LOG.debug("cannot name the budgets holding node %s's drain: %s", self.node, exc)
            return ""
        if named:
            self.writer.set_state(NodeState.WORKING, named)
        return named

    def uncordon(self, config: str) -> None:
        value = ann.drain_value(ann.UNCORDON, config)
        if self.writer.node().last_applied_drain != value:
            self.writer.set_annotations({ann.DESIRED_DRAIN: value})
            if self._wait(lambda n: n.last_applied_drain == value, self.uncordon_timeout, value) is None:
                failed = (
                    f"failed to uncordon node: {self.node} after {duration_text(self.uncordon_timeout)}. "
                    "Please see machine-config-controller logs for more information"
                )
                self.events.warning("FailedToUncordon", failed)
                raise McdError(failed)
        self.events.normal("Uncordon", f"Update completed for config {config} and node has been uncordoned")


class BuiltinDrainer(_Base):
    """Cordon and evict without a controller; uncordon only what this drainer cordoned."""

    def __init__(self, *args: Any, timeout: float, retry_seconds: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout, self.retry_seconds = timeout, retry_seconds

    def drain(self, config: str) -> None:
        try:
            self._drain(config)
        except McdError as exc:
            self.mcn.report(mcn.drain_failed(str(exc)))
            raise

    def _drain(self, config: str) -> None:
        assert self.api is not None
        node = self.writer.node()
        if not node.unschedulable:
            self.writer.set_annotations({CORDONED_BY: config}, unschedulable=True)
            self.events.normal("Cordon", "Cordoned node to apply update")
        elif CORDONED_BY not in node.annotations:
            LOG.info(
                "node %s was already cordoned by someone else: it stays cordoned after the update", self.node
            )
        self.mcn.report(mcn.cordoned(True))
        # cordoned first, as kubectl drain does: no new pod lands while a budget holds the drain
        self.check_budgets()
        self.events.normal("Drain", "Draining node to update config.")
        self.mcn.report(mcn.draining("evicting the pods on the node"))
        deadline = time.monotonic() + self.timeout
        pending = {
            (p["metadata"]["namespace"], p["metadata"]["name"]): str(p["metadata"].get("uid", ""))
            for p in pods_to_evict(self.api.list_pods_on_node(self.node), self.own_pod)
        }
        to_evict = dict(pending)
        while to_evict:
            for (ns, name), _uid in list(to_evict.items()):
                try:
                    self.api.evict_pod(ns, name)
                    LOG.info("evicted pod %s/%s from node %s", ns, name, self.node)
                    del to_evict[(ns, name)]
                except NotFoundError:
                    del to_evict[(ns, name)]
                except ApiError as exc:
                    if exc.status != 429:
                        raise
                    LOG.info("eviction of pod %s/%s refused for now (%s): retrying", ns, name, exc)
            if to_evict:
                self._sleep_until(deadline, f"evicting {', '.join(f'{n}/{p}' for n, p in to_evict)}")
        for (ns, name), uid in pending.items():
            while not self._gone(ns, name, uid):
                self._sleep_until(deadline, f"waiting for pod {ns}/{name} to terminate", step=0.2)
        LOG.info("drained node %s", self.node)
        self.mcn.report(mcn.drained("no pod to evict is left on the node"))

    def _gone(self, ns: str, name: str, uid: str) -> bool:
        assert self.api is not None
        try:
            pod = self.api.get_pod(ns, name)
        except NotFoundError:
            return True
        return str(pod.get("metadata", {}).get("uid", "")) != uid

    def _sleep_until(self, deadline: float, doing: str, step: float | None = None) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            failed = f"failed to drain node: {self.node} after {duration_text(self.timeout)}: {doing}"
            self.events.warning("FailedToDrain", failed)
            raise McdError(failed)
        if self.stop.wait(min(step or self.retry_seconds, left)):
            raise StoppingError("daemon stopping")

    def uncordon(self, config: str) -> None:
        node = self.writer.node()
        if CORDONED_BY in node.annotations:
            node = self.writer.set_annotations({CORDONED_BY: None}, unschedulable=False)
            self.events.normal(
                "Uncordon", f"Update completed for config {config} and node has been uncordoned"
            )
        self.mcn.report(mcn.uncordoned(node.unschedulable))
