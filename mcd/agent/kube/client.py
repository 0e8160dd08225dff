"""The daemon's Kubernetes API client: the only module that imports `kubernetes`.

The official package supplies the configuration (in-cluster service account, or a kubeconfig)
and the authenticated connection pool; requests are sent as plain JSON and answers are read as
dicts, so a Node costs one `json.loads` and never a model deserialisation, and a watch is a
line-by-line stream the daemon controls (resume from the last resourceVersion, list again on
410). urllib3's own retries are off: a retried PATCH or POST could be applied twice, and the
daemon loop retries with backoff anyway.

Every failure surfaces as `mcd.agent.errors.ApiError` (NotFound, Conflict, Gone); transport errors
are `ApiError(0, …)`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from mcd import __version__
from mcd.agent.errors import ApiError, ConflictError, GoneError, NotFoundError

LOG = logging.getLogger(__name__)

USER_AGENT = f"machine-config-daemon/mcd-{__version__}"
MCO_GROUP = "machineconfiguration.openshift.io"
MC_PATH = f"/apis/{MCO_GROUP}/v1/machineconfigs"
MACHINECONFIGURATION_PATH = "/apis/operator.openshift.io/v1/machineconfigurations"
MERGE_PATCH = "application/merge-patch+json"

# (connect, read) seconds for one request; a watch reads for its own timeout plus this margin
REQUEST_TIMEOUT = (5.0, 30.0)
WATCH_MARGIN = 15.0

Obj = dict[str, Any]


def _path(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


class KubeClient:
    """Plain-JSON requests to one API server with the credentials of a kubeconfig or the pod."""

    def __init__(self, configuration: Any) -> None:
        configuration.retries = False
        self._api = k8s.ApiClient(configuration)
        self._api.user_agent = USER_AGENT
        self.host = str(configuration.host)
        # requests sent, by "METHOD kind": what the benchmark and the tests count
        self.requests: dict[str, int] = {}

    @classmethod
    def from_kubeconfig(cls, path: str | None) -> KubeClient:
        """A client from `path`, or from the pod's service account when `path` is empty."""
        configuration = k8s.Configuration()
        try:
            if path:
                k8s_config.load_kube_config(config_file=path, client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as exc:
            where = path or "the in-cluster service account"
            raise ApiError(0, f"cannot load API credentials from {where}: {exc}") from None
        return cls(configuration)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    # -- transport

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
        what: str = "",
    ) -> Any:
        """The urllib3 response of one request, unread; ApiError for transport errors."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]
        _, url, headers, _, _ = self._api.param_serialize(
            method, path, query_params=params, header_params=headers, auth_settings=["BearerToken"]
        )
        key = f"{method} {what or path}"
        self.requests[key] = self.requests.get(key, 0) + 1
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        try:
            return self._api.rest_client.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False,
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from None

    def _request(self, method: str, path: str, **kwargs: Any) -> Obj:
        resp = self._send(method, path, **kwargs)
        try:
            data = resp.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from None
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            raise _api_error(method, path, resp.status, data, resp.headers.get("Retry-After"))
        try:
            obj = json.loads(data) if data else {}
        except ValueError as exc:
            raise ApiError(0, f"{method} {path}: unreadable answer: {exc}") from None
        if not isinstance(obj, dict):
            raise ApiError(0, f"{method} {path}: answer is not a JSON object")
        return obj

    # -- nodes

    def get_node(self, name: str) -> Obj:
        return self._request("GET", f"/api/v1/nodes/{_path(name)}", what="node")

    def list_node(self, name: str) -> tuple[Obj | None, str]:
        """The node (None when it does not exist) and the list's resourceVersion to watch from."""
        obj = self._request(
            "GET", "/api/v1/nodes", query={"fieldSelector": f"metadata.name={name}"}, what="nodes (list)"
        )
        items = obj.get("items") or []
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        return (items[0] if items else None), rv

    def watch_node(self, name: str, resource_version: str, timeout_seconds: int) -> Iterator[tuple[str, Obj]]:
        """(type, object) events of this node from `resource_version` on, until the server ends the watch.

        GoneError when that version is too old (list again); ApiError when the stream breaks.
        Bookmarks are yielded too: they only carry a newer resourceVersion.
        """
        path = "/api/v1/nodes"
        resp = self._send(
            "GET",
            path,
            query={
                "fieldSelector": f"metadata.name={name}",
                "watch": True,
                "resourceVersion": resource_version,
                "allowWatchBookmarks": True,
                "timeoutSeconds": timeout_seconds,
            },
            timeout=(REQUEST_TIMEOUT[0], timeout_seconds + WATCH_MARGIN),
            what="nodes (watch)",
        )
        try:
            if resp.status == 410:
                raise GoneError(410, f"watch of node {name}: resourceVersion {resource_version} is gone")
            if not 200 <= resp.status < 300:
                raise _api_error("GET", path, resp.status, resp.data, resp.headers.get("Retry-After"))
            for line in _lines(resp):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise ApiError(0, f"watch of node {name}: unreadable event") from None
                etype, obj = str(event.get("type", "")), event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code", 0) or 0)
                    if code == 410:
                        raise GoneError(410, f"watch of node {name}: {obj.get('message', 'gone')}")
                    raise ApiError(code, f"watch of node {name}: {obj.get('message', 'error event')}")
                yield etype, obj
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"watch of node {name} broken: {exc}") from None
        finally:
            resp.release_conn()

    def patch_node(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> Obj:
        """A JSON merge patch of the node (a resourceVersion in it is a precondition: 409 if stale)."""
        path = f"/api/v1/nodes/{_path(name)}" + ("/status" if status else "")
        return self._request("PATCH", path, body=patch, content_type=MERGE_PATCH, what="node")

    # -- configs

    def get_machineconfig(self, name: str) -> Obj:
        return self._request("GET", f"{MC_PATH}/{_path(name)}", what="machineconfig")

    def get_machineconfiguration(self, name: str = "cluster") -> Obj | None:
        """The operator's MachineConfiguration (None when absent: defaults apply)."""
        try:
            return self._request(
                "GET", f"{MACHINECONFIGURATION_PATH}/{_path(name)}", what="machineconfiguration"
            )
        except NotFoundError:
            return None

    # -- events

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self._request("POST", f"/api/v1/namespaces/{_path(namespace)}/events", body=event, what="event")

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A repeated Event: its count and lastTimestamp (client-go's recorder patches them too)."""
        path = f"/api/v1/namespaces/{_path(namespace)}/events/{_path(name)}"
        self._request("PATCH", path, body=patch, content_type=MERGE_PATCH, what="event")

    # -- drain

    def list_pods_on_node(self, node: str) -> list[Obj]:
        obj = self._request(
            "GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"}, what="pods"
        )
        return list(obj.get("items") or [])

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._request("GET", f"/api/v1/namespaces/{_path(namespace)}/pods/{_path(name)}", what="pod")

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """POST pods/eviction; ApiError 429 when a PodDisruptionBudget forbids it now."""
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_seconds}
        path = f"/api/v1/namespaces/{_path(namespace)}/pods/{_path(name)}/eviction"
        self._request("POST", path, body=body, what="pods/eviction")

    def list_pdbs(self) -> list[Obj]:
        obj = self._request("GET", "/apis/policy/v1/poddisruptionbudgets", what="poddisruptionbudgets")
        return list(obj.get("items") or [])


def _lines(resp: Any) -> Iterator[bytes]:
    """Complete lines of a streamed body (a watch sends one JSON event per line)."""
    buf = b""
    for chunk in resp.stream(64 * 1024, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def _api_error(method: str, path: str, status: int, data: bytes | None, retry_after: str | None) -> ApiError:
    message = ""
    try:
        obj = json.loads(data or b"{}")
        if isinstance(obj, dict):
            message = str(obj.get("message", ""))
    except ValueError:
        pass
    text = f"{method} {path}: {status} {message or (data or b'').decode(errors='replace')[:200]}".rstrip()
    delay: float | None = None
    if retry_after and retry_after.strip().isdigit():
        delay = float(retry_after.strip())
    if status == 404:
        return NotFoundError(status, text)
    if status == 409:
        return ConflictError(status, text)
    if status == 410:
        return GoneError(status, text)
    return ApiError(status, text, delay)
