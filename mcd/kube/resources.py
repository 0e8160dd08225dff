"""The requests mcd makes, one method per resource and verb, over the client's transport.

`KubeClient` (mcd.kube.client, the only importer of `kubernetes`) inherits them; here they are
plain paths and bodies, so the list of what mcd asks of the API server reads in one place.
Which version of the policy group serves evictions and budgets is found by discovery, as
`kubectl drain` finds it: `policy/v1` from Kubernetes 1.22 (OpenShift 4.9), `policy/v1beta1`
before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from mcd.kube.errors import ApiError, NotFoundError

Obj = dict[str, Any]

MCO_GROUP = "machineconfiguration.openshift.io"
MC_PATH = f"/apis/{MCO_GROUP}/v1/machineconfigs"
CONTROLLERCONFIG_PATH = f"/apis/{MCO_GROUP}/v1/controllerconfigs"
MACHINECONFIGURATION_PATH = "/apis/operator.openshift.io/v1/machineconfigurations"
MCN_PATH = f"/apis/{MCO_GROUP}/v1/machineconfignodes"
MERGE_PATCH = "application/merge-patch+json"
# what the agent lists and watches, and the pool controller lists whole; where its Lease lives
COLLECTIONS = {
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "machineconfigs": MC_PATH,
    "machineconfigpools": f"/apis/{MCO_GROUP}/v1/machineconfigpools",
    "controllerconfigs": CONTROLLERCONFIG_PATH,
    "machineconfignodes": MCN_PATH,
}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{}/leases"


def _path(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


def eviction_version(core_v1: Mapping[str, Any]) -> str:
    """The policy version of the pods/eviction subresource the core API lists (kubectl drain's
    rule); `v1` when the list does not say. Pure."""
    for r in core_v1.get("resources") or []:
        if isinstance(r, Mapping) and r.get("name") == "pods/eviction" and r.get("group") == "policy":
            return str(r.get("version") or "v1")
    return "v1"


def served_version(group: Mapping[str, Any], wanted: str, fallback: str) -> str:
    """`wanted` when the API group lists it, else `fallback`. Pure."""
    versions = {str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, Mapping)}
    return wanted if wanted in versions else fallback


class Resources:
    """One method per request; the transport (`_request`, `_request_text`) is the client's."""

    # found once per client by discovery (None: not asked yet)
    _eviction_version: str | None = None
    _pdb_version: str | None = None

    def _request(self, method: str, path: str, *, writer: bool = False, **kwargs: Any) -> Obj:
        raise NotImplementedError

    def _request_text(self, method: str, path: str, *, writer: bool = False, **kw: Any) -> tuple[Obj, bytes]:
        raise NotImplementedError

    def _policy(self) -> tuple[str, str]:
        """(eviction version, PodDisruptionBudget version) of this server; a failed discovery is
        asked again next time and meanwhile assumes policy/v1."""
        if self._eviction_version is None or self._pdb_version is None:
            try:
                eviction = eviction_version(self._request("GET", "/api/v1"))
                pdb = served_version(self._request("GET", "/apis/policy"), "v1", "v1beta1")
            except ApiError:
                return "v1", "v1"
            self._eviction_version, self._pdb_version = eviction, pdb
        return self._eviction_version, self._pdb_version

    # -- nodes

    def get_node(self, name: str) -> Obj:
        return self._request("GET", f"/api/v1/nodes/{_path(name)}")

    def patch_node(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> Obj:
        """A JSON merge patch of the node (a resourceVersion in it is a precondition: 409 if stale)."""
        path = f"/api/v1/nodes/{_path(name)}" + ("/status" if status else "")
        return self._request("PATCH", path, body=patch, content_type=MERGE_PATCH, writer=True)

    # -- configs

    def get_machineconfig_json(self, name: str) -> tuple[Obj, bytes | None]:
        """The MachineConfig and its JSON text as served: the update records that text as it is
        (encoding a rendered config again costs about as much as decoding it)."""
        return self._request_text("GET", f"{MC_PATH}/{_path(name)}")

    def get_machineconfiguration(self, name: str = "cluster") -> Obj | None:
        """The operator's MachineConfiguration (None when absent: defaults apply)."""
        try:
            return self._request("GET", f"{MACHINECONFIGURATION_PATH}/{_path(name)}")
        except NotFoundError:
            return None

    # -- the node's MachineConfigNode

    def get_machineconfignode(self, name: str) -> Obj:
        return self._request("GET", f"{MCN_PATH}/{_path(name)}")

    def create_machineconfignode(self, obj: Mapping[str, Any]) -> Obj:
        return self._request("POST", MCN_PATH, body=obj)

    def update_machineconfignode(self, name: str, obj: Mapping[str, Any], *, status: bool = False) -> Obj:
        """PUT the object (or, with `status`, its status subresource); the resourceVersion in it
        is a precondition (409 if stale)."""
        path = f"{MCN_PATH}/{_path(name)}" + ("/status" if status else "")
        return self._request("PUT", path, body=obj)

    def delete_machineconfignode(self, name: str) -> None:
        """The pool controller's: the MachineConfigNode of a node that is gone."""
        self._request("DELETE", f"{MCN_PATH}/{_path(name)}")

    def get_configmap(self, namespace: str, name: str) -> Obj:
        """A ConfigMap (the certificate writer's `kubeconfig-data`, at a CA rotation)."""
        return self._request("GET", f"/api/v1/namespaces/{_path(namespace)}/configmaps/{_path(name)}")

    # -- events

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self._request("POST", f"/api/v1/namespaces/{_path(namespace)}/events", body=event, writer=True)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A repeated Event: its count and lastTimestamp (client-go's recorder patches them too)."""
        path = f"/api/v1/namespaces/{_path(namespace)}/events/{_path(name)}"
        self._request("PATCH", path, body=patch, content_type=MERGE_PATCH, writer=True)

    # -- drain

    def list_pods_on_node(self, node: str) -> list[Obj]:
        obj = self._request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
        return list(obj.get("items") or [])

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._request("GET", f"/api/v1/namespaces/{_path(namespace)}/pods/{_path(name)}")

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """POST pods/eviction; ApiError 429 when a PodDisruptionBudget forbids it now."""
        body: Obj = {
            "apiVersion": f"policy/{self._policy()[0]}",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_seconds}
        path = f"/api/v1/namespaces/{_path(namespace)}/pods/{_path(name)}/eviction"
        # as the node writer: a kubelet's identity, which NodeRestriction lets evict only the pods
        # bound to its node (RBAC cannot narrow the ServiceAccount's grant to them)
        self._request("POST", path, body=body, writer=True)

    def list_pdbs(self) -> list[Obj]:
        obj = self._request("GET", f"/apis/policy/{self._policy()[1]}/poddisruptionbudgets")
        return list(obj.get("items") or [])

    # -- the pool controller (mcd.controller): whole collections listed every pass, its Lease

    def list_all(self, resource: str) -> list[Obj]:
        """Every object of `resource` (a key of COLLECTIONS), cluster-wide."""
        return list(self._request("GET", COLLECTIONS[resource]).get("items") or [])

    def list_collection(self, resource: str, field_selector: str = "") -> tuple[list[Obj], str]:
        """The objects of `resource` (those `field_selector` picks) and the list's resourceVersion
        to watch from: an informer's list (`mcd.kube.informer`)."""
        query = {"fieldSelector": field_selector} if field_selector else None
        obj = self._request("GET", COLLECTIONS[resource], query=query)
        return list(obj.get("items") or []), str((obj.get("metadata") or {}).get("resourceVersion", ""))

    def create_machineconfig(self, obj: Mapping[str, Any]) -> Obj:
        return self._request("POST", MC_PATH, body=obj)

    def patch_machineconfigpool(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> Obj:
        """A JSON merge patch of the pool or its status (a resourceVersion in it is a precondition)."""
        path = f"{COLLECTIONS['machineconfigpools']}/{_path(name)}" + ("/status" if status else "")
        return self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        try:
            return self._request("GET", f"{LEASES.format(_path(namespace))}/{_path(name)}")
        except NotFoundError:
            return None

    def create_lease(self, namespace: str, obj: Mapping[str, Any]) -> Obj:
        return self._request("POST", LEASES.format(_path(namespace)), body=obj)

    def update_lease(self, namespace: str, obj: Mapping[str, Any]) -> Obj:
        """PUT the Lease; its resourceVersion is a precondition (ConflictError when another wrote)."""
        path = f"{LEASES.format(_path(namespace))}/{_path(str(obj['metadata']['name']))}"
        return self._request("PUT", path, body=obj)
