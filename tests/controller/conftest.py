"""The pool controller's tests: a stand-in API server per test, the project's client over HTTPS,
and fake daemons that answer for the nodes (`fakes.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcd_sim.apiserver import ApiServer

from mcd.kube.client import KubeClient


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(audit_log_path=tmp_path / "audit.log") as server:
        yield server


@pytest.fixture
def kubeconfig(sim: ApiServer, tmp_path: Path) -> Path:
    return sim.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api(kubeconfig: Path) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(str(kubeconfig))
    yield client
    client.close()
