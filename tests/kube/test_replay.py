"""The stand-in checked against the real thing (issue 27, item 4).

tests/kube/replay/corpus.json holds request sequences of what mcd's agent, its pool controller and
kubectl ask of an API server (Node reads and patches with resourceVersion preconditions, the Node
status, MachineConfig, MachineConfigPool and MachineConfigNode writes, Events and their namespace
rule, pods by spec.nodeName, budgets, eviction at the version discovery names, the Lease, list and
watch, discovery, the error answers), each as the identity that makes it: admin, the node's client
certificate, or a shipped ServiceAccount's token under the shipped RBAC. Each request goes to the
real kube-apiserver and to `mcd_sim.apiserver.ApiServer`, in the same order, and the two answers
are compared on what mcd reads of them (`project`). A difference fails the test unless ALLOWED
names it with its row in docs/sim-cluster.md ("Differences from kube-apiserver"); an allowed
difference that has gone away fails too, so the list stays true. Whatever the allow-list says,
the stand-in may never accept a request that the real server refuses.
"""

from __future__ import annotations

import functools
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.authn import node, service_account
from realcluster import Identity, RealCluster, Response

from mcd.kube.resources import eviction_version, served_version

pytestmark = pytest.mark.allow_commands

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "replay" / "corpus.json"
RECORDED = Path(__file__).resolve().parent / "replay" / "recorded.json"
MANIFESTS = (REPO / "manifests", REPO / "manifests" / "pool-controller")
DOC = REPO / "docs" / "sim-cluster.md"
DUMP = os.environ.get("MCD_REPLAY_DUMP")  # a file: every step's two projections, one JSON line each
NS = "openshift-machine-config-operator"
CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}

# "sequence/step" -> the title (bold text) of its row in docs/sim-cluster.md's
# "Differences from kube-apiserver" table, where the reason is written
ALLOWED: dict[str, str] = {
    "discovery/version": "Server version",
    "discovery/policy": "policy group versions",
    "events/event-invalid-name": "core/v1 Event names",
    "drain/serviceaccount": "ServiceAccounts",
}

Send = Callable[[str, str, Any, Identity, str], Response]


@dataclass
class Target:
    """One server under replay: how to send, as whom, and what its earlier answers said."""

    name: str
    send: Send
    identities: dict[str, Identity]
    actions: dict[str, Callable[[], object]] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    saved: dict[str, Any] = field(default_factory=dict)

    def fill(self, value: Any, seq: str) -> Any:
        if isinstance(value, str):

            def sub(m: re.Match[str]) -> str:
                key, ref = m.group(1), m.group(2)
                if key == "rv":
                    return str(self.saved[f"{seq}/{ref}"]["metadata"]["resourceVersion"])
                return self.values[key]

            return re.sub(r"\{(\w+)(?::([\w-]+))?\}", sub, value)
        if isinstance(value, list):
            return [self.fill(v, seq) for v in value]
        if isinstance(value, dict):
            return {self.fill(k, seq): self.fill(v, seq) for k, v in value.items()}
        return value


def https_send(url: str, ca: Path) -> Send:
    """A sender for any server: one HTTPS request as a client certificate or a bearer token."""

    def send(method: str, path: str, body: Any, who: Identity, content_type: str) -> Response:
        ctx = ssl.create_default_context(cafile=str(ca))
        if who.cert is not None and who.key is not None:
            ctx.load_cert_chain(str(who.cert), str(who.key))
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        if who.token:
            req.add_header("Authorization", f"Bearer {who.token}")
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=20) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as err:
            return Response(err.code, err.read())

    return send


def _manifest_docs() -> list[dict[str, Any]]:
    docs = []
    for folder in MANIFESTS:
        for path in sorted(folder.glob("*.yaml")):
            docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return docs


def real_target(cluster: RealCluster, node_name: str) -> Target:
    for folder in MANIFESTS:
        cluster.kubectl("apply", "-f", str(folder))
    crds = [d["metadata"]["name"] for d in _manifest_docs() if d.get("kind") == "CustomResourceDefinition"]
    names = [f"crd/{name}" for name in crds]
    cluster.kubectl("wait", "--for=condition=Established", *names, "--timeout=60s")
    identities = {
        "admin": cluster.admin,
        "node": cluster.node_identity(node_name),
        "daemon": Identity(token=cluster.token("machine-config-daemon", NS)),
        "controller": Identity(token=cluster.token("machine-config-controller", NS)),
    }
    actions: dict[str, Callable[[], object]] = {"forget-history": cluster.restart_apiserver}
    return Target("real", https_send(cluster.url, cluster.ca), identities, actions)


