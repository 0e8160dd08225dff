"""The shipped RBAC against what the agent asks of the API server, both ways, per identity.

The agent runs with the shipped DaemonSet's own arguments (its root and metrics address
pointed at the test's) against the stand-in API server with its audit log on and RBAC enforced
from the manifests' roles, as upstream's daemon runs: reading with its ServiceAccount's token,
writing its Node and posting Events with the kubelet's kubeconfig on the node (a client
certificate of system:node:NAME). It goes through its repertoire: the first start, a drift
report and its recovery, a node write that conflicts and is read again, an update that needs a
drain (the built-in drainer: the pods on the node and the budgets listed, a budget that blocks,
evictions once it allows, the evicted pod awaited), the simulated reboot and the boot path,
Events throughout. No request may be refused; each must come from the identity that upstream
makes it with; every request of the ServiceAccount must be allowed by the manifests' roles, and
every verb those roles grant must have been used, but for the few listed in NOT_SEEN_HERE with
the reason. A second run without the kubelet's kubeconfig has the ServiceAccount write, with the
optional grant of manifests/without-kubelet-kubeconfig/.
"""

from __future__ import annotations

import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import NODE, Agent, config_a, done_on, in_state, make_root
from mcd_sim.apiserver.audit import read_events
from mcd_sim.apiserver.authn import service_account
from shipped import NAMESPACE, SERVICE_ACCOUNT, agent_container, expand, objects
from simcluster import AGENT_UA, SA_USER, Cluster
from wire import free_port

pytestmark = pytest.mark.allow_commands

Obj = dict[str, Any]
A_FILE = "etc/mcd-test/a.conf"

# Granted, and needed, but never requested by this run: (namespace of the binding or "*" for a
# cluster-wide one, API group, resource, verb) with the reason.
NOT_SEEN_HERE = {
    ("*", "security.openshift.io", "securitycontextconstraints", "use"):
        "OpenShift's admission checks it when it admits the privileged pod; the agent never asks",
    ("default", "", "events", "patch"):
        "the events role is one for both namespaces, as upstream's; a repeat patches its Event, and "
        "OSUpdateStaged (the one Event in `default`) is posted directly, never repeated through the recorder",
    ("openshift-machine-config-operator", "", "configmaps", "get"):
        "kubeconfig-data, read only at a kube-apiserver CA rotation (tests/unit/test_ca_rotation.py); "
        "no ControllerConfig here flags one",
    ("default", "", "events", "create"):
        "OSUpdateStaged, posted in `default` only after an OS update on a CoreOS root "
        "(tests/unit/test_os_events.py); the agent here runs on a sandbox root",
    (NAMESPACE, "", "events", "create"):
        "upstream's grant: the kubelet's identity posts the Events on a node that has its kubeconfig; "
        "the account posts them itself on one that has not (the run without it)",
    (NAMESPACE, "", "events", "patch"):
        "as for create: a repeated Event is patched by whoever posts the Events",
}  # fmt: skip
# what the node writer (the kubelet's identity) sends: its Node's annotations and cordon, Events,
# the built-in drainer's evictions (NodeRestriction: only of the pods bound to its node)
NODE_WRITES = {("patch", "", "nodes"), ("create", "", "events"), ("patch", "", "events"),
               ("create", "", "pods/eviction")}  # fmt: skip
NODE_USER = f"system:node:{NODE}"


@dataclass(frozen=True)
class Grant:
    scope: str  # a namespace, or "*" for a ClusterRoleBinding
    group: str
    resource: str
    verb: str
    names: tuple[str, ...]  # resourceNames; empty: any


@dataclass(frozen=True)
class Call:
    user: str
    code: int
    verb: str
    group: str
    resource: str  # with "/subresource"
    namespace: str
    name: str
    uri: str


# API discovery (the drain asks which policy version serves evictions, as kubectl drain does)
DISCOVERY = re.compile(r"^/(api|apis)(/[^/?]+){0,2}/?(\?.*)?$")


def _grants(
    *, without_kubelet_kubeconfig: bool = False, objs: list[Obj] | None = None, account: str = SERVICE_ACCOUNT
) -> list[Grant]:
    """What the manifests' bindings give the agent's ServiceAccount (or `account`, in `objs`)."""
    if objs is None:
        objs = objects(without_kubelet_kubeconfig=without_kubelet_kubeconfig)
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs
             if o["kind"] in ("ClusterRole", "Role")}  # fmt: skip
    out: list[Grant] = []
    for b in objs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account
                   and s.get("namespace") == NAMESPACE for s in b["subjects"]):  # fmt: skip
            continue
        scope = "*" if b["kind"] == "ClusterRoleBinding" else b["metadata"]["namespace"]
        ref = b["roleRef"]
        ns = "" if ref["kind"] == "ClusterRole" else b["metadata"]["namespace"]
        role = roles[(ref["kind"], ns, ref["name"])]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.append(Grant(scope, group, resource, verb, tuple(rule.get("resourceNames", []))))
    return out


