"""The stand-in API server's identities and RBAC: who a request is from (token or client
certificate), recorded in the audit log, and, once switched on, refusals as kube-apiserver's."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.authn import ADMIN, User, node, service_account
from mcd_sim.apiserver.rbac import Ask, Authorizer

SA = service_account("openshift-machine-config-operator", "machine-config-daemon")
ROLES: list[dict[str, Any]] = [
    {"kind": "ClusterRole", "metadata": {"name": "reader"},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "reader"},
     "roleRef": {"kind": "ClusterRole", "name": "reader"},
     "subjects": [{"kind": "ServiceAccount", "name": "machine-config-daemon",
                   "namespace": "openshift-machine-config-operator"}]},
    {"kind": "ClusterRole", "metadata": {"name": "events"},
     "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]},
    {"kind": "RoleBinding", "metadata": {"name": "events", "namespace": "default"},
     "roleRef": {"kind": "ClusterRole", "name": "events"},
     "subjects": [{"kind": "Group", "name": "system:serviceaccounts:openshift-machine-config-operator"}]},
]  # fmt: skip


def _ask(verb: str, resource: str, namespace: str = "", name: str = "", group: str = "") -> Ask:
    return Ask(verb, group, resource, namespace, name)


def test_bindings_grant_their_roles_rules_in_their_scope_only() -> None:
    authz = Authorizer(ROLES)
    assert authz.allows(SA, _ask("watch", "nodes"))
    assert not authz.allows(SA, _ask("patch", "nodes", name="worker-0"))
    # a RoleBinding to a group, in its namespace only
    assert authz.allows(SA, _ask("create", "events", "default"))
    assert not authz.allows(SA, _ask("create", "events", "kube-system"))
    assert not authz.allows(User("someone", ("system:authenticated",)), _ask("get", "nodes"))
    assert authz.allows(ADMIN, _ask("delete", "nodes", name="worker-0"))


def test_a_kubelet_writes_its_own_node_only_and_posts_events_anywhere() -> None:
    authz = Authorizer([])
    kubelet = node("worker-0")
    assert authz.allows(kubelet, _ask("patch", "nodes", name="worker-0"))
    assert authz.allows(kubelet, _ask("patch", "nodes/status", name="worker-0"))
    assert not authz.allows(kubelet, _ask("patch", "nodes", name="worker-1"))
    assert authz.allows(kubelet, _ask("get", "nodes", name="worker-1"))
    assert authz.allows(kubelet, _ask("create", "events", "openshift-machine-config-operator"))
    assert not authz.allows(kubelet, _ask("get", "machineconfigs", group="machineconfiguration.openshift.io"))
    # the name alone makes no kubelet: the group is what the Node authorizer checks
    assert not authz.allows(User("system:node:worker-0", ()), _ask("patch", "nodes", name="worker-0"))


def _call(server: ApiServer, method: str, path: str, *, token: str, body: Any = None,
          cert: tuple[Path, Path] | None = None) -> tuple[int, dict[str, Any]]:  # fmt: skip
    assert server.cert is not None
    ctx = ssl.create_default_context(cadata=server.cert.cert_pem.decode())
    if cert is not None:
        ctx.load_cert_chain(*cert)
    headers = {"Content-Type": "application/merge-patch+json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_enforced_rbac_refuses_as_kube_apiserver_and_the_audit_log_names_each_user(tmp_path: Path) -> None:
    server = ApiServer(audit_log_path=tmp_path / "audit.log").start()
    try:
        server.add_node("worker-0")
        sa_token = server.add_token(SA)
        cert, key = server.issue_client_cert(node("worker-0"))
        (tmp_path / "c.pem").write_bytes(cert)
        (tmp_path / "k.pem").write_bytes(key)
        kubelet = (tmp_path / "c.pem", tmp_path / "k.pem")
        patch = {"metadata": {"annotations": {"a": "b"}}}
        # off: any authenticated user may do anything
        assert _call(server, "PATCH", "/api/v1/nodes/worker-0", token=sa_token, body=patch)[0] == 200
        server.enforce_rbac(ROLES)
        assert _call(server, "GET", "/api/v1/nodes/worker-0", token=sa_token)[0] == 200
        code, status = _call(server, "PATCH", "/api/v1/nodes/worker-0", token=sa_token, body=patch)
        assert (code, status["reason"]) == (403, "Forbidden")
        assert status["message"] == (
            'nodes "worker-0" is forbidden: User "system:serviceaccount:openshift-machine-config-operator:'
            'machine-config-daemon" cannot patch resource "nodes" in API group "" at the cluster scope'
        )
        assert _call(server, "PATCH", "/api/v1/nodes/worker-0", token="", body=patch, cert=kubelet)[0] == 200
        assert _call(server, "GET", "/api/v1/nodes/worker-0", token="wrong")[0] == 401
    finally:
        server.stop()
    entries = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    seen = [(e["verb"], e["user"]["username"], e["responseStatus"]["code"]) for e in entries]
    assert seen == [
        ("patch", SA.name, 200),
        ("get", SA.name, 200),
        ("patch", SA.name, 403),
        ("patch", "system:node:worker-0", 200),
        ("get", "system:anonymous", 401),
    ]
    assert entries[3]["user"]["groups"] == ["system:nodes", "system:authenticated"]


def test_a_plain_http_server_has_no_client_certificates() -> None:
    server = ApiServer(tls=False)
    with pytest.raises(RuntimeError, match="need a TLS server"):
        server.issue_client_cert(node("worker-0"))
