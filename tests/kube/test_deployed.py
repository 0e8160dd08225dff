"""mcd on the real API server as a user deploys it (issue 27, items 2 to 4): the shipped manifests
applied with kubectl, two agents as their DaemonSet runs them, two pool controller replicas as
their Deployment runs them, and a pool rollout through drains with a PodDisruptionBudget, across a
pool controller replica killed and an API server restart. The audit log then proves the shipped
RBAC both ways, every Event accepted, and eviction through policy/v1beta1."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import record_figure
from deployment import (
    AGENT_SA,
    CONTROLLER_SA,
    CRDS,
    CURRENT,
    DRAIN_FILE,
    MC_API,
    NAMESPACE,
    STATE,
    Kubelet,
    Processes,
    add_node,
    apply_manifests,
    deploy,
    done_on,
    lease_holder,
    machineconfig,
    node_annotations,
    pool_target,
    secure_port_file,
    start_agent,
    wait,
)
from realcluster import REPO, RealCluster, wait_for

pytestmark = pytest.mark.allow_commands

NODES = ["kube-a", "kube-b"]
# a node mcd never ran on, joined once the pool is Done
JOINER = "kube-join"
ROLLOUT_TIMEOUT = 150.0
AGENT_USER = f"system:serviceaccount:{NAMESPACE}:{AGENT_SA}"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{CONTROLLER_SA}"


@dataclass
class Rollout:
    old: str = ""
    new: str = ""
    started: float = 0.0  # time.time() once mcd's processes started (after the admin's set-up)
    killed_replica: str = ""
    survivor: str = ""
    held_pod: str = ""
    survivor_log: str = ""
    restart: tuple[float, float] = (0.0, 0.0)  # time.time() when the API server restart began, ended
    max_unavailable_seen: int = 0
    force_deleted: list[str] = field(default_factory=list)
    seconds: float = 0.0
    scrapes: dict[str, int] = field(default_factory=dict)
    joined_seconds: float = 0.0


@pytest.fixture(scope="module")
def rollout(cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rollout]:
    """The whole scenario, once; the tests below assert on what it did and on the audit log."""
    work = tmp_path_factory.mktemp("deployed")
    result = Rollout()
    procs = Processes(work)
    kubelet = Kubelet(cluster, "web", NODES, min_available=1)
    try:
        result.old, result.started = deploy(cluster, work, procs, kubelet, NODES)
        kubelet.start()

        # the change: a file whose node disruption policy is Drain; the first node's drain is held
        # (its evicted pod kept Terminating) until the faults below are done
        kubelet.hold.set()
        t0 = time.monotonic()
        cluster.kubectl(
            "apply", "-f", "-", stdin=json.dumps(machineconfig("50-worker-drain", DRAIN_FILE, "drained"))
        )
        wait("the pool rendered again", lambda: pool_target(cluster) not in ("", result.old), 60, procs)
        result.new = pool_target(cluster)

        def draining() -> bool:
            working = any(node_annotations(cluster, n).get(STATE) == "Working" for n in NODES)
            return working and bool(kubelet.terminating())

        wait("a node Working, its drain waiting on its evicted pod", draining, 60, procs)
        [result.held_pod] = kubelet.terminating()
        # mid-rollout, one node updating and the other waiting its turn: the leading pool
        # controller replica dies, the API server goes away and comes back, then etcd does;
        # the other replica takes the Lease over and moves the second node (it alone can)
        result.killed_replica = lease_holder(cluster)
        assert result.killed_replica in ("replica-1", "replica-2"), result.killed_replica
        procs.kill(f"controller-{result.killed_replica}")
        result.survivor = "replica-2" if result.killed_replica == "replica-1" else "replica-1"
        begin = time.time()
        cluster.restart_apiserver()
        cluster.restart_etcd()  # and etcd under it, on the same data dir
        result.restart = (begin, time.time())
        kubelet.hold.clear()  # the drain goes on: the pod is gone
        wait(
            f"{result.survivor} to take the Lease over",
            lambda: lease_holder(cluster) == result.survivor,
            60,
            procs,
        )
        wait(
            f"both nodes Done on {result.new}",
            lambda: all(done_on(cluster, n, result.new) for n in NODES),
            ROLLOUT_TIMEOUT,
            procs,
        )
        result.survivor_log = procs.log(f"controller-{result.survivor}")
        result.seconds = time.monotonic() - t0
        record_figure(
            f"two-node rollout (drains, an API server and etcd restart, a failover): {result.seconds:.1f} s"
        )
        kubelet.stop()
        result.scrapes = scrape_as_prometheus(cluster, work / "nodes" / NODES[0])
        result.joined_seconds = join_a_node_mcd_never_ran_on(cluster, procs, work, result.new)
        result.max_unavailable_seen = kubelet.max_unavailable_seen
        result.force_deleted = list(kubelet.force_deleted)
        yield result
    finally:
        procs.stop()  # first: nothing may keep mcd processes running after the module
        kubelet.stop()
        if os.environ.get("MCD_KUBE_KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)


def _scrape(port: int, token: str | None) -> int:
    """The status of one GET /metrics on the agent's TLS endpoint (its certificate is self-signed
    here: no proxy-tls Secret, so the check of the server is left out)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def scrape_as_prometheus(cluster: RealCluster, node_dir: Path) -> dict[str, int]:
    """Scrapes of the first node's endpoint: no token, a ServiceAccount with no grant, and
    kube-prometheus's account with manifests/monitoring's grant, each checked by the agent through
    TokenReview and SubjectAccessReview on the real server."""
    port = int(secure_port_file(node_dir).read_text())
    cluster.kubectl("create", "namespace", "monitoring")
    for sa in ("prometheus-k8s", "nobody"):
        cluster.kubectl("create", "serviceaccount", sa, "-n", "monitoring")
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "monitoring" / "prometheus-rbac.yaml"))
    return {
        "none": _scrape(port, None),
        "nobody": _scrape(port, cluster.token("nobody", "monitoring")),
        "prometheus": _scrape(port, cluster.token("prometheus-k8s", "monitoring")),
    }


