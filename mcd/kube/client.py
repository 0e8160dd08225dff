"""The daemon's Kubernetes API client: the only module that imports `kubernetes`.

The official package supplies the configuration (in-cluster service account, or a kubeconfig)
and the authenticated connection pool; requests are sent as plain JSON and answers are read as
dicts, so a Node costs one `json.loads` and never a model deserialisation, and a watch is a
line-by-line stream the daemon controls (resume from the last resourceVersion, list again on
410). urllib3's own retries are off: a retried PATCH or POST could be applied twice, and the
daemon loop retries with backoff anyway.

Every failure surfaces as `mcd.kube.errors.ApiError` (NotFound, Conflict, Gone); transport errors
are `ApiError(0, …)`. Every answer also goes to `reach` (`mcd.kube.reach.ApiReach`), which
logs an outage (unreachable, 401, 5xx; a 403 per request) once, with what to check, and its end once.

Two identities, as upstream's daemon has them (`mcd.kube.identity` says where each comes
from): the reader (the pod's ServiceAccount, or `--kubeconfig`) makes every request but the node
writes and the Events, which go out with the node writer's credentials (the kubelet's kubeconfig
when the node has one, else the reader's).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from mcd import __version__
from mcd.config.findings import InputError
from mcd.host.root import HostRoot
from mcd.kube.bare import register_bare
from mcd.kube.errors import ApiError, GoneError
from mcd.kube.identity import (
    API_ENDPOINT_KUBECONFIG,
    KUBELET_KUBECONFIG,
    Endpoint,
    api_endpoint,
    direct_settings,
    node_writer_kubeconfig,
)
from mcd.kube.reach import NODE_WRITER_HINTS, SERVICE_ACCOUNT_HINTS, ApiReach, Hints, kubeconfig_hints
from mcd.kube.resources import COLLECTIONS, Obj, Resources
from mcd.kube.wire import api_error, lines, watch_event

LOG = logging.getLogger(__name__)

USER_AGENT = f"machine-config-daemon/mcd-{__version__}"
# the pool controller's requests say who made them (its RBAC is checked against them apart)
CONTROLLER_USER_AGENT = f"machine-config-controller/mcd-{__version__}"
# a name no object can have (not a DNS subdomain): a list by it answers only the collection's
# resourceVersion, which kube-apiserver reads as one key, so a watch starts from "now" for free
NO_OBJECT = "-"

# (connect, read) seconds for one request; a watch reads for its own timeout plus this margin
REQUEST_TIMEOUT = (5.0, 30.0)
# the pod's ServiceAccount credentials (the kubelet mounts them here)
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
WATCH_MARGIN = 15.0
# seconds a bearer token taken from the configuration is used before it is asked for again
# (`_Session.bearer`); the in-cluster loader itself reads a rotated token once a minute
BEARER_REFRESH_SECONDS = 10.0

# `import kubernetes` imports all of the client (pydantic, requests, oauthlib, websocket ...); the
# agent needs the configuration, the in-cluster loader and the REST layer, so the packages are
# registered bare (`mcd.kube.bare`; about 18 MB less memory) and the kubeconfig loader is
# imported when a kubeconfig is read. Names come from the modules themselves: `from
# kubernetes.config import x` would ask the bare package for `x`, which completes it.
for _package in ("kubernetes", "kubernetes.config", "kubernetes.utils"):
    register_bare(_package)
from kubernetes.client.configuration import Configuration  # noqa: E402 (after the registration)
from kubernetes.client.rest import RESTClientObject  # noqa: E402
from kubernetes.config.config_exception import ConfigException  # noqa: E402
from kubernetes.config.incluster_config import InClusterConfigLoader  # noqa: E402


class KubeClient(Resources):
    """Plain-JSON requests to one API server, as two identities: the reader and the node writer
    (the requests per resource are `Resources`' methods)."""

    def __init__(
        self,
        configuration: Any,
        writer: Any = None,
        writer_source: str = "",
        *,
        user_agent: str = USER_AGENT,
        hints: Hints = SERVICE_ACCOUNT_HINTS,
    ) -> None:
        """`configuration`: the reader's; `writer`: the node writer's (None: the reader writes too),
        loaded from `writer_source`; `hints`: what the reader's 401 and 403 tell to check."""
        self.user_agent = user_agent
        self._api = _Session(configuration, user_agent)
        self.host = str(configuration.host)
        self.reach = ApiReach(self.host, hints=hints)
        self.writer_source = writer_source
        # the kubelet rotates its client certificate (a new file behind the same symlink): on a
        # 401 the writer's credentials are read again, once per refusal
        self._reload_writer: Callable[[], tuple[Any, Path] | None] | None = None
        if writer is None:
            self._writer, self.writer_reach = self._api, self.reach
        else:
            self._writer = _Session(writer, user_agent)
            self.writer_reach = ApiReach(str(writer.host), hints=NODE_WRITER_HINTS)

    @classmethod
    def connect(
        cls,
        kubeconfig: str,
        root: HostRoot,
        *,
        kubelet_kubeconfig: str = KUBELET_KUBECONFIG,
        api_endpoint_kubeconfig: str = API_ENDPOINT_KUBECONFIG,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
    ) -> KubeClient:
        """The agent's client, as upstream's daemon builds its two.

        The reader: `kubeconfig` (a path on this machine), else the pod's ServiceAccount talking to
        the server of the node's `api_endpoint_kubeconfig` (a node path; empty or absent: the
        `kubernetes` Service's address). The node writer: the node's `kubelet_kubeconfig` (a node
        path; empty or absent: the reader writes). Missing files are logged once at INFO; a file
        that is there but unusable raises InputError (naming it and the bad value).
        """
        endpoint = None
        if not kubeconfig:
            endpoint = api_endpoint(root, api_endpoint_kubeconfig)
            if endpoint is not None:
                LOG.info(
                    "overriding the API server address with %s (from %s)",
                    endpoint.server,
                    endpoint.source,
                )
            elif api_endpoint_kubeconfig:
                LOG.info(
                    "no %s under %s: the in-cluster client uses the kubernetes Service's address",
                    api_endpoint_kubeconfig,
                    root.prefix,
                )
        reader = _reader_configuration(kubeconfig, endpoint, service_account_dir)
        # a 403 names the account to check: the ServiceAccount's RBAC, or the kubeconfig's user's
        hints = kubeconfig_hints(kubeconfig) if kubeconfig else SERVICE_ACCOUNT_HINTS
        found = _writer_configuration(root, kubelet_kubeconfig)
        if found is None:
            who = f"--kubeconfig {kubeconfig}" if kubeconfig else "the service account"
            if kubelet_kubeconfig:
                LOG.info(
                    "no kubelet kubeconfig %s under %s: the node and its Events are written with %s's "
                    "credentials (which then need patch on nodes: manifests/without-kubelet-kubeconfig/)",
                    kubelet_kubeconfig,
                    root.prefix,
                    who,
                )
            else:
                LOG.info(
                    "no node writer kubeconfig: the node and its Events are written with %s's credentials",
                    who,
                )
            return cls(reader, hints=hints)
        writer, file = found
        LOG.info("node writer: the node and its Events are written with the credentials of %s", file)
        client = cls(reader, writer, str(file), hints=hints)
        client._reload_writer = lambda: _writer_configuration(root, kubelet_kubeconfig)
        return client

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str, user_agent: str = USER_AGENT) -> KubeClient:
        """One identity (the pool controller's): `kubeconfig`, else the pod's ServiceAccount."""
        configuration = _reader_configuration(kubeconfig, None, SERVICE_ACCOUNT_DIR)
        # the pool controller holds a watch per collection and per draining node besides its writes
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 64)
        return cls(configuration, user_agent=user_agent)

    def _writer_refused(self) -> None:
        """Read the node writer's kubeconfig again (its certificate may have been rotated); the
        next write, after the caller's backoff, uses what it names now."""
        if self._reload_writer is None:
            return
        try:
            found = self._reload_writer()
        except (InputError, ApiError) as exc:
            LOG.warning("cannot read the node writer's credentials again: %s", exc)
            return
        if found is not None:
            # the old pool is left to the garbage collector: another thread may be using it
            self._writer = _Session(found[0], self.user_agent)

    def close(self) -> None:
        if self._writer is not self._api:
            self._writer.close()
        self._api.close()

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
        writer: bool = False,
    ) -> Any:
        """The urllib3 response of one request (as the node writer with `writer`), unread;
        ApiError for transport errors."""
        api, reach = (self._writer, self.writer_reach) if writer else (self._api, self.reach)
        headers = {"Accept": "application/json", "User-Agent": api.user_agent}
        if body is not None:
            headers["Content-Type"] = content_type
        if (auth := api.bearer()) is not None:
            headers[auth[0]] = auth[1]
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]
        url = api.host + path + ("?" + urlencode(params, quote_via=quote) if params else "")
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        try:
            return api.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False,
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reach.answered(0, f"{method} {path}", str(exc))
            raise ApiError(0, f"{method} {path}: {exc}") from None

    def _request(self, method: str, path: str, *, writer: bool = False, **kwargs: Any) -> Obj:
        return self._request_text(method, path, writer=writer, **kwargs)[0]

    def _request_text(self, method: str, path: str, *, writer: bool = False, **kw: Any) -> tuple[Obj, bytes]:
        """The answer as a dict and as the JSON text it was decoded from."""
        resp = self._send(method, path, writer=writer, **kw)
        reach = self.writer_reach if writer else self.reach
        key = f"{method} {path}"
        try:
            data = resp.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reach.answered(0, key, str(exc))
            raise ApiError(0, f"{method} {path}: {exc}") from None
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            err = api_error(method, path, resp.status, data, resp.headers.get("Retry-After"))
            reach.answered(resp.status, key, str(err))
            if resp.status == 401:
                (self._writer if writer else self._api).bearer_refused()
                if writer:
                    self._writer_refused()
            raise err
        reach.answered(resp.status, key, "")
        try:
            obj = json.loads(data) if data else {}
        except ValueError as exc:
            raise ApiError(0, f"{method} {path}: unreadable answer: {exc}") from None
        if not isinstance(obj, dict):
            raise ApiError(0, f"{method} {path}: answer is not a JSON object")
        return obj, data

    # -- reviews: the metrics endpoint asks who a scraper is and what it may do (as the kubelet)

    def review_token(self, token: str) -> Obj:
        """A TokenReview of `token` (its `status`: authenticated, user); the token goes only in
        the request body, never in a message."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        return self._request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body)

    def review_access(self, spec: Obj) -> Obj:
        """A SubjectAccessReview of `spec` (user, groups, resourceAttributes); `status.allowed`."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return self._request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)

    # -- lists and watches: the Node and the ControllerConfig by name, the MachineConfigs whole

    def list_named(self, resource: str, name: str) -> tuple[Obj | None, str]:
        """The object `name` of `resource` (a key of COLLECTIONS; None when there is none) and
        the list's resourceVersion to watch from. NO_OBJECT lists nothing: only that version."""
        obj = self._request("GET", COLLECTIONS[resource], query={"fieldSelector": f"metadata.name={name}"})
        items = obj.get("items") or []
        return (items[0] if items else None), str((obj.get("metadata") or {}).get("resourceVersion", ""))

    def watch(
        self, resource: str, resource_version: str, timeout_seconds: int, *, name: str = "",
        field_selector: str = "",
    ) -> Iterator[tuple[str, Obj, bytes | None]]:
        """(type, object, its JSON text when it could be cut out of the event) of `resource` (only
        the object `name`, when given) from `resource_version` on, until the server ends the watch.

        GoneError when that version is too old (list again); ApiError when the stream breaks.
        Bookmarks are yielded too: they only carry a newer resourceVersion.
        """
        path, what = COLLECTIONS[resource], f"{resource} {name}".rstrip()
        query: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        if name or field_selector:
            query["fieldSelector"] = f"metadata.name={name}" if name else field_selector
        timeout = (REQUEST_TIMEOUT[0], timeout_seconds + WATCH_MARGIN)
        resp = self._send("GET", path, query=query, timeout=timeout)
        key = f"GET {path.rsplit('/', 1)[-1]} (watch)"
        streaming = False
        try:
            if resp.status == 410:
                self.reach.answered(410, key, "")
                raise GoneError(410, f"watch of {what}: resourceVersion {resource_version} is gone")
            if not 200 <= resp.status < 300:
                err = api_error("GET", path, resp.status, resp.data, resp.headers.get("Retry-After"))
                self.reach.answered(resp.status, key, str(err))
                if resp.status == 401:
                    self._api.bearer_refused()
                raise err
            self.reach.answered(resp.status, key, "")
            self.reach.stream(True)
            streaming = True
            for line in lines(resp):
                try:
                    # in a list, handed over by pop: this frame keeps no megabyte event while it waits
                    event = [watch_event(line)]
                except ValueError:
                    raise ApiError(0, f"watch of {what}: unreadable event") from None
                del line
                if event[0][0] == "ERROR":
                    obj = event[0][1]
                    if (code := int(obj.get("code", 0) or 0)) == 410:
                        raise GoneError(410, f"watch of {what}: {obj.get('message', 'gone')}")
                    raise ApiError(code, f"watch of {what}: {obj.get('message', 'error event')}")
                yield event.pop()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # a stream cut is not an outage (proxies end idle streams); the next request tells
            raise ApiError(0, f"watch of {what} broken: {exc}") from None
        finally:
            if streaming:
                self.reach.stream(False)
            resp.release_conn()


