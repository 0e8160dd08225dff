"""The agent's two identities (mcd.kube.client `KubeClient.connect`), as upstream's daemon:
reads with the ServiceAccount, the node and its Events written with the kubelet's kubeconfig
from the node's root; the in-cluster client's server taken from the node's
/etc/kubernetes/kubeconfig (api-int); the fallbacks and the errors when a file is unusable."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from harness import NODE
from mcd_sim.apiserver.authn import node
from simcluster import KUBELET_CURRENT, SA_USER, Cluster

from mcd.cli.main import main
from mcd.config.findings import InputError
from mcd.host.root import HostRoot
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError

NODE_USER = f"system:node:{NODE}"


def _users(cluster: Cluster) -> list[tuple[str, str, str]]:
    """(verb, resource, user) of every request in the audit log, in the order received. The
    server is stopped first: a request's record is written after its answer is sent, so the
    records of requests sent one after another may be written out of order (by two server
    threads), but not received out of order."""
    cluster.sim.stop()
    entries = [json.loads(line) for line in cluster.audit_path.read_text().splitlines()]
    entries.sort(key=lambda e: str(e["requestReceivedTimestamp"]))
    out = []
    for e in entries:
        ref = e.get("objectRef") or {}
        out.append((e["verb"], ref.get("resource", ""), e["user"]["username"]))
    return out


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


def test_node_writes_and_events_go_out_as_the_node_and_reads_as_the_service_account(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.add_node(NODE)
    root = _root(tmp_path)
    cluster.install_kubelet_identity(root)
    reader = cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig")
    client = KubeClient.connect(str(reader), HostRoot(root))
    try:
        client.get_node(NODE)
        client.list_named("nodes", NODE)
        client.patch_node(NODE, {"metadata": {"annotations": {"a": "b"}}})
        client.create_event("openshift-machine-config-operator", _event("e1"))
        client.patch_event("openshift-machine-config-operator", "e1", {"count": 2})
        client.get_machineconfiguration()
    finally:
        client.close()
    sa = SA_USER.name
    assert _users(cluster)[-6:] == [
        ("get", "nodes", sa),
        ("list", "nodes", sa),
        ("patch", "nodes", NODE_USER),
        ("create", "events", NODE_USER),
        ("patch", "events", NODE_USER),
        ("get", "machineconfigurations", sa),
    ]
    assert client.writer_source == str(root / "var/lib/kubelet/kubeconfig")


def test_the_kubelets_certificate_symlink_is_followed_inside_the_root_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    """kubelet-client-current.pem points at an absolute host path: it is found under the root,
    and a link that climbs out of the root is refused, naming the file and the key."""
    root = _root(tmp_path)
    kubeconfig = cluster.install_kubelet_identity(root)
    doc = yaml.safe_load(kubeconfig.read_text())
    assert doc["users"][0]["user"]["client-certificate"] == KUBELET_CURRENT
    (tmp_path / "outside.pem").write_text("not the node's\n")
    current = root / KUBELET_CURRENT.lstrip("/")
    current.unlink()
    current.symlink_to("../../../../../outside.pem")
    reader = cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig")
    with pytest.raises(InputError) as caught:
        KubeClient.connect(str(reader), HostRoot(root))
    [line] = caught.value.lines()
    assert line.startswith(f"{kubeconfig}: users[0].user.client-certificate: refusing")
    assert "leaves the root" in line


def test_without_a_kubelet_kubeconfig_the_reader_writes_and_says_so_once(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.add_node(NODE)
    reader = cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig")
    with caplog.at_level(logging.INFO, logger="mcd.kube.client"):
        client = KubeClient.connect(str(reader), HostRoot(_root(tmp_path)))
    try:
        client.patch_node(NODE, {"metadata": {"annotations": {"a": "b"}}})
    finally:
        client.close()
    assert _users(cluster)[-1] == ("patch", "nodes", SA_USER.name)
    said = [r.getMessage() for r in caplog.records if "kubelet kubeconfig" in r.getMessage()]
    assert len(said) == 1 and "/var/lib/kubelet/kubeconfig" in said[0] and "--kubeconfig" in said[0]
    assert all(r.levelno == logging.INFO for r in caplog.records)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("clusters: [\n", "not YAML"),
        ("apiVersion: v1\nkind: Config\n", "current-context: missing or empty"),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
            "clusters: [{name: k, cluster: {server: 'https://x:6443'}}]\n"
            "users: [{name: u, user: {client-certificate: /var/lib/kubelet/pki/none.pem}}]\n",
            "users[0].user.client-certificate: /var/lib/kubelet/pki/none.pem: no such file under the root",
        ),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
            "clusters: [{name: k, cluster: {server: 'https://x:6443'}}]\n"
            "users: [{name: u, user: {exec: {command: /bin/sh}}}]\n",
            "users[0].user.exec: credential plugins are not supported",
        ),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
            "clusters: [{name: k, cluster: {server: 'http://x'}}]\n",
            "clusters[0].cluster.server: 'http://x': not an https://HOST[:PORT] URL",
        ),
    ],
)
def test_a_broken_kubelet_kubeconfig_is_a_one_line_error_naming_file_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    root = _root(tmp_path)
    path = root / "var/lib/kubelet/kubeconfig"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    reader = tmp_path / "reader.kubeconfig"
    reader.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    code = main(["start", "--node-name", NODE, "--root-mount", str(root), "--kubeconfig", str(reader)])
    err = capsys.readouterr().err
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"{path}: {where}")


def _service_account_dir(cluster: Cluster, tmp_path: Path) -> Path:
    """The pod's mounted ServiceAccount: its token and the API server's CA."""
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(cluster.sim.add_token(SA_USER))
    assert cluster.sim.cert is not None
    (sa / "ca.crt").write_bytes(cluster.sim.cert.cert_pem)
    return sa


def _node_kubeconfig(cluster: Cluster, root: Path) -> None:
    """/etc/kubernetes/kubeconfig on the node: the kubelet's, naming the api-int server."""
    path = root / "etc/kubernetes/kubeconfig"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(cluster.sim.kubeconfig(context="admin", user={"token": "unused"})))


