"""Fixtures for the stand-in API server tests: one server per module, kubectl with a private
home and cache, and the official client configured from the server's kubeconfig."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer
from simkube import Kubectl


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    audit = tmp_path_factory.mktemp("audit") / "audit.log"
    with ApiServer(audit_log_path=audit) as server:
        server.add_node("worker-0")
        server.add_node("worker-1")
        yield server


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that fails before its faulted requests ran leaves no rule for the next test."""
    yield
    if "sim" in request.fixturenames:
        request.getfixturevalue("sim").faults.clear()


@pytest.fixture(scope="module")
def kubeconfig(sim: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH (Debian: apt-get install kubernetes-client)")
    return Kubectl(kubeconfig, tmp_path_factory.mktemp("kubectl-home"))


@pytest.fixture(scope="module")
def client(kubeconfig: Path) -> Iterator[Any]:
    """An official `kubernetes` ApiClient for the stand-in."""
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    yield api
    api.close()
