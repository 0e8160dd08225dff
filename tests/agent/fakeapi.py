"""A small in-process Kubernetes API for the agent tests: Nodes (get, list, watch, merge patch with
resourceVersion preconditions), MachineConfigs, the MachineConfiguration, Events, Pods with
evictions and PodDisruptionBudgets. It records every request (the audit log) and can inject
faults (500s, connection resets, dropped watches, 410 on resume).

Stand-in until `mcd sim-cluster` is merged; only what the daemon uses is implemented.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "test-token"
MC_PREFIX = "/apis/machineconfiguration.openshift.io/v1/machineconfigs/"
MCFG_PREFIX = "/apis/operator.openshift.io/v1/machineconfigurations/"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class Faults:
    """Faults for the next requests: each counter is consumed by one matching request."""

    errors_500: int = 0
    resets: int = 0
    drop_watches: bool = False  # end every watch stream at once (after its first event, if any)
    gone_on_resume: int = 0
    only_paths: tuple[str, ...] = ()  # empty: any path

    def applies(self, path: str) -> bool:
        return not self.only_paths or any(path.startswith(p) for p in self.only_paths)


@dataclass
class Audit:
    method: str
    path: str
    query: str
    status: int
    body: Any = None
    user_agent: str = ""


@dataclass
class State:
    rv: int = 1
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    mcs: dict[str, dict[str, Any]] = field(default_factory=dict)
    mcfg: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # (rv, type, node)


class FakeApi:
    def __init__(self) -> None:
        self.state = State()
        self.lock = threading.Condition()
        self.faults = Faults()
        self.audit: list[Audit] = []
        self.noop_patches: list[Any] = []  # PATCHes of a node that changed nothing
        self.on_node_change: list[Callable[[dict[str, Any]], None]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.closing = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.closing = True
        with self.lock:
            self.lock.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Path) -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "mcd", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "mcd"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(cfg))
        return path

    # -- objects

    def _bump(self, obj: dict[str, Any]) -> None:
        self.state.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.state.rv)

    def add_node(self, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        with self.lock:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}", "annotations": dict(annotations or {})},
                "spec": {},
            }
            self._store_node(node, "ADDED")
            return copy.deepcopy(node)

    def _store_node(self, node: dict[str, Any], etype: str) -> None:
        self._bump(node)
        self.state.nodes[node["metadata"]["name"]] = node
        self.state.history.append((self.state.rv, etype, copy.deepcopy(node)))
        self.lock.notify_all()
        for cb in self.on_node_change:
            cb(copy.deepcopy(node))

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A change by someone else (the controller, a test, kubectl)."""
        with self.lock:
            node = merge_patch(self.state.nodes[name], patch)
            self._store_node(node, "MODIFIED")
            return copy.deepcopy(node)

    def node(self, name: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.state.nodes[name])

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("annotations") or {})

    def add_mc(self, obj: dict[str, Any]) -> None:
        with self.lock:
            obj = copy.deepcopy(obj)
            self._bump(obj)
            self.state.mcs[obj["metadata"]["name"]] = obj

    def add_pod(self, ns: str, name: str, node: str, **meta: Any) -> None:
        with self.lock:
            pod = {"metadata": {"namespace": ns, "name": name, "uid": f"uid-{ns}-{name}", **meta}}
            pod["spec"] = {"nodeName": node}
            self._bump(pod)
            self.state.pods[(ns, name)] = pod

    def wait_node(
        self, name: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 20.0
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                node = self.state.nodes.get(name)
                if node is not None and pred(node):
                    return copy.deepcopy(node)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting on node {name}: {json.dumps(node)[:2000]}")
                self.lock.wait(left)

    def wait(self, pred: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        with self.lock:
            if not self.lock.wait_for(pred, timeout):
                raise AssertionError(f"timed out waiting for {what}")

    def wait_event(self, reason: str, count: int = 1, timeout: float = 20.0) -> None:
        self.wait(lambda: self.event_reasons().count(reason) >= count, f"{count} event(s) {reason}", timeout)

    def node_writes(self, name: str) -> list[Audit]:
        return [a for a in self.audit if a.method == "PATCH" and a.path.startswith(f"/api/v1/nodes/{name}")]

    def state_history(self, name: str) -> list[str]:
        """The sequence of distinct `state` annotation values the node went through."""
        out: list[str] = []
        with self.lock:
            for _, _, node in self.state.history:
                if node["metadata"]["name"] != name:
                    continue
                st = (node["metadata"].get("annotations") or {}).get(
                    "machineconfiguration.openshift.io/state", ""
                )
                if not out or out[-1] != st:
                    out.append(st)
        return out

    def event_reasons(self) -> list[str]:
        with self.lock:
            return [e["reason"] for e in self.state.events]


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, obj: Any) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self._audit(status)

        def _audit(self, status: int) -> None:
            parts = urlsplit(self.path)
            api.audit.append(
                Audit(
                    self.command,
                    parts.path,
                    parts.query,
                    status,
                    self._body,
                    self.headers.get("User-Agent", ""),
                )
            )

        def _status(self, code: int, message: str) -> None:
            self._reply(code, {"kind": "Status", "code": code, "message": message})

        def _read(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n) if n else b""
            return json.loads(data) if data else None

        def _fault(self, path: str) -> bool:
            f = api.faults
            if not f.applies(path):
                return False
            if f.resets > 0:
                f.resets -= 1
                self._audit(0)
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                self.connection.close()
                self.close_connection = True
                return True
            if f.errors_500 > 0:
                f.errors_500 -= 1
                self._status(500, "injected failure")
                return True
            return False

        def handle_one_request(self) -> None:
            try:
                super().handle_one_request()
            except (ConnectionError, OSError):
                self.close_connection = True

        def _dispatch(self) -> None:
            self._body = self._read() if self.command in ("PATCH", "POST", "PUT") else None
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._status(401, "Unauthorized")
                return
            parts = urlsplit(self.path)
            path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
            if self._fault(path):
                return
            try:
                self._route(self.command, path, query)
            except KeyError as exc:
                self._status(404, f"not found: {exc}")

        do_GET = do_PATCH = do_POST = _dispatch

        def _route(self, method: str, path: str, query: dict[str, str]) -> None:
            s = api.state
            if path == "/api/v1/nodes" and method == "GET":
                name = query.get("fieldSelector", "").removeprefix("metadata.name=")
                if query.get("watch") == "true":
                    self._watch(
                        name, int(query.get("resourceVersion") or 0), int(query.get("timeoutSeconds", 30))
                    )
                    return
                with api.lock:
                    items = [copy.deepcopy(n) for k, n in s.nodes.items() if k == name]
                    self._reply(
                        200, {"kind": "NodeList", "items": items, "metadata": {"resourceVersion": str(s.rv)}}
                    )
                return
            if path.startswith("/api/v1/nodes/"):
                name = path.split("/")[4]
                with api.lock:
                    node = s.nodes[name]
                    if method == "GET":
                        self._reply(200, node)
                        return
                    patch = self._body or {}
                    want = (patch.get("metadata") or {}).get("resourceVersion")
                    if want and want != node["metadata"]["resourceVersion"]:
                        self._status(409, "the object has been modified")
                        return
                    new = merge_patch(node, patch)
                    if new == node:
                        api.noop_patches.append(patch)
                    api._store_node(new, "MODIFIED")
                    self._reply(200, new)
                return
            if path.startswith(MC_PREFIX):
                with api.lock:
                    self._reply(200, s.mcs[path[len(MC_PREFIX) :]])
                return
            if path.startswith(MCFG_PREFIX):
                with api.lock:
                    if s.mcfg is None:
                        raise KeyError("cluster")
                    self._reply(200, s.mcfg)
                return
            if path.endswith("/events") and method == "POST":
                with api.lock:
                    s.events.append(self._body)
                    api.lock.notify_all()
                self._reply(201, self._body)
                return
            if path == "/api/v1/pods":
                node = query.get("fieldSelector", "").removeprefix("spec.nodeName=")
                with api.lock:
                    items = [copy.deepcopy(p) for p in s.pods.values() if p["spec"]["nodeName"] == node]
                self._reply(200, {"items": items})
                return
            if path.startswith("/api/v1/namespaces/") and "/pods/" in path:
                segs = path.split("/")
                ns, name = segs[4], segs[6]
                with api.lock:
                    if path.endswith("/eviction"):
                        pod = s.pods[(ns, name)]
                        if _blocked(s.pdbs, pod):
                            self._status(
                                429, "Cannot evict pod as it would violate the pod's disruption budget."
                            )
                            return
                        del s.pods[(ns, name)]
                        self._reply(201, {"kind": "Status", "status": "Success"})
                        return
                    self._reply(200, s.pods[(ns, name)])
                return
            if path == "/apis/policy/v1/poddisruptionbudgets":
                with api.lock:
                    self._reply(200, {"items": copy.deepcopy(s.pdbs)})
                return
            raise KeyError(path)

        def _watch(self, name: str, rv: int, timeout: int) -> None:
            with api.lock:
                if api.faults.gone_on_resume > 0 and rv:
                    api.faults.gone_on_resume -= 1
                    self._status(410, "too old resource version")
                    return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._audit(200)
            deadline = time.monotonic() + timeout
            sent = rv
            try:
                while not api.closing and time.monotonic() < deadline:
                    with api.lock:
                        batch = [
                            (r, t, n)
                            for r, t, n in api.state.history
                            if r > sent and n["metadata"]["name"] == name
                        ]
                        if not batch:
                            if api.faults.drop_watches:
                                break
                            api.lock.wait(min(1.0, deadline - time.monotonic()))
                            continue
                    for r, t, n in batch:
                        line = json.dumps({"type": t, "object": n}).encode() + b"\n"
                        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                        sent = r
                    self.wfile.flush()
                    if api.faults.drop_watches:
                        break
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True

    return Handler


def _blocked(pdbs: list[dict[str, Any]], pod: dict[str, Any]) -> bool:
    for pdb in pdbs:
        if pdb["metadata"]["namespace"] != pod["metadata"]["namespace"]:
            continue
        labels = pod["metadata"].get("labels") or {}
        sel = pdb["spec"]["selector"].get("matchLabels") or {}
        if (
            all(labels.get(k) == v for k, v in sel.items())
            and pdb["status"].get("disruptionsAllowed", 0) <= 0
        ):
            return True
    return False
