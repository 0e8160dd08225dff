"""The agent tests' cluster: `mcd_sim.apiserver` with the helpers the tests need (node history,
waits, the agent's requests from the audit log, faults), and the controller stand-in on demand."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from harness import NODE
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.audit import read_events
from mcd_sim.apiserver.authn import User, node, service_account
from mcd_sim.apiserver.store import WatchEvent
from mcd_sim.controller import ControllerStandIn

from mcd.node import annotations as ann

Obj = dict[str, Any]
AGENT_UA = "machine-config-daemon/"
SA_USER = service_account("openshift-machine-config-operator", "machine-config-daemon")
KUBELET_PEM = "/var/lib/kubelet/pki/kubelet-client-2026-01-01-00-00-00.pem"
KUBELET_CURRENT = "/var/lib/kubelet/pki/kubelet-client-current.pem"
# the node keys only the agent writes (the controller writes lastAppliedDrain and the cordon)
AGENT_KEYS = frozenset(
    {ann.STATE, ann.REASON, ann.CURRENT_CONFIG, ann.DESIRED_DRAIN, ann.POST_CONFIG_ACTION,
     ann.CURRENT_IMAGE, ann.DESIRED_IMAGE, "mcd/cordoned-for",
     ann.LAST_SYNCED_CONTROLLER_CONFIG, ann.LAST_OBSERVED_SERVER_CA, ann.FINALIZE_FAILURE,
     # copied from node-annotations.json at the first start
     "machineconfiguration.openshift.io/firstPivotConfig"}
)  # fmt: skip


@dataclass(frozen=True)
class Request:
    """One request from the audit log."""

    verb: str
    uri: str
    resource: str
    name: str
    code: int
    user_agent: str
    body: Any


def changed_keys(event: WatchEvent) -> set[str]:
    """The annotation keys (and `spec.unschedulable`) a node commit changed."""
    before = ((event.old or {}).get("metadata") or {}).get("annotations") or {}
    after = event.obj["metadata"].get("annotations") or {}
    keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    old_spec = (event.old or {}).get("spec") or {}
    if old_spec.get("unschedulable") != (event.obj.get("spec") or {}).get("unschedulable"):
        keys.add("spec.unschedulable")
    return keys


class Cluster:
    def __init__(self, tmp: Path, *, tls: bool = True) -> None:
        self.audit_path = tmp / "audit.log"
        self.sim = ApiServer(audit_log_path=self.audit_path, tls=tls).start()
        self.history: list[WatchEvent] = []  # every commit of a Node, in order
        self._test_writes: set[int] = set()  # resourceVersions of the test's own node writes
        self._namespaces: set[str] = set()
        self.sim.store.add_hook(self._record)
        self.controller: ControllerStandIn | None = None
        self._stop_dropping = threading.Event()
        self._dropper: threading.Thread | None = None

    def _record(self, event: WatchEvent) -> None:
        if event.obj.get("kind") == "Node":
            self.history.append(event)

    def stop(self) -> None:
        self.stop_dropping_watches()
        if self.controller is not None:
            self.controller.stop()
        self.sim.stop()

    def write_kubeconfig(self, path: Path) -> Path:
        return self.sim.write_kubeconfig(path)

    def write_user_kubeconfig(self, path: Path, user: User = SA_USER) -> Path:
        """A kubeconfig with a bearer token of `user` (the agent's ServiceAccount by default)."""
        doc = self.sim.kubeconfig(user={"token": self.sim.add_token(user)})
        path.write_text(yaml.safe_dump(doc))
        return path

    def install_kubelet_identity(self, root: Path, name: str = NODE) -> Path:
        """The kubelet's kubeconfig on the node at `root`, as OpenShift lays it out: a client
        certificate of system:node:NAME (cert and key in one file) behind the kubelet's
        `kubelet-client-current.pem` symlink, which is absolute (a host path)."""
        cert, key = self.sim.issue_client_cert(node(name))
        pem = root / KUBELET_PEM.lstrip("/")
        pem.parent.mkdir(parents=True, exist_ok=True)
        pem.write_bytes(cert + key)
        (root / KUBELET_CURRENT.lstrip("/")).symlink_to(KUBELET_PEM)
        user = {"client-certificate": KUBELET_CURRENT, "client-key": KUBELET_CURRENT}
        path = root / "var/lib/kubelet/kubeconfig"
        path.write_text(yaml.safe_dump(self.sim.kubeconfig(context="local", user=user)))
        return path

    def answer_drains(self) -> None:
        """Run the machine-config-controller stand-in (drain handshake, cordon, evictions)."""
        self.controller = ControllerStandIn(self.sim).start()

    # -- objects

    def add_node(self, name: str, annotations: dict[str, str] | None = None) -> Obj:
        self.sim.add_node(name)
        return self.patch_node(name, {"metadata": {"annotations": dict(annotations or {})}})

    def patch_node(self, name: str, patch: Obj) -> Obj:
        """A change by someone other than the agent (the test, an admin, the controller)."""
        node = self.sim.patch("Node", name, patch)
        self._test_writes.add(int(node["metadata"]["resourceVersion"]))
        return node

    def node(self, name: str = NODE) -> Obj:
        node = self.sim.get("Node", name)
        assert node is not None
        return node

    def annotations(self, name: str = NODE) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("annotations") or {})

    def add_mc(self, obj: Obj) -> None:
        self.sim.put(obj)

    def _namespace(self, ns: str) -> None:
        if ns not in self._namespaces and self.sim.get("Namespace", ns) is None:
            self.sim.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self._namespaces.add(ns)

    def add_pod(self, ns: str, name: str, node: str, **meta: Any) -> None:
        self._namespace(ns)
        spec = {
            "nodeName": node,
            "containers": [{"name": "c", "image": "x"}],
            "terminationGracePeriodSeconds": 0,
        }
        self.sim.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "name": name, **meta},
                      "spec": spec})  # fmt: skip

    def pods(self) -> list[tuple[str, str]]:
        return sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.sim.objects("Pod"))

    def add_pdb(self, ns: str, name: str, selector: Obj, min_available: int) -> None:
        self._namespace(ns)
        self.sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"namespace": ns, "name": name},
                      "spec": {"minAvailable": min_available, "selector": selector}})  # fmt: skip

    def set_pdb_min_available(self, ns: str, name: str, value: int) -> None:
        self.sim.patch("PodDisruptionBudget", name, {"spec": {"minAvailable": value}}, ns)

    # -- waiting

    def wait(self, pred: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        try:
            self.sim.wait_for(pred, timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    def wait_node(self, name: str, pred: Callable[[Obj], bool], timeout: float = 20.0) -> Obj:
        found: list[Obj] = []

        def check() -> bool:
            node = self.sim.get("Node", name)
            if node is not None and pred(node):
                found.append(node)
                return True
            return False

        try:
            self.sim.wait_for(check, timeout=timeout)
        except TimeoutError:
            raise AssertionError(
                f"timed out waiting on node {name}: {json.dumps(self.sim.get('Node', name))[:3000]}"
            ) from None
        return found[-1]

    def events(self) -> list[Obj]:
        return self.sim.events()

    def event_reasons(self) -> list[str]:
        """The reasons of the Events recorded, a repeat (an Event's `count`) as often as it was."""
        return [e["reason"] for e in self.events() for _ in range(int(e.get("count") or 1))]

    def event_messages(self, reason: str) -> list[str]:
        return [
            e["message"]
            for e in self.events()
            if e["reason"] == reason
            for _ in range(int(e.get("count") or 1))
        ]

    def wait_event(self, reason: str, count: int = 1, timeout: float = 20.0) -> None:
        self.wait(lambda: self.event_reasons().count(reason) >= count, f"{count} event(s) {reason}", timeout)

    # -- what happened to the node

    def annotation_values(self, key: str, name: str = NODE) -> list[str]:
        """The successive values an annotation took (repeats collapsed)."""
        out: list[str] = []
        for e in self.history:
            if e.obj["metadata"]["name"] != name:
                continue
            v = (e.obj["metadata"].get("annotations") or {}).get(key)
            if v is not None and (not out or out[-1] != v):
                out.append(v)
        return out

    def state_history(self, name: str = NODE) -> list[str]:
        return self.annotation_values(ann.STATE, name)

    def ever_cordoned(self, name: str = NODE) -> list[Obj]:
        return [
            e.obj
            for e in self.history
            if e.obj["metadata"]["name"] == name and e.obj.get("spec", {}).get("unschedulable")
        ]

    # -- the agent's requests

    def requests(self) -> list[Request]:
        """The agent's requests, from the server's audit log."""
        out = []
        for e in read_events(self.audit_path):
            if not e["userAgent"].startswith(AGENT_UA):
                continue
            ref = e.get("objectRef") or {}
            code = e["responseStatus"]["code"]
            resource, name = ref.get("resource", ""), ref.get("name", "")
            out.append(
                Request(
                    e["verb"], e["requestURI"], resource, name, code, e["userAgent"], e.get("requestObject")
                )
            )
        return out

    def node_writes(self, name: str = NODE) -> list[Request]:
        return [r for r in self.requests() if r.verb == "patch" and r.resource == "nodes" and r.name == name]

    def noop_node_writes(self, name: str = NODE) -> int:
        """The agent's successful node patches that changed nothing (the server commits none for them).

        The server writes a request's audit line after its answer, so the count waits (briefly)
        until the audit log has caught up with the commits.
        """

        def patches() -> int:
            return sum(1 for r in self.node_writes(name) if r.code == 200)

        def commits() -> int:
            return sum(
                1
                for e in self.history
                if e.obj["metadata"]["name"] == name
                and changed_keys(e) & AGENT_KEYS
                and e.rv not in self._test_writes
            )

        with contextlib.suppress(AssertionError):
            self.wait(lambda: patches() >= commits(), "the audit log", timeout=5)
        return patches() - commits()

    # -- faults

    def drop_watches(self) -> None:
        """End every watch as soon as it is open, until `stop_dropping_watches`."""
        self._stop_dropping.clear()

        def run() -> None:
            while not self._stop_dropping.wait(0.05):
                self.sim.faults.end_watches()

        self._dropper = threading.Thread(target=run, daemon=True)
        self._dropper.start()

    def stop_dropping_watches(self) -> None:
        self._stop_dropping.set()
        if self._dropper is not None:
            self._dropper.join(5)
            self._dropper = None