def join_a_node_mcd_never_ran_on(cluster: RealCluster, procs: Processes, work: Path, config: str) -> float:
    """A new worker whose root has no mcd state (no currentconfig, never bootstrapped): the node
    registers, the DaemonSet's agent starts on it, and nothing else is done by hand. Seconds to
    Done on the pool's config."""
    from mcd_sim.sandbox import make_sandbox_root

    t0 = time.monotonic()
    add_node(cluster, JOINER, {"node-role.kubernetes.io/worker": ""})
    root = make_sandbox_root(work / "nodes" / JOINER)
    assert not (root / "etc" / "machine-config-daemon" / "currentconfig").exists()
    reader = cluster.token_kubeconfig("agent-join", cluster.token(AGENT_SA, NAMESPACE))
    start_agent(cluster, procs, JOINER, root, reader)
    wait(f"{JOINER} Done on {config}", lambda: done_on(cluster, JOINER, config), ROLLOUT_TIMEOUT, procs)
    seconds = time.monotonic() - t0
    record_figure(f"a node mcd never ran on joined the pool, Done in {seconds:.1f} s")
    return seconds


def test_a_node_mcd_never_ran_on_joins_and_ends_done(cluster: RealCluster, rollout: Rollout) -> None:
    assert rollout.joined_seconds > 0
    annotations = node_annotations(cluster, JOINER)
    assert annotations.get(STATE) == "Done"
    assert annotations.get(CURRENT) == rollout.new
    events = cluster.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events").json()["items"]
    reasons = {e["reason"] for e in events if (e.get("involvedObject") or {}).get("name") == JOINER}
    assert "FirstConfig" in reasons and "NodeDone" in reasons, reasons


def test_the_scrape_endpoint_lets_only_an_authorized_scraper_in(rollout: Rollout) -> None:
    assert rollout.scrapes == {"none": 401, "nobody": 403, "prometheus": 200}


def test_manifests_apply_cleanly_and_ship_every_crd(cluster: RealCluster) -> None:
    out = apply_manifests(cluster)
    assert "error" not in out.lower()
    # again: unchanged, as a user re-applying gets
    again = apply_manifests(cluster)
    assert "created" not in again and "configured" not in again, again
    served = {
        f"{r['name']}.{g}"
        for g, v in (("machineconfiguration.openshift.io", "v1"), ("operator.openshift.io", "v1"))
        for r in cluster.request("GET", f"/apis/{g}/{v}").json()["resources"]
        if "/" not in r["name"]
    }
    assert set(CRDS) <= served


