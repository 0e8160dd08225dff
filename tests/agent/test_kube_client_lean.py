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
        "import mcd.agent.kube.client\n"
        "import kubernetes\n"
        "from kubernetes import client, config, watch\n"
        "print(client.CoreV1Api.__name__, config.load_kube_config.__name__, watch.Watch.__name__)"
    )
    assert out.split() == ["CoreV1Api", "load_kube_config", "Watch"]


def test_in_cluster_credentials_reach_the_api_server(tmp_path: Path) -> None:
    from kubernetes.client.configuration import Configuration
    from kubernetes.config.incluster_config import InClusterConfigLoader

    from mcd.agent.kube.client import KubeClient

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
            node, rv = client.list_node(NODE)
            assert node is not None and rv
        finally:
            client.close()
