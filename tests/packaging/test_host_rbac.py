"""The host install's identity: the agent as systemd runs it (scripts/install-host.sh, systemd/)
reads and writes with the kubelet's own identity (system:node:NAME). Against the stand-in API
server with RBAC enforced (the Node authorizer's grant to kubelets, and manifests/host/): no
request is refused; without manifests/host/ the 403 says which account to look at."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from harness import NODE, Agent, config_a, done_on, make_root
from mcd_sim.apiserver.audit import read_events
from shipped import MANIFESTS, REPO
from simcluster import KUBELET_PEM, Cluster

pytestmark = pytest.mark.allow_commands
UNIT = REPO / "systemd" / "machine-config-daemon.service"


def _host_objects() -> list[dict[str, object]]:
    return [
        d for p in sorted((MANIFESTS / "host").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d
    ]


def _unit_args() -> tuple[list[str], dict[str, str]]:
    """The unit's `mcd start` arguments and its Environment= settings."""
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in UNIT.read_text().splitlines():
        if line.startswith("ExecStart="):
            argv = shlex.split(line.removeprefix("ExecStart="))
        elif line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").partition("=")
            env[key] = value
    return argv, env


def _start_as_the_kubelet(cluster: Cluster, tmp_path: Path) -> Agent:
    root = make_root(tmp_path, config_a())
    cluster.install_kubelet_identity(root)
    cluster.add_mc(config_a())
    prefix = "machineconfiguration.openshift.io"
    cluster.add_node(NODE, {f"{prefix}/currentConfig": "rendered-worker-a",
                            f"{prefix}/desiredConfig": "rendered-worker-a"})  # fmt: skip
    argv, env = _unit_args()
    assert argv[1:4] == ["start", "--root-mount", "/"]
    # the unit reads with the kubelet's kubeconfig (a host path: here under the test's root,
    # its certificate named by a path of this machine)
    assert env["MCD_KUBECONFIG"] == "/var/lib/kubelet/kubeconfig"
    pem = str(root / KUBELET_PEM.lstrip("/"))
    reader = cluster.sim.kubeconfig(context="local", user={"client-certificate": pem, "client-key": pem})
    kubeconfig = tmp_path / "kubelet-as-reader.kubeconfig"
    kubeconfig.write_text(json.dumps(reader))
    return Agent(root, kubeconfig, tmp_path / "agent.log", *argv[4:]).start()


def test_the_kubelet_identity_with_the_shipped_host_rbac_is_refused_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.sim.enforce_rbac(_host_objects())
    cluster.answer_drains()  # the machine-config-controller's side of the drain handshake
    try:
        agent = _start_as_the_kubelet(cluster, tmp_path)
        try:
            cluster.wait_node(NODE, done_on("rendered-worker-a"))
            cluster.wait_event("ConfigDriftMonitorStarted")
            agent.wait_log("is in config rendered-worker-a: Done")
        finally:
            agent.stop()
    finally:
        cluster.stop()
    calls = read_events(cluster.audit_path)
    mine = [c for c in calls if c["userAgent"].startswith("machine-config-daemon/")]
    assert {c["user"]["username"] for c in mine} == {f"system:node:{NODE}"}
    refused = sorted(
        {f"{c['verb']} {c['requestURI']}" for c in mine if c["responseStatus"]["code"] in (401, 403)}
    )
    assert refused == []
    resources = {(c.get("objectRef") or {}).get("resource") for c in mine}
    assert {"machineconfigs", "machineconfignodes", "controllerconfigs", "nodes"} <= resources


def test_without_the_host_rbac_the_403_names_the_kubeconfigs_user_not_a_service_account(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    cluster.sim.enforce_rbac([])  # the Node authorizer's grant to kubelets only
    try:
        agent = _start_as_the_kubelet(cluster, tmp_path)
        try:
            agent.wait_log("(403)")
            agent.wait_log("retrying with backoff")
        finally:
            agent.stop()
    finally:
        cluster.stop()
    [line, *_] = [x for x in agent.log.splitlines() if "(403)" in x]
    assert f'User "system:node:{NODE}"' in line  # the API server names the account
    assert "kubelet-as-reader.kubeconfig" in line and "manifests/host/" in line
    assert "service account" not in line