def _allows(g: Grant, c: Call) -> bool:
    return (
        g.scope in ("*", c.namespace)
        and g.group in ("*", c.group)
        and g.resource in ("*", c.resource)
        and g.verb in ("*", c.verb)
        and (not g.names or c.name in g.names)
    )


def _calls(audit: Path, user_agent: str = AGENT_UA) -> Iterator[Call]:
    for e in read_events(audit):
        if not e["userAgent"].startswith(user_agent):
            continue
        ref = e.get("objectRef")
        if not ref and e["verb"] == "get" and DISCOVERY.match(e["requestURI"]):
            continue  # the bootstrap role system:discovery grants it to every authenticated user
        assert ref, f"a non-resource request, which no rule here grants: {e['verb']} {e['requestURI']}"
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        ns, name = ref.get("namespace", ""), ref.get("name", "")
        user, code = e["user"]["username"], e["responseStatus"]["code"]
        yield Call(user, code, e["verb"], ref.get("apiGroup", ""), resource, ns, name, e["requestURI"])


def _agent_args(root: Path, secure_port: int = 0) -> list[str]:
    """The DaemonSet's arguments after the kubelet's expansion, with the test's root and free
    ports (the serving certificate's files are absent here: self-signed)."""
    c = agent_container()
    assert c["command"] == ["mcd"] and c["args"][0] == "start"
    args = [expand(a, {"NODE_NAME": NODE}) for a in c["args"][1:]]
    for flag, value in (("--root-mount", str(root)), ("--metrics-url", "127.0.0.1:0"),
                        ("--secure-metrics-url", f"127.0.0.1:{secure_port}")):  # fmt: skip
        args[args.index(flag) + 1] = value
    return args


