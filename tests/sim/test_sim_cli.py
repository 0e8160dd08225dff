"""`mcd sim-cluster`: kubeconfig written once ready, bearer token required, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from mcd_sim.cli import main


def _wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "kubeconfig never appeared"
        time.sleep(0.05)


def _get(url: str, ca: bytes, token: str | None) -> int:
    ctx = ssl.create_default_context(cadata=ca.decode())
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        err.close()
        return err.code


@pytest.mark.allow_commands
def test_sim_cluster_serves_until_sigterm(tmp_path: Path) -> None:
    import base64

    kubeconfig = tmp_path / "kubeconfig"
    audit = tmp_path / "audit.log"
    cmd = [sys.executable, "-m", "mcd_sim", "sim-cluster", "--kubeconfig", str(kubeconfig),
           "--node", "worker-0", "--node", "worker-1", "--audit-log-path", str(audit)]  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            _wait_for_file(kubeconfig, proc)
            assert kubeconfig.stat().st_mode & 0o777 == 0o600
            config = yaml.safe_load(kubeconfig.read_text())
            cluster = config["clusters"][0]["cluster"]
            token = config["users"][0]["user"]["token"]
            ca = base64.b64decode(cluster["certificate-authority-data"])
            server = cluster["server"]
            assert server.startswith("https://127.0.0.1:")
            assert _get(f"{server}/api/v1/nodes", ca, None) == 401
            assert _get(f"{server}/api/v1/nodes", ca, "wrong") == 401
            assert _get(f"{server}/api/v1/nodes/worker-1", ca, token) == 200
            assert _get(f"{server}/api/v1/namespaces/openshift-machine-config-operator", ca, token) == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert token not in out + err
    assert token not in audit.read_text()
    assert "serving https://127.0.0.1:" in err


def test_bad_listen_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim-cluster", "--kubeconfig", str(tmp_path / "k"), "--listen", "nope"]) == 1
    assert capsys.readouterr().err == "mcd-sim: --listen 'nope': expected HOST:PORT, e.g. 127.0.0.1:0\n"
    assert not (tmp_path / "k").exists()
    assert os.listdir(tmp_path) == []


def test_address_in_use_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["sim-cluster", "--kubeconfig", str(tmp_path / "k"), "--listen", f"127.0.0.1:{port}"])
    assert code == 1
    expected = f"mcd-sim: --listen 127.0.0.1:{port}: cannot listen: Address already in use\n"
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "k").exists()


def test_sim_cluster_serves_several_identities_under_the_manifests_rbac(tmp_path: Path) -> None:
    """`--user` writes a kubeconfig per identity (a kubelet's with a client certificate) and
    `--rbac manifests/` enforces the shipped roles: the agent's account reads Nodes but may not
    write them; the node's own identity may write its Node."""
    import threading

    from mcd_sim.cluster import SimClusterOptions, serve

    from mcd.host.root import HostRoot
    from mcd.kube.client import KubeClient
    from mcd.kube.errors import ApiError

    sa = "system:serviceaccount:openshift-machine-config-operator:machine-config-daemon"
    options = SimClusterOptions(
        tmp_path / "admin", ("127.0.0.1", 0), ("worker-0",), tmp_path / "audit.log",
        users=((sa, tmp_path / "sa"), ("system:node:worker-0", tmp_path / "kubelet")),
        rbac=(Path(__file__).resolve().parents[2] / "manifests",),
    )  # fmt: skip
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(options,), kwargs={"ready": ready, "stop": stop})
    thread.start()
    patch = {"metadata": {"annotations": {"a": "b"}}}
    try:
        assert ready.wait(30)
        kubelet = yaml.safe_load((tmp_path / "kubelet").read_text())["users"][0]["user"]
        assert set(kubelet) == {"client-certificate-data", "client-key-data"}
        # no node root: each client reads and writes with its one kubeconfig
        reader = KubeClient.connect(str(tmp_path / "sa"), HostRoot(tmp_path), kubelet_kubeconfig="")
        writer = KubeClient.connect(str(tmp_path / "kubelet"), HostRoot(tmp_path), kubelet_kubeconfig="")
        try:
            reader.get_node("worker-0")
            with pytest.raises(ApiError) as refused:
                reader.patch_node("worker-0", patch)
            assert refused.value.status == 403
            writer.patch_node("worker-0", patch)
        finally:
            reader.close()
            writer.close()
    finally:
        stop.set()
        thread.join(30)
    audit = (tmp_path / "audit.log").read_text().splitlines()
    users = [json.loads(line)["user"]["username"] for line in audit]
    assert users == [sa, sa, "system:node:worker-0"]
    assert (tmp_path / "sa").stat().st_mode & 0o777 == 0o600
