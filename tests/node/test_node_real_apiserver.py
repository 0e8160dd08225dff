"""The real node on the real server (issue 27, item 3): a booted nspawn node whose kubelet
kubeconfig is a real `system:node:NAME` client certificate of kube-apiserver v1.20.2 (the kube
tier's, tests/kube/realcluster.py), and whose agent reads as the shipped ServiceAccount's token
under the shipped RBAC, as the host install runs it. The node goes from one config to another and
ends Done; the audit log shows the node identity's writes and no 403 for it.

Runs when the server's binary is at hand (MCD_KUBE_TEST=1 builds it, else the cached one is
used); otherwise it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from nodeharness import AGENT_UNIT, NODE_NAME, Cluster, Node, deadline_poll, done_on, scenario_on

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kube"))
from realcluster import (
    Identity,
    RealCluster,
    build_apiserver,
    cached_apiserver,
    inline_kubeconfig,
)

pytestmark = pytest.mark.allow_commands

REPO = Path(__file__).resolve().parents[2]
NS = "openshift-machine-config-operator"
A, B = "rendered-worker-a", "rendered-worker-b"
A_CONF, B_CONF = "/etc/mcd-node/a.conf", "/etc/mcd-node/b.conf"
READER = "/etc/mcd-node/reader.kubeconfig"
NODE_USER = f"system:node:{NODE_NAME}"
DAEMON_USER = f"system:serviceaccount:{NS}:machine-config-daemon"


def _apiserver() -> Path | None:
    if os.environ.get("MCD_KUBE_TEST") == "1":
        return build_apiserver()
    return cached_apiserver()


class RealApiCluster(Cluster):
    """The harness's Cluster (kubectl as the controller, the node stream, the drain handshake)
    on a real kube-apiserver: kubectl is the admin, the node has its own certificate and the
    agent reads with the ServiceAccount's token."""

    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(workdir)
        self.real = RealCluster(binary, keep=os.environ.get("MCD_KUBE_KEEP") == "1")

    def start(self) -> RealApiCluster:
        self.real.start()
        self.kubeconfig.write_text(self.real.admin_kubeconfig.read_text())
        for folder in (REPO / "manifests", REPO / "manifests" / "pool-controller"):
            self.kubectl("apply", "-f", str(folder))
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        labels = {"node-role.kubernetes.io/worker": ""}
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node, "labels": labels}}
        self.create(node)
        # the harness's controller: follow the node, answer the drain handshake
        self._thread = threading.Thread(target=self._follow, name="controller", daemon=True)
        self._thread.start()
        self.wait_node(lambda n: True, 30, "the node in the watch")
        return self

    def stop(self) -> None:
        super().stop()
        self.real.stop()

    def kubelet_kubeconfig(self) -> str:
        return inline_kubeconfig(self.real, NODE_USER, self.real.node_identity(self.node))

    def reader_kubeconfig(self) -> str:
        token = self.real.token("machine-config-daemon", NS, duration="2h")
        return inline_kubeconfig(self.real, DAEMON_USER, Identity(token=token))

    def audit(self, user: str) -> list[tuple[str, str, int]]:
        """(verb, requestURI, code) of every request `user` made."""
        return [
            (r["verb"], r["requestURI"], int(r["responseStatus"]["code"]))
            for r in self.real.audit_records()
            if r.get("user", {}).get("username") == user and "responseStatus" in r
        ]


@contextlib.contextmanager
def real_scenario(
    name: str, workdir: Path, binary: Path
) -> Iterator[tuple[RealApiCluster, Node, dict[str, Any]]]:
    """nodeharness.scenario's shape, on the real server."""
    with scenario_on(name, workdir, "mcd-real", lambda: RealApiCluster(workdir, binary).start()) as parts:
        yield parts


def config_a() -> dict[str, Any]:
    return mc_object(A, files=[ign_file(A_CONF, "a=1\n")])


def config_b() -> dict[str, Any]:
    return mc_object(B, files=[ign_file(A_CONF, "a=1\n"), ign_file(B_CONF, "b=1\n")])


def test_real_apiserver_node_identity_update_to_done(tmp_path: Path) -> None:
    binary = _apiserver()
    if binary is None:
        pytest.skip(
            "needs kube-apiserver v1.20.2: MCD_KUBE_TEST=1 builds it (scripts/kube/build-apiserver.sh, "
            "about 6 min), or a cached one in /var/tmp/mcd-kube-cache"
        )
    with real_scenario("real_apiserver_node_identity", tmp_path, binary) as (cluster, node, figures):
        config = config_a()
        cluster.create(config)
        cluster.set_desired_config(A)
        kubelet = tmp_path / "kubelet.kubeconfig"
        kubelet.write_text(cluster.kubelet_kubeconfig())
        summary = node.install(config, kubelet)
        assert summary["config"] == A, summary
        # the reader: the shipped ServiceAccount's token (the unit's default reader is the
        # kubelet's kubeconfig; a host install that reads as the account points MCD_KUBECONFIG at it)
        reader = node.root / READER.lstrip("/")
        reader.parent.mkdir(parents=True, exist_ok=True)
        reader.write_text(cluster.reader_kubeconfig())
        reader.chmod(0o600)
        node.add_dropin("50-reader.conf", f"[Service]\nEnvironment=MCD_KUBECONFIG={READER}\n")
        node.boot()
        node.wait_boots(1, 30)
        node.wait_running()
        cluster.wait_node(done_on(A), 120, f"Done on {A} after the first boot")

        cluster.create(config_b())
        cluster.set_desired_config(B)
        cluster.wait_node(done_on(B), 240, f"Done on {B}")
        node.wait_running()
        assert node.sh(f"cat {B_CONF}").stdout == "b=1\n"
        assert node.sh("systemctl is-active " + AGENT_UNIT).stdout.strip() == "active"
        deadline_poll(
            f"the NodeDone event for {B}",
            lambda: any(f"currentConfig {B} to Done" in m for m in cluster.event_messages("NodeDone")),
            60, 0.5,
        )  # fmt: skip

        node_requests = cluster.audit(NODE_USER)
        reader_requests = cluster.audit(DAEMON_USER)
        figures["node_requests"] = len(node_requests)
        figures["reader_requests"] = len(reader_requests)
        # both identities were used as the DaemonSet's agent uses them: the node's writes with
        # its certificate, the reads with the account's token
        assert any(
            v == "patch" and "/api/v1/nodes/" + NODE_NAME in u and c == 200 for v, u, c in node_requests
        )
        assert any(v == "create" and "/events" in u and c == 201 for v, u, c in node_requests), node_requests
        assert any(v in ("get", "list", "watch") and c == 200 for v, _, c in reader_requests), reader_requests
        refused = [r for r in node_requests if r[2] == 403]
        assert not refused, f"the node identity was refused: {refused}"
        refused_reader = [r for r in reader_requests if r[2] == 403]
        assert not refused_reader, f"the ServiceAccount was refused: {refused_reader}"
        assert not cluster.errors, cluster.errors
