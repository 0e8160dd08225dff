"""The host install's identity on the real API server (issue 28): the agent as the systemd unit
runs it (its ExecStart and Environment=, systemd/machine-config-daemon.service) reads and writes
with the kubelet's kubeconfig alone, a real `system:node:NODE` client certificate, with
`manifests/host/` applied and no ServiceAccount. It takes the node through an update (a drain
answered by `mcd pool-controller`) to Done, and the audit log shows every kind of request it
made under the node's name and not one 403. The stand-in's version of the same check:
tests/packaging/test_host_rbac.py."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import record_figure
from deployment import (
    CONTROLLER_SA,
    DRAIN_FILE,
    MC_API,
    NAMESPACE,
    WORKER_POOL,
    Processes,
    add_node,
    apply_manifests,
    done_on,
    embedded_kubeconfig,
    machineconfig,
    operator_part,
    pool_target,
    start_controller,
    wait,
)
from realcluster import REPO, RealCluster, build_apiserver

pytestmark = pytest.mark.allow_commands

NODE = "host-node"
NODE_USER = f"system:node:{NODE}"
UNIT = REPO / "systemd" / "machine-config-daemon.service"


@dataclass
class HostRun:
    old: str = ""
    new: str = ""
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (verb, URI, code) as the node


def _unit_start(root: Path, kubeconfig: Path) -> tuple[list[str], dict[str, str]]:
    """The unit's `mcd start` arguments, its root `/` replaced by the sandbox's, and its
    Environment= with the kubeconfig path under that root."""
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in UNIT.read_text().splitlines():
        if line.startswith("ExecStart="):
            argv = shlex.split(line.removeprefix("ExecStart="))
        elif line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").partition("=")
            env[key] = value
    assert argv[1:] == ["start", "--root-mount", "/", "-v"], argv
    assert env["MCD_KUBECONFIG"] == "/var/lib/kubelet/kubeconfig" and env["NODE_NAME"] == "%H"
    env.update(NODE_NAME=NODE, MCD_KUBECONFIG=str(kubeconfig))
    # a sandbox has no kubelet to poll, and its endpoint may not take the host's port
    extra = ["--metrics-url", "127.0.0.1:0", "--kubelet-healthz-enabled=false"]
    return ["start", "--root-mount", str(root), "-v", *extra], env


def _install_host_node(cluster: RealCluster, work: Path, old: str) -> tuple[Path, Path]:
    """A sandbox node on `old` with the kubelet's kubeconfig: the node's own certificate, inline."""
    from mcd_sim.sandbox import make_sandbox_root
    from mcd_sim.simulate import bootstrap_node

    rendered = work / "rendered-old.json"
    rendered.write_text(json.dumps(cluster.request("GET", f"{MC_API}/machineconfigs/{old}").json()))
    root = make_sandbox_root(work / "nodes" / NODE)
    bootstrap_node(root, rendered, old)
    ident = cluster.node_identity(NODE)
    assert ident.cert is not None and ident.key is not None
    kubeconfig = root / "var/lib/kubelet/kubeconfig"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(embedded_kubeconfig(cluster, NODE_USER, ident.cert, ident.key))
    kubeconfig.chmod(0o600)
    return root, kubeconfig


@pytest.fixture(scope="module")
def host_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostRun]:
    # a control plane of its own: the session's has its pool and MachineConfiguration already
    cluster = RealCluster(build_apiserver(), keep=os.environ.get("MCD_KUBE_KEEP") == "1")
    cluster.start()
    work = tmp_path_factory.mktemp("host")
    procs = Processes(work)
    run = HostRun()
    try:
        apply_manifests(cluster)  # the CRDs and the pool controller's side
        cluster.kubectl("apply", "-f", str(REPO / "manifests" / "host"))  # what the host install adds
        operator_part(cluster, {"files": [{"path": DRAIN_FILE, "actions": [{"type": "Drain"}]}]})
        add_node(cluster, NODE, {"node-role.kubernetes.io/worker": ""})
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(WORKER_POOL))
        base = machineconfig("00-worker-base", "/etc/mcd-kube/base.conf", "base")
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(base))
        controller = cluster.token_kubeconfig("controller", cluster.token(CONTROLLER_SA, NAMESPACE))
        start_controller(procs, "replica-1", controller)
        wait("the pool rendered", lambda: bool(pool_target(cluster)), 60, procs)
        run.old = pool_target(cluster)
        root, kubeconfig = _install_host_node(cluster, work, run.old)
        argv, env = _unit_start(root, kubeconfig)
        procs.spawn(f"agent-{NODE}", argv, env=env)
        wait(f"{NODE} Done on {run.old}", lambda: done_on(cluster, NODE, run.old), 90, procs)
        # an update through the controller's drain (no --builtin-drainer in the unit)
        change = machineconfig("50-worker-drain", DRAIN_FILE, "drained")
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(change))
        wait("the pool rendered again", lambda: pool_target(cluster) not in ("", run.old), 60, procs)
        run.new = pool_target(cluster)
        wait(f"{NODE} Done on {run.new}", lambda: done_on(cluster, NODE, run.new), 120, procs)
        run.requests = [
            (r["verb"], r["requestURI"], int(r["responseStatus"]["code"]))
            for r in cluster.audit_records()
            if r.get("user", {}).get("username") == NODE_USER and "responseStatus" in r
        ]
        yield run
    finally:
        procs.stop()
        cluster.stop()


# the answers of 400 and more that are the API's ordinary concurrency, not a refusal (the same
# as tests/kube/test_deployed.py's for the DaemonSet's identities)
EXPECTED = {
    ("get", f"/machineconfignodes/{NODE}", 404): "the agent reads its MachineConfigNode before it makes it",
    ("update", f"/machineconfignodes/{NODE}/status", 409): "the agent and the pool controller both write "
    "its conditions (resourceVersion preconditions): the loser reads again and retries",
    ("patch", f"/api/v1/nodes/{NODE}", 409): "the node writer's patches carry the resourceVersion it read: a "
    "write by the controller in between is read again and retried",
}


def test_the_node_identity_updates_its_node_and_is_refused_nothing(host_run: HostRun) -> None:
    requests = host_run.requests
    record_figure(f"host identity: {len(requests)} requests as {NODE_USER}, {host_run.old} -> {host_run.new}")
    assert [r for r in requests if r[2] == 403] == []
    unexpected = [
        (verb, uri, code)
        for verb, uri, code in requests
        if code >= 400 and not any(v == verb and p in uri and c == code for v, p, c in EXPECTED)
    ]
    assert unexpected == []


def test_it_read_and_wrote_everything_with_that_identity(host_run: HostRun) -> None:
    """What the ServiceAccount does for the DaemonSet, the node's certificate did here."""
    seen = sorted({(verb, uri.split("?")[0], code) for verb, uri, code in host_run.requests})

    def did(verbs: tuple[str, ...], part: str) -> bool:
        return any(v in verbs and part in path and code < 300 for v, path, code in seen)

    assert did(("get", "list", "watch"), f"{MC_API}/machineconfigs"), seen  # the rendered configs
    assert did(("patch",), f"/api/v1/nodes/{NODE}"), seen  # its Node's annotations
    assert did(("create",), "/events"), seen  # its Events
    assert did(("create", "update"), "/machineconfignodes"), seen  # its MachineConfigNode
    assert did(("update",), f"/machineconfignodes/{NODE}/status"), seen
    assert did(("get",), "/machineconfigurations/cluster"), seen  # the node disruption policy
