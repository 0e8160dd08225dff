"""The daemon's Kubernetes API client: the only module that imports `kubernetes`.

The official package supplies the configuration (in-cluster service account, or a kubeconfig)
and the authenticated connection pool; requests are sent as plain JSON and answers are read as
dicts, so a Node costs one `json.loads` and never a model deserialisation, and a watch is a
line-by-line stream the daemon controls (resume from the last resourceVersion, list again on
410). urllib3's own retries are off: a retried PATCH or POST could be applied twice, and the
daemon loop retries with backoff anyway.

Every failure surfaces as `mcd.agent.errors.ApiError` (NotFound, Conflict, Gone); transport errors
are `ApiError(0, …)`. Every answer also goes to `reach` (`mcd.agent.health.ApiReach`), which
logs an outage (unreachable, 401, 5xx; a 403 per request) once, with what to check, and its end once.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from mcd import __version__
from mcd.agent.errors import ApiError, ConflictError, GoneError, NotFoundError
from mcd.agent.health import ApiReach

LOG = logging.getLogger(__name__)

USER_AGENT = f"machine-config-daemon/mcd-{__version__}"
MCO_GROUP = "machineconfiguration.openshift.io"
MC_PATH = f"/apis/{MCO_GROUP}/v1/machineconfigs"
CONTROLLERCONFIG_PATH = f"/apis/{MCO_GROUP}/v1/controllerconfigs"
MACHINECONFIGURATION_PATH = "/apis/operator.openshift.io/v1/machineconfigurations"
MCN_PATH = f"/apis/{MCO_GROUP}/v1/machineconfignodes"
MERGE_PATCH = "application/merge-patch+json"

# (connect, read) seconds for one request; a watch reads for its own timeout plus this margin
REQUEST_TIMEOUT = (5.0, 30.0)
WATCH_MARGIN = 15.0

Obj = dict[str, Any]

# Importing any part of `kubernetes` runs the package's `__init__`, which imports all of it: the
# dynamic client, streams (websocket), informers, the YAML utilities, the kubeconfig loader
# (requests, oauthlib) and through it the pydantic ApiClient. The daemon needs the
# configuration, the in-cluster loader and the REST layer (about 20 MB less resident memory,
# in-cluster). These packages are registered without running their `__init__`; the first use
# of a name only it defines runs it then, so a full `import kubernetes` elsewhere still works.
_BARE_PACKAGES = ("kubernetes", "kubernetes.config", "kubernetes.utils")
_COMPLETING = threading.Lock()


def _register_bare(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return  # not installed: the imports below say so
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(attr: str) -> object:
        with _COMPLETING:
            if module.__dict__.get("__getattr__") is complete:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = complete
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as the import system does for a submodule


for _name in _BARE_PACKAGES:
    _register_bare(_name)

# names from the modules themselves, never `from kubernetes.config import incluster_config`:
# that asks the bare package for the name, which completes it
from kubernetes.client.configuration import Configuration  # noqa: E402 (after the registration)
from kubernetes.client.rest import RESTClientObject  # noqa: E402
from kubernetes.config.config_exception import ConfigException  # noqa: E402
from kubernetes.config.incluster_config import load_incluster_config  # noqa: E402


def _path(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


class KubeClient:
    """Plain-JSON requests to one API server with the credentials of a kubeconfig or the pod."""

    def __init__(self, configuration: Any) -> None:
        configuration.retries = False
        self._configuration = configuration
        # the official REST layer: its connection pool carries the configuration's TLS settings
        self._rest = RESTClientObject(configuration)
        self.host = str(configuration.host)
        self.reach = ApiReach(self.host)

    @classmethod
    def from_kubeconfig(cls, path: str | None) -> KubeClient:
        """A client from `path`, or from the pod's service account when `path` is empty."""
        configuration = Configuration()
        try:
            if path:
                # imported only here: the kubeconfig loader brings requests, oauthlib, the ApiClient
                kube_config = importlib.import_module("kubernetes.config.kube_config")
                kube_config.load_kube_config(config_file=path, client_configuration=configuration)
            else:
                load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError, ValueError, TypeError) as exc:
            where = path or "the in-cluster service account"
            raise ApiError(0, f"cannot load API credentials from {where}: {exc}") from None
        return cls(configuration)

    def close(self) -> None:
        self._rest.close()

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
    ) -> Any:
        """The urllib3 response of one request, unread; ApiError for transport errors."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = content_type
        # the bearer token as the configuration gives it now (a rotated service account token
        # or an exec plugin's is refreshed by its hook), as the ApiClient would add it
        auth = self._configuration.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]
        url = self.host + path + ("?" + urlencode(params, quote_via=quote) if params else "")
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        try:
            return self._rest.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False,
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.reach.answered(0, f"{method} {path}", str(exc))
            raise ApiError(0, f"{method} {path}: {exc}") from None

    def _request(self, method: str, path: str, **kwargs: Any) -> Obj:
        return self._request_text(method, path, **kwargs)[0]

    def _request_text(self, method: str, path: str, **kwargs: Any) -> tuple[Obj, bytes]:
        """The answer as a dict and as the JSON text it was decoded from."""
        resp = self._send(method, path, **kwargs)
        key = f"{method} {path}"
        try:
            data = resp.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.reach.answered(0, key, str(exc))
            raise ApiError(0, f"{method} {path}: {exc}") from None
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            err = _api_error(method, path, resp.status, data, resp.headers.get("Retry-After"))
            self.reach.answered(resp.status, key, str(err))
            raise err
        self.reach.answered(resp.status, key, "")
        try:
            obj = json.loads(data) if data else {}
        except ValueError as exc:
            raise ApiError(0, f"{method} {path}: unreadable answer: {exc}") from None
        if not isinstance(obj, dict):
            raise ApiError(0, f"{method} {path}: answer is not a JSON object")
        return obj, data

    # -- nodes

    def get_node(self, name: str) -> Obj:
        return self._request("GET", f"/api/v1/nodes/{_path(name)}")

    def list_node(self, name: str) -> tuple[Obj | None, str]:
        """The node (None when it does not exist) and the list's resourceVersion to watch from."""
        obj = self._request("GET", "/api/v1/nodes", query={"fieldSelector": f"metadata.name={name}"})
        items = obj.get("items") or []
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        return (items[0] if items else None), rv

    def watch_node(self, name: str, resource_version: str, timeout_seconds: int) -> Iterator[tuple[str, Obj]]:
        """(type, object) events of this node from `resource_version` on, until the server ends the watch.

        GoneError when that version is too old (list again); ApiError when the stream breaks.
        Bookmarks are yielded too: they only carry a newer resourceVersion.
        """
        return self._watch("/api/v1/nodes", f"node {name}", name, resource_version, timeout_seconds)

    def _watch(
        self, path: str, what: str, name: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, Obj]]:
        """A watch of the one object `name` of the collection at `path` (by field selector)."""
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
        )
        key = f"GET {path.rsplit('/', 1)[-1]} (watch)"
        streaming = False
        try:
            if resp.status == 410:
                self.reach.answered(410, key, "")
                raise GoneError(410, f"watch of {what}: resourceVersion {resource_version} is gone")
            if not 200 <= resp.status < 300:
                err = _api_error("GET", path, resp.status, resp.data, resp.headers.get("Retry-After"))
                self.reach.answered(resp.status, key, str(err))
                raise err
            self.reach.answered(resp.status, key, "")
            self.reach.stream(True)
            streaming = True
            for line in _lines(resp):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise ApiError(0, f"watch of {what}: unreadable event") from None
                etype, obj = str(event.get("type", "")), event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code", 0) or 0)
                    if code == 410:
                        raise GoneError(410, f"watch of {what}: {obj.get('message', 'gone')}")
                    raise ApiError(code, f"watch of {what}: {obj.get('message', 'error event')}")
                yield etype, obj
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # a stream cut is not an outage (proxies end idle streams); the next request tells
            raise ApiError(0, f"watch of {what} broken: {exc}") from None
        finally:
            if streaming:
                self.reach.stream(False)
            resp.release_conn()

    def patch_node(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> Obj:
        """A JSON merge patch of the node (a resourceVersion in it is a precondition: 409 if stale)."""
        path = f"/api/v1/nodes/{_path(name)}" + ("/status" if status else "")
        return self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

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

    # -- the certificate writer's ControllerConfig (cluster-scoped; listed and watched by name)

    def list_controllerconfig(self, name: str) -> tuple[Obj | None, str]:
        """The ControllerConfig (None when it does not exist) and the list's resourceVersion."""
        obj = self._request("GET", CONTROLLERCONFIG_PATH, query={"fieldSelector": f"metadata.name={name}"})
        items = obj.get("items") or []
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        return (items[0] if items else None), rv

    def watch_controllerconfig(
        self, name: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, Obj]]:
        """As `watch_node`, for the ControllerConfig `name`."""
        return self._watch(
            CONTROLLERCONFIG_PATH, f"controllerconfig {name}", name, resource_version, timeout_seconds
        )

    # -- events

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self._request("POST", f"/api/v1/namespaces/{_path(namespace)}/events", body=event)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A repeated Event: its count and lastTimestamp (client-go's recorder patches them too)."""
        path = f"/api/v1/namespaces/{_path(namespace)}/events/{_path(name)}"
        self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    # -- drain

    def list_pods_on_node(self, node: str) -> list[Obj]:
        obj = self._request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
        return list(obj.get("items") or [])

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._request("GET", f"/api/v1/namespaces/{_path(namespace)}/pods/{_path(name)}")

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
        self._request("POST", path, body=body)

    def list_pdbs(self) -> list[Obj]:
        obj = self._request("GET", "/apis/policy/v1/poddisruptionbudgets")
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
