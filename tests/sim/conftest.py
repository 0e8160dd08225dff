"""Fixtures for the stand-in API server tests: one server per module, kubectl with a private
home and cache, and the official client configured from the server's kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer


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


@dataclass
class Kubectl:
    """Runs the real kubectl against the stand-in with a private HOME and discovery cache."""

    kubeconfig: Path
    home: Path

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.home / "cache"),
        }
        proc = subprocess.run(
            ["kubectl", "--cache-dir", str(self.home / "cache"), *args],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def __call__(self, *args: str) -> str:
        return self.run(*args).stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "KUBECONFIG": str(self.kubeconfig)}  # fmt: skip
        return subprocess.Popen(
            ["kubectl", "--cache-dir", str(self.home / "cache"), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


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


def raw_request(
    sim: ApiServer, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTPS request with the server's token and CA, no client-side retries."""
    import ssl
    import urllib.error
    import urllib.request

    assert sim.cert is not None
    ctx = ssl.create_default_context(cadata=sim.cert.cert_pem.decode())
    req = urllib.request.Request(
        sim.url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {sim.token}", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return int(resp.status), dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers.items()), err.read()
