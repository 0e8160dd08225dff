"""Smoke tests of the real control plane itself: the build's fixes hold and the server behaves as
the facts in docs/kube-tier.md say (version, empty strings in custom resources, NodeRestriction,
policy/v1beta1 only, data kept over restarts, the audit log, tokens, kubectl 1.32 against it)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from realcluster import ClusterError, Identity, RealCluster, wait_for

pytestmark = pytest.mark.allow_commands

MERGE_PATCH = "application/merge-patch+json"
GROUP = "kubetier.mcd.test"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _apply(cluster: RealCluster, obj: dict[str, Any]) -> str:
    return cluster.kubectl("apply", "-f", "-", stdin=json.dumps(obj)).stdout


def _namespace(cluster: RealCluster) -> str:
    ns = _name("t")
    _apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return ns


def test_version_is_v1_20_2(cluster: RealCluster) -> None:
    version = cluster.request("GET", "/version").json()
    assert (version["gitVersion"], version["major"], version["minor"]) == ("v1.20.2", "1", "20")
    # kubectl reads the same: the server version kubectl 1.32 reports
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == "v1.20.2"


def test_custom_resource_with_an_empty_string_is_accepted(cluster: RealCluster) -> None:
    """The validate/type.go fix: unpatched, Go >= 1.21 makes "" a null and the server refuses it."""
    plural = "widgets"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": plural, "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"note": {"type": "string"}, "count": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    _apply(cluster, crd)
    path = f"/apis/{GROUP}/v1/{plural}"

    def established() -> bool:
        got = cluster.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}"
        )
        conditions = (got.json().get("status") or {}).get("conditions") or []  # null right after create
        served = cluster.request("GET", path).status == 200
        return served and any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("the CRD to be established and served", established, 60)
    kind = "Widget"
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": "empty"},
        "spec": {"note": "", "count": 0},
    }
    created = cluster.request("POST", path, obj)
    assert created.status == 201, created.body
    assert cluster.request("GET", f"{path}/empty").json()["spec"] == {"note": "", "count": 0}
    # validation still runs: a string where the schema says integer is refused
    bad = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "bad"}, "spec": {"count": "x"}}
    refused = cluster.request("POST", path, bad)
    assert refused.status == 422, refused.body


def test_a_node_may_patch_its_own_node_only(cluster: RealCluster) -> None:
    own, other = _name("node"), _name("node")
    me = cluster.node_identity(own)
    for name in (own, other):
        made = cluster.request(
            "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        )
        assert made.status == 201, made.body
    patch = {"metadata": {"labels": {"mcd.test/patched": "yes"}}}
    mine = cluster.request("PATCH", f"/api/v1/nodes/{own}", patch, identity=me, content_type=MERGE_PATCH)
    assert mine.status == 200, mine.body
    assert mine.json()["metadata"]["labels"]["mcd.test/patched"] == "yes"
    theirs = cluster.request("PATCH", f"/api/v1/nodes/{other}", patch, identity=me, content_type=MERGE_PATCH)
    assert theirs.status == 403, theirs.body
    assert "mcd.test/patched" not in cluster.request("GET", f"/api/v1/nodes/{other}").json()["metadata"].get(
        "labels", {}
    )
    # the node kubeconfig is the same identity, as kubectl sees it
    config = cluster.node_kubeconfig(own)
    assert cluster.kubectl("label", "node", own, "mcd.test/by-kubectl=yes", kubeconfig=config).returncode == 0
    denied = cluster.kubectl(
        "label", "node", other, "mcd.test/by-kubectl=yes", kubeconfig=config, check=False
    )
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()

    # both answers are in the audit log under the node's user name
    def audited() -> bool:
        codes = {
            (r["objectRef"]["name"], r["responseStatus"]["code"])
            for r in cluster.audit_records()
            if r.get("user", {}).get("username") == f"system:node:{own}"
            and r.get("verb") == "patch"
            and r.get("objectRef", {}).get("resource") == "nodes"
        }
        return {(own, 200), (other, 403)} <= codes

    wait_for("the node's PATCHes in the audit log", audited, 10)


def test_policy_serves_v1beta1_only(cluster: RealCluster) -> None:
    groups = cluster.request("GET", "/apis").json()["groups"]
    policy = next(g for g in groups if g["name"] == "policy")
    assert [v["version"] for v in policy["versions"]] == ["v1beta1"]
    assert cluster.request("GET", "/apis/policy/v1").status == 404
    resources = {r["name"] for r in cluster.request("GET", "/apis/policy/v1beta1").json()["resources"]}
    assert "poddisruptionbudgets" in resources
    # Eviction is a subresource of core pods; its discovery entry names the kind's group/version
    core = {r["name"]: r for r in cluster.request("GET", "/api/v1").json()["resources"]}
    eviction = core["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == ("policy", "v1beta1", "Eviction")


def test_service_account_token_authenticates(cluster: RealCluster) -> None:
    ns = _namespace(cluster)
    _apply(
        cluster,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent", "namespace": ns}},
    )
    who = Identity(token=cluster.token("agent", ns))
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": ns}},
    }
    answer = cluster.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, identity=who
    )
    assert answer.status == 201, answer.body
    assert answer.json()["status"]["allowed"] is False
    # authenticated (403, not 401) but granted nothing by RBAC
    assert cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps", identity=who).status == 403
    assert cluster.request("GET", "/api/v1/namespaces", identity=Identity(token="not-a-token")).status == 401


def test_data_survives_apiserver_and_etcd_restarts(cluster: RealCluster) -> None:
    ns = _namespace(cluster)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kept", "namespace": ns},
        "data": {"k": "v"},
    }
    _apply(cluster, cm)
    before = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kept").json()
    started = time.monotonic()
    cluster.restart_apiserver()
    assert time.monotonic() - started < 60
    after = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kept").json()
    assert (after["data"], after["metadata"]["uid"]) == ({"k": "v"}, before["metadata"]["uid"])
    cluster.restart_etcd()
    again = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kept").json()
    assert again["metadata"]["uid"] == before["metadata"]["uid"]
    # writes work again after both restarts
    _apply(cluster, {**cm, "data": {"k": "w"}})
    assert cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kept").json()["data"] == {"k": "w"}


def test_kubectl_1_32_against_1_20(cluster: RealCluster) -> None:
    """What kubectl 1.32 (outside the skew policy) does against this server, as docs/kube-tier.md
    lists it: apply, server-side apply, get, diff, wait and create token work; `create pdb` and
    `auth whoami` need newer APIs."""
    ns = _namespace(cluster)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": ns},
        "data": {"a": "1"},
    }
    assert "created" in _apply(cluster, cm)
    assert "unchanged" in _apply(cluster, cm)
    assert cluster.kubectl("diff", "-f", "-", stdin=json.dumps(cm), check=False).returncode == 0
    assert (
        "serverside-applied"
        in cluster.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(cm)).stdout
    )
    got = json.loads(cluster.kubectl("get", "configmap", "c", "-n", ns, "-o", "json").stdout)
    assert got["data"] == {"a": "1"}
    cluster.kubectl("wait", "--for=jsonpath={.data.a}=1", "configmap/c", "-n", ns, "--timeout=10s")
    # kubectl create pdb makes policy/v1 only
    pdb = cluster.kubectl(
        "create", "pdb", "p", "-n", ns, "--selector=app=x", "--min-available=1", check=False
    )
    assert pdb.returncode != 0
    # a policy/v1beta1 PDB applies from a manifest
    manifest = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }
    assert "created" in _apply(cluster, manifest)
    # SelfSubjectReview came in 1.26 (beta 1.27)
    assert cluster.kubectl("auth", "whoami", check=False).returncode != 0


def test_cluster_error_names_the_failed_command(cluster: RealCluster) -> None:
    with pytest.raises(ClusterError, match="kubectl get nosuchkind"):
        cluster.kubectl("get", "nosuchkind")
