"""`ApiServer`: the stand-in Kubernetes API server as one object tests, the simulator and
`mcd sim-cluster` start, fault, restart and read directly."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from mcd.host.atomicfs import atomic_write
from mcd_sim.apiserver import errors
from mcd_sim.apiserver.app import App
from mcd_sim.apiserver.audit import AuditLog
from mcd_sim.apiserver.authn import ADMIN, Authenticator, User
from mcd_sim.apiserver.faults import Faults
from mcd_sim.apiserver.http import SimHTTPServer, Traffic
from mcd_sim.apiserver.lifecycle import Lifecycle
from mcd_sim.apiserver.objectrules import Obj, rfc3339
from mcd_sim.apiserver.patch import merge_patch
from mcd_sim.apiserver.rbac import Access, Authorizer
from mcd_sim.apiserver.resources import RESOURCES, ResourceType
from mcd_sim.apiserver.store import Store
from mcd_sim.apiserver.tls import make_client_ca, make_serving_cert

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "openshift-machine-config-operator")
WORKER_ROLE = "node-role.kubernetes.io/worker"


def resource_type(kind: str) -> ResourceType:
    """A resource by kind, plural or short name, case-insensitive (`Node`, `nodes`, `mcp` …)."""
    wanted = kind.lower()
    for rt in RESOURCES:
        if not rt.view_of and wanted in (rt.kind.lower(), rt.plural, *rt.short_names):
            return rt
    raise ValueError(f"unknown kind {kind!r}")


# (type, status, reason, message) of each condition a healthy kubelet posts
_KUBELET_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def _kubelet_conditions(now: str) -> list[Obj]:
    """The conditions of a healthy kubelet: no pressure of any kind, Ready."""
    return [
        {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, status, reason, message in _KUBELET_CONDITIONS
    ]


def _node_info(digest: bytes) -> Obj:
    """The RHCOS 4.18 kubelet's nodeInfo, its machine IDs taken from `digest`."""
    return {
        "architecture": "amd64",
        "bootID": str(uuid.UUID(bytes=digest[:16], version=4)),
        "containerRuntimeVersion": "cri-o://1.31.5-4.rhaos4.18.git0ae5dd7.el9",
        "kernelVersion": "5.14.0-427.50.1.el9_4.x86_64",
        "kubeProxyVersion": "v1.31.6",
        "kubeletVersion": "v1.31.6",
        "machineID": digest[16:32].hex(),
        "operatingSystem": "linux",
        "osImage": "Red Hat Enterprise Linux CoreOS 418.94.202501221327-0",
        "systemUUID": str(uuid.UUID(bytes=digest[16:32], version=4)),
    }


def node_object(name: str, labels: dict[str, str], now: str) -> Obj:
    """A Ready worker Node as a RHCOS kubelet registers it; its IDs and address follow from the
    name, so two nodes differ and a node re-added is the same machine."""
    digest = hashlib.sha256(name.encode()).digest()
    ip = f"10.0.{digest[0] % 250}.{digest[1] % 250 + 2}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                WORKER_ROLE: "",
                "node.openshift.io/os_id": "rhcos",
                **labels,
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": {
                "cpu": "3500m",
                "memory": "15225188Ki",
                "pods": "250",
                "ephemeral-storage": "114396791822",
            },
            "capacity": {
                "cpu": "4",
                "memory": "16375140Ki",
                "pods": "250",
                "ephemeral-storage": "125293548Ki",
            },
            "conditions": _kubelet_conditions(now),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": _node_info(digest),
        },
    }


