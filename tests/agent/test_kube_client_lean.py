"""The API client loads only the parts of the `kubernetes` package it uses (configuration, the
in-cluster loader, the REST layer), and in-cluster credentials reach the API server through them.

An import check, not a timing or memory measurement (bench/agent.py measures the memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from harness import NODE, REPO
from mcd_sim.apiserver import ApiServer
from simcluster import Cluster

from mcd.host.root import HostRoot

# what the whole package would bring: the pydantic ApiClient and models, the kubeconfig
# loader's requests and oauthlib, the websocket streams, the dynamic client
NOT_LOADED = (
    "pydantic",
    "requests",
    "oauthlib",
    "requests_oauthlib",
    "websocket",
    "kubernetes.client.api_client",
    "kubernetes.client.models",
    "kubernetes.config.kube_config",
    "kubernetes.dynamic",
    "kubernetes.stream",
)


def _python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.allow_commands  # a fresh interpreter: this one has loaded the whole package already
def test_the_agent_loads_only_the_parts_of_kubernetes_it_uses() -> None:
    out = _python("import json, sys, mcd.agent.loop, mcd.cli.main; print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(out))
    assert "kubernetes.client.rest" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in NOT_LOADED or m in NOT_LOADED) == []


@pytest.mark.allow_commands
def test_the_whole_package_still_imports_after_the_client() -> None:
    out = _python(
        "import mcd.kube.client\n"
        "import kubernetes\n"
        "from kubernetes import client, config, watch\n"
        "print(client.CoreV1Api.__name__, config.load_kube_config.__name__, watch.Watch.__name__)"
    )
    assert out.split() == ["CoreV1Api", "load_kube_config", "Watch"]


def test_in_cluster_credentials_reach_the_api_server(tmp_path: Path) -> None:
    from kubernetes.client.configuration import Configuration
    from kubernetes.config.incluster_config import InClusterConfigLoader

    from mcd.kube.client import KubeClient

    with ApiServer() as sim:
        sim.add_node(NODE)
        assert sim.cert is not None
        (tmp_path / "token").write_text(sim.token)
        (tmp_path / "ca.crt").write_bytes(sim.cert.cert_pem)
        url = urlsplit(sim.url)
        configuration = Configuration()
        # the loader `load_incluster_config` runs, with the pod's paths and environment here
        InClusterConfigLoader(
            token_filename=str(tmp_path / "token"),
            cert_filename=str(tmp_path / "ca.crt"),
            environ={"KUBERNETES_SERVICE_HOST": str(url.hostname), "KUBERNETES_SERVICE_PORT": str(url.port)},
        ).load_and_set(configuration)
        client = KubeClient(configuration)
        try:
            assert client.get_node(NODE)["metadata"]["name"] == NODE
            node, rv = client.list_named("nodes", NODE)
            assert node is not None and rv
        finally:
            client.close()


def _configuration_fields(configuration: object) -> dict[str, object]:
    names = ("host", "ssl_ca_cert", "ca_cert_data", "cert_file", "key_file", "verify_ssl", "tls_server_name")
    fields = {n: getattr(configuration, n) for n in names}
    fields["auth"] = configuration.auth_settings()  # type: ignore[attr-defined]
    return fields


def test_the_kubelets_kubeconfig_is_read_as_the_official_loader_reads_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The node writer's configuration, built without the official kubeconfig loader, is the
    one that loader builds from the same file (server, CA data, the certificate files)."""
    from kubernetes.client.configuration import Configuration
    from kubernetes.config.kube_config import load_kube_config_from_dict

    from mcd.kube.client import _writer_configuration
    from mcd.kube.identity import KUBELET_KUBECONFIG, node_writer_kubeconfig

    root = tmp_path / "root"
    root.mkdir()
    cluster.install_kubelet_identity(root)
    found = _writer_configuration(HostRoot(root), KUBELET_KUBECONFIG)
    assert found is not None
    doc, _ = node_writer_kubeconfig(HostRoot(root), KUBELET_KUBECONFIG) or ({}, None)
    official = Configuration()
    load_kube_config_from_dict(doc, client_configuration=official)
    ours = _configuration_fields(found[0])
    theirs = _configuration_fields(official)
    # the loader writes inline CA data to a temp file; ours hands the data over as it is
    assert Path(str(theirs.pop("ssl_ca_cert"))).read_text() == ours.pop("ca_cert_data")
    assert ours.pop("ssl_ca_cert") is None and theirs.pop("ca_cert_data") is None
    assert ours == theirs
    assert str(ours["cert_file"]).startswith(str(root))  # the node's file, under the root


@pytest.mark.allow_commands  # a fresh interpreter, to see what the node writer's credentials import
def test_the_kubelets_kubeconfig_is_read_without_the_kubeconfig_loader(
    cluster: Cluster, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    cluster.install_kubelet_identity(root)
    out = _python(
        "import sys\n"
        "from mcd.kube.client import _writer_configuration\n"
        "from mcd.kube.identity import KUBELET_KUBECONFIG\n"
        "from mcd.host.root import HostRoot\n"
        f"found = _writer_configuration(HostRoot({str(root)!r}), KUBELET_KUBECONFIG)\n"
        "print(found is not None, 'kubernetes.config.kube_config' in sys.modules)"
    )
    assert out.split() == ["True", "False"]


def test_a_rotated_token_is_taken_within_the_refresh_period_and_at_once_after_a_401(tmp_path: Path) -> None:
    """The client asks the configuration for its bearer token (its refresh hook re-reads a
    rotated one) every BEARER_REFRESH_SECONDS, not on every request, and again as soon as the
    server refuses the one it has."""
    from kubernetes.client.configuration import Configuration
    from kubernetes.config.incluster_config import InClusterConfigLoader

    from mcd.kube import client as kube_client
    from mcd.kube.errors import ApiError

    with ApiServer() as sim:
        sim.add_node(NODE)
        assert sim.cert is not None
        token_file = tmp_path / "token"
        token_file.write_text(sim.token)
        (tmp_path / "ca.crt").write_bytes(sim.cert.cert_pem)
        url = urlsplit(sim.url)
        configuration = Configuration()
        InClusterConfigLoader(
            token_filename=str(token_file),
            cert_filename=str(tmp_path / "ca.crt"),
            environ={"KUBERNETES_SERVICE_HOST": str(url.hostname), "KUBERNETES_SERVICE_PORT": str(url.port)},
        ).load_and_set(configuration)
        asked: list[str] = []
        ask = configuration.auth_settings

        def counted() -> object:
            asked.append("asked")
            return ask()

        configuration.auth_settings = counted
        now = [1000.0]
        client = kube_client.KubeClient(configuration)
        client._api = kube_client._Session(configuration, client.user_agent, clock=lambda: now[0])
        try:
            for _ in range(5):
                client.get_node(NODE)
            assert len(asked) == 1  # once for five requests
            now[0] += kube_client.BEARER_REFRESH_SECONDS
            client.get_node(NODE)
            assert len(asked) == 2
            # a token the server refuses, then the good one again: taken at once after the 401
            configuration.refresh_api_key_hook = None
            configuration.api_key["BearerToken"] = "bearer refused"
            now[0] += kube_client.BEARER_REFRESH_SECONDS
            with pytest.raises(ApiError) as refused:
                client.get_node(NODE)
            assert refused.value.status == 401
            configuration.api_key["BearerToken"] = f"bearer {sim.token}"
            assert client.get_node(NODE)["metadata"]["name"] == NODE
            assert len(asked) == 4
        finally:
            client.close()