def sim_target(sim: ApiServer, node_name: str, tmp: Path) -> Target:
    assert sim.cert is not None
    ca = tmp / "sim-ca.crt"
    ca.write_bytes(sim.cert.cert_pem)
    cert, key = sim.issue_client_cert(node(node_name))
    (tmp / "node.crt").write_bytes(cert)
    (tmp / "node.key").write_bytes(key)
    sim.enforce_rbac(_manifest_docs())
    identities = {
        "admin": Identity(token=sim.token),
        "node": Identity(cert=tmp / "node.crt", key=tmp / "node.key"),
        "daemon": Identity(token=sim.add_token(service_account(NS, "machine-config-daemon"))),
        "controller": Identity(token=sim.add_token(service_account(NS, "machine-config-controller"))),
    }
    actions: dict[str, Callable[[], object]] = {"forget-history": sim.store.compact}
    return Target("stand-in", https_send(sim.url, ca), identities, actions)


def discover(target: Target) -> None:
    """The policy versions, found as mcd finds them (mcd.kube.resources)."""
    admin = target.identities["admin"]
    core = target.send("GET", "/api/v1", None, admin, "").json()
    policy = target.send("GET", "/apis/policy", None, admin, "").json()
    target.values["ev"] = eviction_version(core)
    target.values["pdb"] = served_version(policy, "v1", "v1beta1")


# -- what mcd reads of an answer ------------------------------------------------------------------


def _norm(value: Any, run: str) -> Any:
    if isinstance(value, str):
        return value.replace(run, "RUN")
    if isinstance(value, list):
        return [_norm(v, run) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v, run) for k, v in value.items()}
    return value


def _at(obj: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    details = obj.get("details") or {}
    causes = sorted((c.get("reason"), c.get("field")) for c in details.get("causes") or [])
    return {
        "status": obj.get("status"),
        "reason": obj.get("reason"),
        "code": obj.get("code"),
        "details": {"kind": details.get("kind"), "group": details.get("group"), "name": details.get("name")},
        "causes": [list(c) for c in causes],
    }


def _watch_events(body: bytes) -> list[dict[str, Any]]:
    events = []
    for line in body.decode().splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("type") == "BOOKMARK":
            continue  # timing: see the BOOKMARK row in docs/sim-cluster.md
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            events.append({"type": "ERROR", **_status(obj)})
        else:
            events.append(
                {"type": event.get("type"), "kind": obj.get("kind"), "name": _at(obj, ["metadata", "name"])}
            )
    return events


def project(step: dict[str, Any], resp: Response, run: str) -> dict[str, Any]:
    """The parts of an answer mcd reads, names normalised: the code, a Status's reason, code,
    details and causes, a list's resourceVersion and its items of this run, an object's kind,
    resourceVersion and the fields the step names, a watch's events, discovery's resources."""
    out: dict[str, Any] = {"code": resp.status}
    if step.get("watch"):
        out["events"] = _watch_events(resp.body)[:3]
        return dict(_norm(out, run))
    try:
        obj = resp.json()
    except ValueError:
        out["body"] = "not JSON"
        return out
    kind = obj.get("kind")
    out["kind"] = kind
    if kind == "Status":
        out.update(_status(obj))
    elif kind == "APIResourceList":
        wanted = set(step.get("resources", []))
        out["resources"] = sorted(r["name"] for r in obj.get("resources", []) if r["name"] in wanted)
    elif kind == "APIGroupList":
        wanted = set(step.get("groups", []))
        out["groups"] = sorted(g["name"] for g in obj.get("groups", []) if g["name"] in wanted)
    elif kind in ("APIGroup", "APIVersions"):
        out["versions"] = sorted(v["version"] if isinstance(v, dict) else v for v in obj.get("versions", []))
    elif isinstance(kind, str) and kind.endswith("List"):
        out["resourceVersion"] = bool(_at(obj, ["metadata", "resourceVersion"]))
        out["items"] = sorted(
            _at(i, ["metadata", "name"]) for i in obj.get("items") or [] if run in json.dumps(i)
        )
    elif kind is not None:
        out["name"] = _at(obj, ["metadata", "name"])
        out["resourceVersion"] = bool(_at(obj, ["metadata", "resourceVersion"]))
    for path in step.get("fields", []):
        out[".".join(path)] = _at(obj, path)
    return dict(_norm(out, run))


# -- the replay -----------------------------------------------------------------------------------


@dataclass
class Difference:
    key: str
    request: str
    real: dict[str, Any]
    sim: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.key}: {self.request}\n    real:     {self.real}\n    stand-in: {self.sim}"


def _step(target: Target, seq: str, key: str, step: dict[str, Any], run: str) -> dict[str, Any]:
    path = target.fill(step["path"], seq)
    body = target.fill(step.get("body"), seq)
    ctype = CONTENT_TYPES[step.get("type", "merge")] if step["method"] == "PATCH" else "application/json"
    resp = target.send(step["method"], path, body, target.identities[step["as"]], ctype)
    if step.get("save") and resp.status < 300:
        target.saved[key] = resp.json()
    return project(step, resp, run)