class ApiServer:
    """A Kubernetes API server on loopback for the objects mcd uses.

    Objects live in `store` across `stop()`/`start()`/`restart()` (the same port is kept once
    bound). Requests need `Authorization: Bearer <token>` (the admin's `token` is random per
    instance unless given; `add_token` issues one for another user) or, over TLS, a client
    certificate from `issue_client_cert`. Every authenticated user may do anything until
    `enforce_rbac` switches RBAC on.
    """

    def __init__(
        self,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        token: str | None = None,
        audit_log_path: str | Path | None = None,
        *,
        history: int = 4096,
        bookmark_interval: float = 1.0,
        tls: bool = True,
    ) -> None:
        self.listen = listen
        self.authn = Authenticator()
        self.token = self.authn.add_token(ADMIN, token)
        self.access = Access(self.authn)
        self.store = Store(history=history)
        self.lifecycle = Lifecycle(self.store)
        self.app = App(self.store, self.lifecycle, bookmark_interval=bookmark_interval)
        self.app.access = self.access
        self.faults = Faults()
        self.traffic = Traffic()  # bytes sent, across restarts
        self.faults._end_watches = self.store.close_watches
        self.audit = AuditLog(audit_log_path) if audit_log_path is not None else None
        # one certificate for the server's life: a kubeconfig written before a restart stays valid
        self.cert = make_serving_cert(listen[0]) if tls else None
        self.client_ca = make_client_ca() if tls else None
        self._ssl = (
            self.cert.server_context(self.client_ca.cert_pem) if self.cert and self.client_ca else None
        )
        self._http: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        for ns in NAMESPACES:
            self.store.create(
                resource_type("Namespace"),
                "",
                {"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}},
            )

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> ApiServer:
        with self._lock:
            if self._http is not None:
                return self
            self._http = SimHTTPServer(
                self.listen,
                self.app,
                self.access,
                self.faults,
                self.audit,
                ssl_context=self._ssl,
                traffic=self.traffic,
            )
            host, port = self._http.server_address[:2]
            self.listen = (str(host), int(port))  # a restart binds the same port again
            self.app.server_address = f"{self.listen[0]}:{self.listen[1]}"
            if self.audit is not None:
                self.audit.open()
            self.lifecycle.start()
            self._thread = threading.Thread(
                target=self._http.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="sim-apiserver",
                daemon=True,
            )
            self._thread.start()
            return self

    def stop(self) -> None:
        """Stop serving: open connections and watches end; objects stay in `store`."""
        with self._lock:
            http, thread = self._http, self._thread
            self._http = self._thread = None
            if http is None:
                return
            http.stopping.set()
            http.shutdown()
            self.store.close_watches()
            # let each watch write its final chunk: a client sees the stream end, not a broken one
            http.wait_for_streams(timeout=5)
            http.close_connections()
            http.server_close()
            if thread is not None:
                thread.join()
            self.lifecycle.stop()
            if self.audit is not None:
                self.audit.close()

    def restart(self) -> None:
        """Stop and start again on the same address with the same objects (clients must reconnect)."""
        self.stop()
        self.start()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._http is not None

    @property
    def url(self) -> str:
        host, port = self.listen
        return f"{'https' if self.cert else 'http'}://{host}:{port}"

    # --- identities ----------------------------------------------------------------------

    def add_token(self, user: User) -> str:
        """A new bearer token that authenticates as `user`."""
        return self.authn.add_token(user)

    def issue_client_cert(self, user: User) -> tuple[bytes, bytes]:
        """A client certificate and key (PEM) that authenticate as `user` (TLS servers only)."""
        if self.client_ca is None:
            raise RuntimeError("client certificates need a TLS server")
        groups = tuple(g for g in user.groups if g != "system:authenticated")
        return self.client_ca.issue(user.name, groups)

    def enforce_rbac(self, objects: list[Obj] | None) -> None:
        """Authorize every request by these ClusterRoles, Roles and bindings (and the Node
        authorizer's grant to kubelets); None switches authorization off again."""
        self.access.authorizer = None if objects is None else Authorizer(objects)

    # --- client configuration ------------------------------------------------------------

    def kubeconfig(self, *, context: str = "sim", user: Obj | None = None) -> Obj:
        """A kubeconfig for this server; `user` is the users[] entry's body (default: the admin's token)."""
        cluster: Obj = {"server": self.url}
        if self.cert is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.cert.cert_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": "sim-user", "user": user if user is not None else {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": "sim-user"}}],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, context: str = "sim") -> Path:
        """Write a kubeconfig for this server atomically, mode 0600 (it holds the token)."""
        target = Path(path)
        data = yaml.safe_dump(self.kubeconfig(context=context), sort_keys=False).encode()
        atomic_write(target, data, 0o600)
        return target

    # --- direct store access -------------------------------------------------------------

    def add_node(self, name: str, **labels: str) -> Obj:
        """Create a Ready worker Node (extra labels as keyword arguments)."""
        return self.store.put(node_object(name, dict(labels), rfc3339(self.store.clock())))

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        rt = resource_type(kind)
        return self.store.find(rt, (namespace or "default") if rt.namespaced else "", name)

    def objects(self, kind: str, namespace: str | None = None) -> list[Obj]:
        items, _ = self.store.select(resource_type(kind), namespace)
        return items

    def put(self, obj: Obj) -> Obj:
        """Create or replace an object as given, status included (no preconditions)."""
        return self.store.put(obj)

    def patch(
        self, kind: str, name: str, patch: Obj, namespace: str | None = None, *, status: bool = False
    ) -> Obj:
        """JSON merge patch of an object (its status with `status=True`), as a client would."""
        rt = resource_type(kind)
        ns = (namespace or "default") if rt.namespaced else ""
        return self.store.mutate(
            rt, ns, name, lambda cur: merge_patch(cur, patch), subresource="status" if status else ""
        )

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        rt = resource_type(kind)
        try:
            self.store.delete(rt, (namespace or "default") if rt.namespaced else "", name, grace_seconds=0)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    def evict(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """POST pods/NAME/eviction as a client would: ApiError 429 while a PDB forbids it."""
        options = {} if grace_seconds is None else {"deleteOptions": {"gracePeriodSeconds": grace_seconds}}
        self.lifecycle.evict(namespace, name, options)

    def events(self) -> list[Obj]:
        """Every core/v1 Event, oldest first."""
        return sorted(self.objects("Event"), key=lambda e: int(e["metadata"]["resourceVersion"]))

    def wait_for(self, condition: Any, timeout: float = 10.0) -> Any:
        """Wait until `condition()` is truthy (re-checked on every store change); returns its value."""
        deadline = time.monotonic() + timeout
        watcher, _ = self.store.watch_all()
        try:
            while True:
                value = condition()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met within {timeout}s")
                # a change wakes us at once; the timeout re-checks conditions that depend on time
                with contextlib.suppress(queue.Empty):
                    watcher.events.get(timeout=min(left, 0.5))
        finally:
            self.store.unwatch(watcher)