def _scrape(port: int, token: str) -> int:
    """A scrape of the TLS metrics endpoint: the agent reviews the token and the user's access."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # self-signed
    headers = {"Authorization": f"Bearer {token}"}
    req = urllib.request.Request(f"https://127.0.0.1:{port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _pods(cluster: Cluster) -> None:
    cluster.add_pod("shop", "web-1", NODE, labels={"app": "web"},
                    ownerReferences=[{"kind": "ReplicaSet", "name": "web", "controller": True}])  # fmt: skip
    cluster.add_pod("shop", "web-2", "worker-1", labels={"app": "web"})
    daemonset = [{"kind": "DaemonSet", "name": "logger", "controller": True}]
    cluster.add_pod("infra", "logger", NODE, ownerReferences=daemonset)
    # two healthy web pods, two required: the drain is blocked until the budget is lowered
    cluster.add_pdb("shop", "web-budget", {"matchLabels": {"app": "web"}}, min_available=2)


def _run_the_repertoire(cluster: Cluster, tmp_path: Path) -> None:
    a = config_a()
    b = dict(a, metadata={"name": "rendered-worker-b"})
    b["spec"] = dict(b["spec"], kernelArguments=["nosmt"])  # a reboot, hence a drain
    root = make_root(tmp_path, a)
    cluster.install_kubelet_identity(root)
    cluster.add_mc(a)
    cluster.add_mc(b)
    keys = {"current": "machineconfiguration.openshift.io/currentConfig",
            "desired": "machineconfiguration.openshift.io/desiredConfig",
            "state": "machineconfiguration.openshift.io/state"}  # fmt: skip
    cluster.add_node(NODE, {keys["current"]: "rendered-worker-a", keys["desired"]: "rendered-worker-a",
                            keys["state"]: "Done"})  # fmt: skip
    _pods(cluster)
    kubeconfig = cluster.write_user_kubeconfig(tmp_path / "kubeconfig")
    port = free_port()
    agent = Agent(root, kubeconfig, tmp_path / "agent.log", *_agent_args(root, port)).start()
    try:
        agent.wait_log("is in config rendered-worker-a: Done")
        cluster.wait_node(NODE, done_on("rendered-worker-a"))
        # a scraper Prometheus's grant (monitoring/, not applied here) does not cover: the
        # agent reviews its token and its access with the account's own rights, and refuses it
        assert _scrape(port, cluster.sim.add_token(service_account("monitoring", "prometheus-k8s"))) == 403
        # a hand edit: the drift monitor degrades the node; putting the file back recovers it
        cluster.wait_event("ConfigDriftMonitorStarted")
        path = root / A_FILE
        good = path.read_text()
        path.write_text("hand edit\n")
        cluster.wait_node(NODE, in_state("Degraded"))
        path.write_text(good)
        cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=10)
        # the next node write conflicts: the agent reads its node again and recomputes
        conflict = cluster.sim.faults.conflict(times=1, resource="nodes", verb="patch")
        cluster.patch_node(NODE, {"metadata": {"annotations": {keys["desired"]: "rendered-worker-b"}}})
        cluster.wait_event("DrainBlockedByPodDisruptionBudget")
        cluster.set_pdb_min_available("shop", "web-budget", 1)
        cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
        assert conflict.times == 0, "the injected conflict never fired"
        agent.wait_log("is in config rendered-worker-b: Done")
    finally:
        agent.stop()


def _refused(calls: list[Call]) -> list[str]:
    return sorted({f"{c.user} {c.verb} {c.uri}: {c.code}" for c in calls if c.code in (401, 403)})


def test_the_shipped_roles_grant_exactly_what_the_agent_asks(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.sim.enforce_rbac(objects())
    try:
        _run_the_repertoire(cluster, tmp_path)
        reasons = set(cluster.event_reasons())
    finally:
        cluster.stop()
    # the run went through the repertoire it stands for
    seen = {"DrainBlockedByPodDisruptionBudget", "Drain", "Reboot", "ConfigDriftDetected", "NodeDone"}
    assert seen <= reasons

    calls = list(_calls(cluster.audit_path))
    assert _refused(calls) == [], "requests the API server refused"
    # each request from the identity upstream makes it with
    wrong = sorted({f"{c.user} {c.verb} {c.uri}" for c in calls
                    if (c.user == NODE_USER) != ((c.verb, c.group, c.resource) in NODE_WRITES)
                    or c.user not in (NODE_USER, SA_USER.name)})  # fmt: skip
    assert wrong == [], "requests made with the wrong identity"
    assert {c.name for c in calls if c.user == NODE_USER and c.resource == "nodes"} == {NODE}
    # evictions go out as the kubelet (whom NodeRestriction limits to its node's pods), never
    # as the ServiceAccount shared by every node's agent
    evicted = {(c.user, c.namespace, c.name) for c in calls if c.resource == "pods/eviction"}
    assert {(user, name) for user, _, name in evicted} == {(NODE_USER, "web-1")}

    grants = _grants()
    mine = [c for c in calls if c.user == SA_USER.name]
    denied = sorted({f"{c.verb} {c.uri}" for c in mine if not any(_allows(g, c) for g in grants)})
    assert denied == [], "requests the shipped roles do not allow"
    unused = sorted(
        {(g.scope, g.group, g.resource, g.verb) for g in grants if not any(_allows(g, c) for c in mine)}
        - set(NOT_SEEN_HERE)
    )
    assert unused == [], "granted but never requested"
    # the exceptions are still granted (an exception for a rule that is gone is stale)
    assert set(NOT_SEEN_HERE) <= {(g.scope, g.group, g.resource, g.verb) for g in grants}


def test_without_a_kubelet_kubeconfig_the_account_writes_with_the_optional_grant(tmp_path: Path) -> None:
    """The fallback: no /var/lib/kubelet/kubeconfig on the node, so the ServiceAccount writes the
    node and posts the Events; the shipped roles plus without-kubelet-kubeconfig/ allow it."""
    cluster = Cluster(tmp_path)
    cluster.sim.enforce_rbac(objects(without_kubelet_kubeconfig=True))
    try:
        root = make_root(tmp_path, config_a())
        cluster.add_mc(config_a())
        prefix = "machineconfiguration.openshift.io"
        cluster.add_node(NODE, {f"{prefix}/currentConfig": "rendered-worker-a",
                                f"{prefix}/desiredConfig": "rendered-worker-a"})  # fmt: skip
        kubeconfig = cluster.write_user_kubeconfig(tmp_path / "kubeconfig")
        agent = Agent(root, kubeconfig, tmp_path / "agent.log", *_agent_args(root)).start()
        try:
            cluster.wait_node(NODE, done_on("rendered-worker-a"))
            cluster.wait_event("ConfigDriftMonitorStarted")
        finally:
            agent.stop()
    finally:
        cluster.stop()
    calls = list(_calls(cluster.audit_path))
    assert _refused(calls) == []
    assert {c.user for c in calls} == {SA_USER.name}
    writes = {(c.verb, c.group, c.resource) for c in calls} & NODE_WRITES
    assert {("patch", "", "nodes"), ("create", "", "events")} <= writes
    grants = _grants(without_kubelet_kubeconfig=True)
    assert [c.uri for c in calls if not any(_allows(g, c) for g in grants)] == []
    assert "no kubelet kubeconfig /var/lib/kubelet/kubeconfig" in agent.log