def replay(corpus: dict[str, Any], targets: list[Target], run: str) -> list[Difference]:
    differences = []
    for seq in corpus["sequences"]:
        for step in seq["steps"]:
            key = f"{seq['name']}/{step['id']}"
            if "action" in step:
                for target in targets:
                    target.actions[step["action"]]()
                continue
            # both servers at once (each still sees the corpus in order): a watch step holds
            # each for its timeoutSeconds
            with ThreadPoolExecutor(len(targets)) as pool:
                answers = list(
                    pool.map(functools.partial(_step, seq=seq["name"], key=key, step=step, run=run), targets)
                )
            if DUMP:
                with Path(DUMP).open("a") as out:
                    out.write(json.dumps({"step": key, "answers": answers}) + "\n")
            if step.get("compare", True) and answers[0] != answers[1]:
                request = f"{step['method']} {step['path']} as {step['as']}"
                differences.append(Difference(key, request, answers[0], answers[1]))
    return differences


def _doc_rows() -> str:
    text = DOC.read_text()
    start = text.find("## Differences from kube-apiserver")
    assert start >= 0, "docs/sim-cluster.md has no 'Differences from kube-apiserver' section"
    return text[start:]


def test_allow_list_names_documented_rows() -> None:
    rows = _doc_rows()
    for key, title in ALLOWED.items():
        assert f"**{title}**" in rows, f"{key}: no row **{title}** in docs/sim-cluster.md"


def test_corpus_steps_are_unique_and_known_identities() -> None:
    corpus = json.loads(CORPUS.read_text())
    steps = [(s["name"], st) for s in corpus["sequences"] for st in s["steps"]]
    keys = [f"{name}/{st['id']}" for name, st in steps]
    assert len(keys) == len(set(keys))
    assert {st["as"] for _, st in steps if "action" not in st} <= {"admin", "node", "daemon", "controller"}
    assert {st["action"] for _, st in steps if "action" in st} <= {"forget-history"}
    for key in ALLOWED:
        assert key in keys, f"ALLOWED names {key}, which is not in the corpus"


def request_kind(method: str, path: str) -> tuple[str, str, str]:
    """(verb, resource, subresource) of a request, as the audit log names them."""
    url = urllib.parse.urlsplit(path)
    parts = [p for p in url.path.split("/") if p]
    parts = parts[2:] if parts[0] == "api" else parts[3:]  # /api/v1 or /apis/GROUP/VERSION
    if len(parts) > 2 and parts[0] == "namespaces":
        parts = parts[2:]
    resource, name, sub = [*parts, "", "", ""][:3]
    query = urllib.parse.parse_qs(url.query)
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") == ["true"] else "list")
    else:
        verb = verbs[method]
    return verb, resource, sub


def test_corpus_covers_the_recorded_requests() -> None:
    """Every kind of request mcd's agents and pool controller made in a recorded fleet run is
    in the corpus, so the replay checks each against the real server."""
    corpus = json.loads(CORPUS.read_text())
    replayed = {
        request_kind(st["method"], st["path"])
        for s in corpus["sequences"]
        for st in s["steps"]
        if "action" not in st and st["path"].startswith("/api")
    }
    recorded = {tuple(r) for r in json.loads(RECORDED.read_text())["requests"]}
    assert recorded - replayed == set()


def test_replay_against_the_real_server_and_the_stand_in(cluster: RealCluster, tmp_path: Path) -> None:
    corpus = json.loads(CORPUS.read_text())
    run = uuid.uuid4().hex[:6]
    node_name = f"replay-{run}"
    real = real_target(cluster, node_name)
    with ApiServer() as sim:
        stand_in = sim_target(sim, node_name, tmp_path)
        for target in (real, stand_in):
            target.values.update(run=run, node=node_name)
            discover(target)
        differences = replay(corpus, [real, stand_in], run)

    # the stand-in never accepts what the real server refuses, allowed or not
    laxer = [d for d in differences if d.real["code"] >= 400 and d.sim["code"] < 400]
    unexplained = [d for d in differences if d.key not in ALLOWED]
    assert not laxer + unexplained, (
        f"kube-apiserver {cluster.url} and the stand-in differ; fix the stand-in or add a row to "
        "docs/sim-cluster.md and an ALLOWED entry (never for the stand-in accepting what kube-apiserver "
        "refuses):\n"
        + "\n".join(f"{'ACCEPTS WHAT REAL REFUSES ' if d in laxer else ''}{d}" for d in laxer + unexplained)
    )
    seen = {d.key for d in differences}
    gone = sorted(set(ALLOWED) - seen)
    assert not gone, f"allowed differences that no longer differ (remove them and their rows): {gone}"