def test_the_in_cluster_client_talks_to_the_nodes_api_int_server(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The Service address is unroutable here (TEST-NET-1): only the override reaches the server."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "192.0.2.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cluster.add_node(NODE)
    root = _root(tmp_path)
    _node_kubeconfig(cluster, root)
    sa = _service_account_dir(cluster, tmp_path)
    with caplog.at_level(logging.INFO, logger="mcd.kube.client"):
        client = KubeClient.connect("", HostRoot(root), service_account_dir=str(sa))
    try:
        assert client.host == cluster.sim.url
        client.get_node(NODE)
    finally:
        client.close()
    assert _users(cluster)[-1] == ("get", "nodes", SA_USER.name)
    assert any(
        f"overriding the API server address with {cluster.sim.url}" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("why", ["switched off", "no file", "--kubeconfig"])
def test_the_api_int_override_is_skipped(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "192.0.2.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    root = _root(tmp_path)
    if why != "no file":
        _node_kubeconfig(cluster, root)
    sa = str(_service_account_dir(cluster, tmp_path))
    endpoint = "" if why == "switched off" else "/etc/kubernetes/kubeconfig"
    kubeconfig = ""
    if why == "--kubeconfig":
        # upstream overrides the in-cluster address only: a kubeconfig's server is used as it is
        kubeconfig = str(cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig"))
        (root / "etc/kubernetes/kubeconfig").write_text(
            yaml.safe_dump(
                dict(
                    cluster.sim.kubeconfig(),
                    clusters=[{"name": "sim", "cluster": {"server": "https://192.0.2.2:1"}}],
                )
            )
        )
    client = KubeClient.connect(
        kubeconfig, HostRoot(root), api_endpoint_kubeconfig=endpoint, service_account_dir=sa
    )
    client.close()
    assert client.host == (cluster.sim.url if kubeconfig else "https://192.0.2.1:6443")


def test_a_broken_api_endpoint_kubeconfig_is_an_error_not_a_silent_fallback(tmp_path: Path) -> None:
    root = _root(tmp_path)
    path = root / "etc/kubernetes/kubeconfig"
    path.parent.mkdir(parents=True)
    path.write_text("current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: []\n")
    with pytest.raises(InputError) as caught:
        KubeClient.connect("", HostRoot(root), kubelet_kubeconfig="")
    assert caught.value.lines() == [f"{path}: clusters: no entry named 'k'"]


def test_a_refused_node_writer_reads_its_kubeconfig_again(cluster: Cluster, tmp_path: Path) -> None:
    """The kubelet rotates its credentials in place: after a 401 the next write uses what the
    file holds now (the old credentials stay valid until they expire, so a 401 comes after)."""
    cluster.add_node(NODE)
    root = _root(tmp_path)
    token = root / "var/lib/kubelet/token"
    token.parent.mkdir(parents=True)
    token.write_text("stale")
    (root / "var/lib/kubelet/kubeconfig").write_text(
        yaml.safe_dump(cluster.sim.kubeconfig(user={"tokenFile": "token"}))  # relative: beside the kubeconfig
    )
    reader = cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig")
    client = KubeClient.connect(str(reader), HostRoot(root))
    try:
        # rotated on disk while the agent runs: its connection still sends the old credentials
        token.write_text(cluster.sim.add_token(node(NODE)))
        with pytest.raises(ApiError) as caught:
            client.patch_node(NODE, {"metadata": {"annotations": {"a": "1"}}})
        assert caught.value.status == 401
        client.patch_node(NODE, {"metadata": {"annotations": {"a": "2"}}})
    finally:
        client.close()
    assert cluster.annotations()["a"] == "2"
    # the refused request's record may be written after the next one's (each when its answer is sent)
    assert ("patch", "nodes", NODE_USER) in _users(cluster)


def _event(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "openshift-machine-config-operator"},
        "involvedObject": {"kind": "Node", "name": NODE, "namespace": "openshift-machine-config-operator"},
        "reason": "Test",
        "message": "m",
        "type": "Normal",
        "count": 1,
    }


def test_a_refusal_of_the_node_writer_names_what_to_check_for_that_identity(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A kubelet may write only its own Node: the 403 points at the Node authorizer, not at
    the ServiceAccount's RBAC."""
    cluster.add_node(NODE)
    cluster.sim.enforce_rbac([])
    root = _root(tmp_path)
    cluster.install_kubelet_identity(root, name="worker-9")  # another node's credentials
    reader = cluster.write_user_kubeconfig(tmp_path / "sa.kubeconfig")
    client = KubeClient.connect(str(reader), HostRoot(root))
    try:
        with caplog.at_level(logging.WARNING, logger="mcd.agent.health"), pytest.raises(ApiError) as caught:
            client.patch_node(NODE, {"metadata": {"annotations": {"a": "b"}}})
    finally:
        client.close()
    assert caught.value.status == 403
    [record] = [r for r in caplog.records if "forbids" in r.getMessage()]
    assert "system:node:worker-9" in record.getMessage() and "Node authorizer" in record.getMessage()
    assert "service account" not in record.getMessage()
