"""The certificate writer: upstream's ControllerConfig worker (`pkg/daemon/certificate_writer.go`).

It lists and watches the ControllerConfig `machine-config-controller` and, whenever the node
has not recorded its resourceVersion (annotation `lastSyncedControllerConfigResourceVersion`)
or a service-CA rotation is flagged, writes the kubelet's CA bundle, the cloud provider's CA,
the merged internal-registry pull secret and the image registry CAs under
`/etc/docker/certs.d` (`mcd.planner.certs` decides, `mcd.host.certs` writes), then records the
resourceVersion on the node. Nothing here drains, reboots or touches the node's state: as
upstream, these files live outside MachineConfigs (the on-disk check and the drift monitor skip
them, pruning never deletes them).

It runs beside the node sync, as upstream's worker does: `run()` is the thread's whole body
(the loop starts it), and never raises. A ControllerConfig the planner refuses writes nothing
and is told once (log and Warning event `InvalidControllerConfig`); a failed write is retried
with upstream's backoff (1 s doubling to 60 s) and told by `CertificateWriteFailed`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from mcd.agent.report.events import NAMESPACE as MCO_NAMESPACE
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.host import rootlock
from mcd.host.certs import write_bundle, write_certificates
from mcd.host.root import HostRoot
from mcd.kube.backoff import Backoff
from mcd.kube.errors import ApiError
from mcd.kube.watch import follow
from mcd.node import annotations as ann
from mcd.planner.certs import (
    CONTROLLER_CONFIG,
    KUBECONFIG_DATA,
    KUBECONFIG_DATA_KEY,
    ROTATE_TRUE,
    BadControllerConfig,
    CaMerge,
    configmap_bytes,
    merge_server_ca,
    needs_write,
    parse,
)
from mcd.planner.managed_paths import KUBECONFIG

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]

# a cluster without the ControllerConfig API (no Machine Config Operator): looked for again this
# seldom, and said once
ABSENT_RECHECK = 600.0
# a retry due while the watch is open: the watch is asked to end by then (at least this long)
MIN_WATCH_SECONDS = 2
# no node known yet: look again after this long (upstream requeues after a minute)
NO_NODE_DELAY = 1.0

INVALID = "InvalidControllerConfig"
WRITE_FAILED = "CertificateWriteFailed"


class ControllerConfigApi(Protocol):
    def list_named(self, resource: str, name: str) -> tuple[Obj | None, str]: ...

    def get_configmap(self, namespace: str, name: str) -> Obj: ...

    def watch(
        self, resource: str, resource_version: str, timeout_seconds: int, *, name: str = ""
    ) -> Iterator[tuple[str, Obj, bytes | None]]: ...


class _NoNode(Exception):
    """The node is not known yet (the node watch has not delivered it)."""


class CertificateWriter:
    def __init__(
        self,
        api: ControllerConfigApi,
        writer: NodeWriter,
        events: EventRecorder,
        root: HostRoot,
        stop: threading.Event,
        *,
        watch_timeout_seconds: int = 300,
        restart_kubelet: Callable[[bytes], None] | None = None,
        lock_timeout: float = rootlock.DEFAULT_TIMEOUT,
    ) -> None:
        self.api = api
        # stops the kubelet, gives its kubeconfig this CA and starts it (a CA rotation)
        self.restart_kubelet = restart_kubelet
        self.writer = writer
        self.events = events
        self.root = root
        self.stop = stop
        self.watch_timeout_seconds = watch_timeout_seconds
        # how long a write waits for the root's lock (an update holds it): then retried later
        self.lock_timeout = lock_timeout
        self._latest: Obj | None = None
        self._retry_at: float | None = None
        self._absent_said = False
        self._backoff = Backoff()
        self._told: dict[str, str] = {}  # what -> the resourceVersion last told about
        self._last_failure = ""

    # -- the thread

    def run(self) -> None:
        """List and watch the ControllerConfig, writing on each change, until `stop` is set."""
        follow(
            f"controllerconfig {CONTROLLER_CONFIG}",
            lambda: self.api.list_named("controllerconfigs", CONTROLLER_CONFIG),
            lambda rv: self.api.watch("controllerconfigs", rv, self._watch_timeout(), name=CONTROLLER_CONFIG),
            self._offer,
            self.stop,
            after_watch=self._resync,
            absent=self._absent,
        )

    def _resync(self) -> None:
        """The end of a watch is the resync, and the time of a retry that fell due."""
        if self._retry_at is None or time.monotonic() >= self._retry_at:
            self.attempt()

    def _absent(self) -> float:
        if not self._absent_said:
            LOG.info(
                "this cluster serves no ControllerConfig: no certificates to write "
                "(looked for again every %.0fs)",
                ABSENT_RECHECK,
            )
            self._absent_said = True
        return ABSENT_RECHECK

    def _watch_timeout(self) -> int:
        if self._retry_at is None:
            return self.watch_timeout_seconds
        due = int(self._retry_at - time.monotonic() + 0.999)
        return max(MIN_WATCH_SECONDS, min(self.watch_timeout_seconds, due))

    def _offer(self, obj: Obj | None) -> None:
        """A new version of the ControllerConfig (None: there is none): try it at once."""
        self._latest = obj
        self._retry_at = None
        if obj is None:
            LOG.info("no controllerconfig %s: no certificates to write", CONTROLLER_CONFIG)
            return
        self.attempt()

    # -- one attempt

    def attempt(self) -> None:
        """Write what the last ControllerConfig seen asks for, if the node has not recorded it.

        Never raises: a refusal is told once, a failure is told and retried later.
        """
        obj = self._latest
        if obj is None:
            return
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        try:
            self.sync(obj)
        except BadControllerConfig as exc:
            self._retry_at = None  # the same object will not get better: wait for the next one
            message = f"ControllerConfig {CONTROLLER_CONFIG} resourceVersion {rv} not written"
            self._tell_once(INVALID, rv, f"{message}, nothing changed on disk: {exc}")
            return
        except _NoNode:
            self._retry_at = time.monotonic() + NO_NODE_DELAY
            return
        except Exception as exc:  # a failed write or node patch: retried, never fatal
            delay = self._backoff.next_delay(exc.retry_after if isinstance(exc, ApiError) else None)
            self._retry_at = time.monotonic() + delay
            message = f"syncing ControllerConfig {CONTROLLER_CONFIG} resourceVersion {rv} failed: {exc}"
            LOG.error("%s (retry in %.0fs)", message, delay)
            if message != self._last_failure:
                self._last_failure = message
                self.events.warning(WRITE_FAILED, message)
            return
        self._retry_at = None
        self._backoff.reset()
        self._last_failure = ""

    def _tell_once(self, what: str, rv: str, message: str) -> None:
        if self._told.get(what) == rv:
            return
        self._told[what] = rv
        LOG.error("%s", message)
        self.events.warning(what, message)

    def sync(self, obj: Obj) -> None:
        """Upstream's syncControllerConfigHandler for one ControllerConfig object."""
        certs = parse(obj)  # refused before anything is written
        node = self.writer.cached
        if node is None:
            raise _NoNode
        if not needs_write(node.annotations.get(ann.LAST_SYNCED_CONTROLLER_CONFIG), certs):
            return
        observed = node.annotations.get(ann.LAST_OBSERVED_SERVER_CA, "")
        merge = self._merge_rotated_ca() if certs.rotating and observed != ROTATE_TRUE else None
        # the root's lock, as every writer of the node's files holds it: never in the middle of
        # an update (the agent's own, on its loop thread, or another process's)
        with rootlock.hold(self.root, timeout=self.lock_timeout):
            written = write_certificates(self.root, certs)
            if merge is not None and merge.kubeconfig is not None:
                LOG.info("Writing new Data to %s", KUBECONFIG)
                if write_bundle(self.root, KUBECONFIG, merge.kubeconfig):
                    written.files.append(KUBECONFIG)
        if written:
            files, removed = ", ".join(written.files), ", ".join(written.removed)
            LOG.info("certificate writer: wrote %s; removed %s", files or "nothing", removed or "nothing")
        changes: dict[str, str | None] = {ann.LAST_SYNCED_CONTROLLER_CONFIG: certs.resource_version}
        if observed != certs.rotate:
            changes[ann.LAST_OBSERVED_SERVER_CA] = certs.rotate
        self.writer.set_annotations(changes)
        LOG.info("Certificate was synced from controllerconfig resourceVersion %s", certs.resource_version)
        if merge is not None and merge.restart_kubelet and self.restart_kubelet is not None:
            with rootlock.hold(self.root, timeout=self.lock_timeout):  # it writes the kubelet's kubeconfig
                self.restart_kubelet(merge.ca)

    def _merge_rotated_ca(self) -> CaMerge | None:
        """Upstream's merge of ConfigMap kubeconfig-data into /etc/kubernetes/kubeconfig at a CA
        rotation; None when the ConfigMap cannot be read or holds no bundle (upstream goes on
        without it, and records the rotation as observed all the same)."""
        try:
            cm = self.api.get_configmap(MCO_NAMESPACE, KUBECONFIG_DATA)
        except ApiError as exc:
            LOG.error("Error retrieving kubeconfig-data. %s", exc)
            return None
        bundle = configmap_bytes(cm, KUBECONFIG_DATA_KEY)
        if bundle is None:
            LOG.error(
                "kubeconfig-data ConfigMap not populated yet. %s not found in %s/%s",
                KUBECONFIG_DATA_KEY,
                MCO_NAMESPACE,
                KUBECONFIG_DATA,
            )
            return None
        # a missing or unreadable kubeconfig fails the sync (retried), as upstream
        merge = merge_server_ca(bundle, self.root.join(KUBECONFIG).read_bytes())
        for cn in merge.added:
            LOG.info("Cert not found in kubeconfig. This means we need to write to disk. Subject is: %s", cn)
        if merge.added:
            LOG.info("Need to restart kubelet" if merge.restart_kubelet else "Skipping kubelet restart")
        return merge