def test_each_crd_is_shipped_once() -> None:
    """manifests/ (the agent's, applied first) and manifests/pool-controller/ never ship two
    copies of one CRD that could drift apart."""
    seen: dict[str, str] = {}
    for path in sorted((REPO / "manifests").glob("**/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                name = doc["metadata"]["name"]
                assert name not in seen, f"{name} in {seen[name]} and {path}"
                seen[name] = str(path)
    assert set(seen) == set(CRDS)


def test_the_rollout_ends_done_on_both_nodes_within_max_unavailable(
    cluster: RealCluster, rollout: Rollout
) -> None:
    assert rollout.new and rollout.new != rollout.old
    assert all(done_on(cluster, n, rollout.new) for n in NODES)
    # sampled every 0.2 s by the test's kubelet: one node drained or updating at a time
    assert rollout.max_unavailable_seen == 1
    # each node's pod was evicted (then force-deleted by the test's kubelet) and started again
    assert sorted(set(rollout.force_deleted)) == [f"web-{n}" for n in NODES]
    wait_for("the pool Updated", lambda: _pool_updated(cluster, rollout.new), 30)
    # the first node's drain waited on its pod across the faults; then the replica that took
    # over moved the second node, and holds the Lease
    held_node = rollout.held_pod.removeprefix("web-")
    [second] = [n for n in NODES if n != held_node]
    assert f"SetDesiredConfig: Targeted node {second} " in rollout.survivor_log
    assert lease_holder(cluster) == rollout.survivor


def _pool_updated(cluster: RealCluster, config: str) -> bool:
    status = cluster.request("GET", f"{MC_API}/machineconfigpools/worker").json().get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conditions.get("Updated") == "True" and (status.get("configuration") or {}).get("name") == config


def _stamp(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


def _mcd_records(cluster: RealCluster, since: float) -> list[dict[str, Any]]:
    """The audit records of mcd's identities (both ServiceAccounts, both nodes) from `since`."""
    users = {AGENT_USER, CONTROLLER_USER, *(f"system:node:{n}" for n in NODES)}
    return [
        r
        for r in cluster.audit_records()
        if r.get("user", {}).get("username") in users and _stamp(r) >= since - 1
    ]


def _short(r: dict[str, Any]) -> tuple[str, str, str, int]:
    return (
        r["user"]["username"].rsplit(":", 1)[-1],
        r["verb"],
        r["requestURI"].split("?")[0],
        r["responseStatus"]["code"],
    )


def test_eviction_goes_through_policy_v1beta1_chosen_by_discovery(
    cluster: RealCluster, rollout: Rollout
) -> None:
    records = _mcd_records(cluster, rollout.started)
    evictions = [r for r in records if r.get("objectRef", {}).get("subresource") == "eviction"]
    assert {r["objectRef"]["name"] for r in evictions if r["responseStatus"]["code"] == 201} == {
        f"web-{n}" for n in NODES
    }
    # the audit log keeps no eviction body here (1.20 logs none for this subresource even at
    # level Request), but the 201s say which it was: this server decodes policy/v1beta1 only and
    # answers a policy/v1 Eviction with 400, as the check below shows
    ns, pod = "web", f"web-{NODES[0]}"
    v1 = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}}
    assert cluster.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", v1).status == 400
    # ... chosen from discovery, read by the drainer before its first eviction
    first = min(_stamp(r) for r in evictions)
    discovery = {r["requestURI"] for r in records if "objectRef" not in r and _stamp(r) <= first}
    assert "/apis/policy" in discovery


def _in_restart(rollout: Rollout, r: dict[str, Any]) -> bool:
    """During the API server and etcd restarts and their first seconds back: RBAC answers 403 until its
    caches fill, the custom resources' paths 404 until their CRDs are served again, and 503."""
    begin, end = rollout.restart
    return begin - 1 <= _stamp(r) <= end + 10


def test_every_event_is_accepted(cluster: RealCluster, rollout: Rollout) -> None:
    records = _mcd_records(cluster, rollout.started)
    events = [r for r in records if r.get("objectRef", {}).get("resource") == "events"]
    assert {r["user"]["username"] for r in events} >= {f"system:node:{n}" for n in NODES} | {CONTROLLER_USER}
    created = {
        r["objectRef"]["name"] for r in events if r["verb"] == "create" and r["responseStatus"]["code"] == 201
    }
    for r in events:
        code = r["responseStatus"]["code"]
        if code < 400:
            continue
        # a repeat whose first POST was lost in the API server restart: the recorder patches the
        # Event it believes made, gets 404 and creates it (client-go's recordToSink does the same)
        assert (r["verb"], code) == ("patch", 404) and _in_restart(rollout, r), _short(r)
        assert r["objectRef"]["name"] in created, _short(r)


# Refusals that are answers mcd expects, outside the API server restart: (user, verb, path
# pattern, code) and why.
EXPECTED_REFUSALS = {
    (
        "machine-config-controller",
        "get",
        "/leases/machine-config-controller",
        404,
    ): "the Lease before the first replica makes it",
    ("machine-config-controller", "create", "/leases", 409): "two replicas race to make the Lease; one wins",
    (
        "machine-config-daemon",
        "get",
        "/machineconfignodes/",
        404,
    ): "the agent reads its MachineConfigNode before it makes it",
    (
        "machine-config-daemon",
        "get",
        "/namespaces/web/pods/",
        404,
    ): "the drainer waits for an evicted pod to be gone",
    (
        "machine-config-daemon",
        "update",
        "/machineconfignodes/",
        409,
    ): "the agent and the pool controller both write a MachineConfigNode's conditions (resourceVersion "
    "preconditions): the loser reads again and retries",
    (
        "machine-config-controller",
        "update",
        "/machineconfignodes/",
        409,
    ): "the same race seen from the controller's side (its drain phases on the MachineConfigNode)",
    (
        "machine-config-controller",
        "patch",
        "/api/v1/nodes/",
        409,
    ): "the controller's node patches carry the resourceVersion of its cache (a watch): an agent's "
    "write in between is seen by the watch and the key handled again",
    **{
        (node, "patch", f"/api/v1/nodes/{node}", 409): "the node writer's patches carry the resourceVersion "
        "it read: a write by the controller in between is read again and retried"
        for node in [*NODES, JOINER]
    },
}


def test_no_403_or_404_to_mcd_after_start_up(cluster: RealCluster, rollout: Rollout) -> None:
    refused = []
    for r in _mcd_records(cluster, rollout.started):
        user, verb, path, code = _short(r)
        if code not in (401, 403, 404, 409, 422) or _in_restart(rollout, r):
            continue
        if r.get("objectRef", {}).get("resource") == "events":
            continue  # test_every_event_is_accepted
        if not any(u == user and v == verb and p in path and c == code for u, v, p, c in EXPECTED_REFUSALS):
            refused.append((user, verb, path, code))
    assert refused == []


def _granted(subject: str) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of every rule the shipped manifests bind to the ServiceAccount
    (manifests/ and manifests/pool-controller/; not the optional without-kubelet-kubeconfig/)."""
    docs = [
        d
        for path in sorted(
            [*(REPO / "manifests").glob("*.yaml"), *(REPO / "manifests" / "pool-controller").glob("*.yaml")]
        )
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == subject and s["namespace"] == NAMESPACE
            for s in b["subjects"]
        ):
            continue
        ref = b["roleRef"]
        role = roles[
            (ref["kind"], "" if ref["kind"] == "ClusterRole" else b["metadata"]["namespace"], ref["name"])
        ]
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for res in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((g, res, verb))
    return out


# Granted and not used in these scenarios, with the reason each stays.
UNUSED = {
    AGENT_SA: {
        (
            "",
            "nodes",
            "get",
        ): "read after a conflict on the node's annotations, which this rollout did not hit",
        (
            "",
            "events",
            "create",
        ): "the agent posts its Events with the kubelet's credentials when the node has them",
        ("", "events", "patch"): "as create: only without a kubelet kubeconfig",
        ("", "configmaps", "get"): "kubeconfig-data, read at a kube-apiserver CA rotation only",
        (
            "security.openshift.io",
            "securitycontextconstraints",
            "use",
        ): "OpenShift's admission, not a request",
    },
    CONTROLLER_SA: {
        (
            "",
            "pods",
            "list",
        ): "the controller's drain, for agents without --builtin-drainer (the DaemonSet drains itself)",
        ("", "pods/eviction", "create"): "as pods list",
        ("", "pods", "watch"): "as pods list: the pods of a node the controller drains, by spec.nodeName",
        ("", "nodes", "get"): (
            "the drain controller's re-read of a cordoned node (handshake only), and the check that"
            " a MachineConfigNode's node is really gone, when the MachineConfigNode was seen before"
            " its node (the two watches are apart): a race, used in some runs"
        ),
        (
            "machineconfiguration.openshift.io",
            "machineconfignodes",
            "get",
        ): "the drain controller's MachineConfigNode phases, for the handshake only",
        ("machineconfiguration.openshift.io", "machineconfignodes", "create"): "as machineconfignodes get",
        (
            "machineconfiguration.openshift.io",
            "machineconfignodes/status",
            "update",
        ): "as machineconfignodes get",
        (
            "machineconfiguration.openshift.io",
            "machineconfignodes",
            "delete",
        ): "a deleted Node's MachineConfigNode: no Node is deleted here",
        ("policy", "poddisruptionbudgets", "list"): "the drain controller names blocking budgets (handshake)",
    },
}


@pytest.mark.parametrize("sa", [AGENT_SA, CONTROLLER_SA])
def test_shipped_rbac_is_used_and_nothing_is_refused(cluster: RealCluster, rollout: Rollout, sa: str) -> None:
    user = f"system:serviceaccount:{NAMESPACE}:{sa}"
    used = set()
    for r in _mcd_records(cluster, rollout.started):
        if r["user"]["username"] != user or "objectRef" not in r:
            continue
        ref = r["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, r["verb"]))
        # granted: RBAC refused nothing once the server was up
        assert r["responseStatus"]["code"] != 403 or _in_restart(rollout, r), _short(r)
    granted = _granted(sa)
    assert used - granted == set()
    # every grant is used, or named as not used here with the reason (some only in some runs)
    assert granted - used <= set(UNUSED[sa]), sorted(granted - used - set(UNUSED[sa]))