class _Session:
    """One identity: its configuration and the official REST layer's connection pool (which
    carries the configuration's TLS settings: CA, client certificate, server name, proxy)."""

    def __init__(
        self, configuration: Any, user_agent: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        configuration.retries = False  # see the module docstring
        self.configuration, self.user_agent = configuration, user_agent
        self.host = str(configuration.host)
        self.pool_manager = RESTClientObject(configuration).pool_manager
        self._clock = clock
        self._bearer: tuple[str, str] | None = None
        self._bearer_at: float | None = None  # when the configuration was last asked

    def bearer(self) -> tuple[str, str] | None:
        """The bearer token's header (name, value) as the configuration gives it (None: none),
        asked again every BEARER_REFRESH_SECONDS and after a 401.

        Asking runs the configuration's refresh hook (the in-cluster loader's, which re-reads a
        rotated service account token once a minute; a kubeconfig's exec plugin): on the way it
        sets the server address again, whose setter scans the whole environment for proxies (a
        pod has variables for every Service of its namespace), a few hundred microseconds that
        every request paid.
        """
        now = self._clock()
        if self._bearer_at is None or now - self._bearer_at >= BEARER_REFRESH_SECONDS:
            auth = self.configuration.auth_settings().get("BearerToken")
            self._bearer = (auth["key"], auth["value"]) if auth and auth.get("value") else None
            self._bearer_at = now
        return self._bearer

    def bearer_refused(self) -> None:
        """The server answered 401: the next request asks the configuration for the token again."""
        self._bearer_at = None

    def close(self) -> None:
        self.pool_manager.clear()


def _kube_config() -> Any:
    """The kubeconfig loader, imported on first use (requests, oauthlib, the pydantic ApiClient)."""
    return importlib.import_module("kubernetes.config.kube_config")


def _writer_configuration(root: HostRoot, kubelet_kubeconfig: str) -> tuple[Any, Path] | None:
    """The node writer's configuration from the node's kubelet kubeconfig, with its file; None
    when there is none."""
    found = node_writer_kubeconfig(root, kubelet_kubeconfig)
    if found is None:
        return None
    doc, file = found
    configuration = Configuration()
    try:
        if (settings := direct_settings(doc)) is not None:  # the common case, without the loader
            for key, value in settings.items():
                setattr(configuration, key, value)
        else:
            _kube_config().load_kube_config_from_dict(doc, client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise ApiError(0, f"cannot load the node writer's credentials from {file}: {exc}") from None
    return configuration, file


def _reader_configuration(kubeconfig: str, endpoint: Endpoint | None, service_account_dir: str) -> Any:
    """The reader's configuration: `kubeconfig`, else the pod's service account (its server
    `endpoint` when given: upstream overrides KUBERNETES_SERVICE_HOST/PORT the same way)."""
    configuration = Configuration()
    try:
        if kubeconfig:
            _kube_config().load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            environ = dict(os.environ)
            if endpoint is not None:
                environ.update(KUBERNETES_SERVICE_HOST=endpoint.host, KUBERNETES_SERVICE_PORT=endpoint.port)
            InClusterConfigLoader(  # type: ignore[no-untyped-call]
                token_filename=f"{service_account_dir}/token",
                cert_filename=f"{service_account_dir}/ca.crt",
                environ=environ,
            ).load_and_set(configuration)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = kubeconfig or "the in-cluster service account"
        raise ApiError(0, f"cannot load API credentials from {where}: {exc}") from None
    return configuration
