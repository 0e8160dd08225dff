"""mcd deployed on a RealCluster as a user deploys it, without a kubelet or controller-manager:
the shipped manifests applied with kubectl, agents as their DaemonSet runs them (`mcd start` on a
sandbox root, reading with the DaemonSet's ServiceAccount token, writing its Node and Events with
the node's own client certificate from the root's /var/lib/kubelet/kubeconfig) and pool
controller replicas as their Deployment runs them (`mcd pool-controller` with its
ServiceAccount's token). `Kubelet` plays the parts no process here plays: it marks the nodes and
the workload's pods Ready, force-deletes evicted pods (they stay Terminating without a kubelet),
starts a replacement once a node is schedulable again, and writes the PodDisruptionBudget's status
as the disruption controller would.

Used by tests/kube and by scripts/kube/demo.py. Nothing here belongs to the product.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from realcluster import REPO, ClusterError, RealCluster, free_ports, wait_for

NAMESPACE = "openshift-machine-config-operator"
AGENT_SA = "machine-config-daemon"
CONTROLLER_SA = "machine-config-controller"
MC_API = "/apis/machineconfiguration.openshift.io/v1"
MERGE_PATCH = "application/merge-patch+json"
CURRENT = "machineconfiguration.openshift.io/currentConfig"
DESIRED = "machineconfiguration.openshift.io/desiredConfig"
STATE = "machineconfiguration.openshift.io/state"
DRAIN_FILE = "/etc/mcd-kube/drained.conf"  # a change to it only drains (see deploy)
# the worker pool a user applies: its nodes by role, one at a time
WORKER_POOL = {
    "apiVersion": "machineconfiguration.openshift.io/v1",
    "kind": "MachineConfigPool",
    "metadata": {"name": "worker"},
    "spec": {
        "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
        "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
        "maxUnavailable": 1,
    },
}
CRDS = (
    "machineconfigs.machineconfiguration.openshift.io",
    "machineconfigpools.machineconfiguration.openshift.io",
    "machineconfignodes.machineconfiguration.openshift.io",
    "controllerconfigs.machineconfiguration.openshift.io",
    "machineconfigurations.operator.openshift.io",
)

Obj = dict[str, Any]


def apply_manifests(cluster: RealCluster) -> str:
    """`kubectl apply -f manifests/` then `-f manifests/pool-controller/`, as the README says;
    returns kubectl's output, and waits until every CRD is established."""
    out = cluster.kubectl("apply", "-f", str(REPO / "manifests")).stdout
    out += cluster.kubectl("apply", "-f", str(REPO / "manifests" / "pool-controller")).stdout

    def established() -> bool:
        for name in CRDS:
            got = cluster.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (got.json().get("status") or {}).get("conditions") or [] if got.status == 200 else []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for("the shipped CRDs established", established, 60)
    return out


def embedded_kubeconfig(cluster: RealCluster, user: str, cert: Path, key: Path) -> str:
    """A kubeconfig carrying its certificates inline, as a node's kubelet kubeconfig under a
    sandbox root must (paths in it would be read relative to the agent's host, not the root)."""

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "real",
                "cluster": {"server": cluster.url, "certificate-authority-data": b64(cluster.ca)},
            }
        ],
        "users": [
            {"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}
        ],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
        "current-context": "real",
    }
    return json.dumps(config) + "\n"


def operator_part(cluster: RealCluster, user_policy: Obj | None = None) -> None:
    """MachineConfiguration/cluster and its status, the operator's part that no process here
    plays (the agents wait for its nodeDisruptionPolicyStatus)."""
    from mcd.policy import DEFAULT_POLICIES, merge_policies

    path = "/apis/operator.openshift.io/v1/machineconfigurations"
    spec: Obj = {"logLevel": "Normal", "operatorLogLevel": "Normal", "managementState": "Managed"}
    if user_policy:
        spec["nodeDisruptionPolicy"] = user_policy
    made = cluster.request(
        "POST",
        path,
        {
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"},
            "spec": spec,
        },
    )
    if made.status != 201:
        raise ClusterError(f"MachineConfiguration: {made.status} {made.body!r}")
    obj = made.json()
    policies = merge_policies(DEFAULT_POLICIES, user_policy or {}, ("spec", "nodeDisruptionPolicy"))
    obj["status"] = {
        "observedGeneration": obj["metadata"].get("generation", 1),
        "nodeDisruptionPolicyStatus": {"clusterPolicies": policies.to_api()},
    }
    put = cluster.request("PUT", f"{path}/cluster/status", obj)
    if put.status != 200:
        raise ClusterError(f"MachineConfiguration status: {put.status} {put.body!r}")


def add_node(cluster: RealCluster, name: str, labels: dict[str, str]) -> None:
    """A Node as the admin creates it, then marked Ready as its kubelet would (the server adds
    the node.kubernetes.io/not-ready taint at creation; with no node lifecycle controller it
    stays, and nothing here schedules by taints)."""
    made = cluster.request(
        "POST",
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
    )
    if made.status != 201:
        raise ClusterError(f"node {name}: {made.status} {made.body!r}")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
             "lastTransitionTime": now}  # fmt: skip
    patched = cluster.request(
        "PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [ready]}}, content_type=MERGE_PATCH
    )
    if patched.status != 200:
        raise ClusterError(f"node {name} status: {patched.status} {patched.body!r}")


def node_annotations(cluster: RealCluster, node: str) -> dict[str, str]:
    got = cluster.request("GET", f"/api/v1/nodes/{node}")
    return dict(got.json()["metadata"].get("annotations") or {}) if got.status == 200 else {}


def done_on(cluster: RealCluster, node: str, config: str) -> bool:
    a = node_annotations(cluster, node)
    return a.get(CURRENT) == config and a.get(DESIRED) == config and a.get(STATE) == "Done"


class Processes:
    """The mcd processes of a scenario; each logs to a file; stop() ends them (SIGTERM, then
    SIGKILL) and returns nothing of theirs running."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with (self.workdir / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mcd", *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def secure_port_file(root: Path) -> Path:
    """Where the test notes the port of a node's scrape endpoint (beside its root, not in it)."""
    return root.parent / f"{root.name}.secure-metrics-port"


def start_agent(
    cluster: RealCluster,
    procs: Processes,
    node: str,
    root: Path,
    reader: Path,
    *,
    extra: tuple[str, ...] = (),
) -> None:
    """`mcd start` as the DaemonSet runs it (--builtin-drainer), on `root`: the reader
    kubeconfig is the ServiceAccount's token; the root's kubelet kubeconfig is the node's own
    client certificate. `extra` arguments come last (a flag given again there wins)."""
    ident = cluster.node_identity(node)
    assert ident.cert is not None and ident.key is not None
    kubelet = root / "var" / "lib" / "kubelet" / "kubeconfig"
    kubelet.parent.mkdir(parents=True, exist_ok=True)
    kubelet.write_text(embedded_kubeconfig(cluster, f"system:node:{node}", ident.cert, ident.key))
    kubelet.chmod(0o600)
    # the scrape endpoint over TLS, as the DaemonSet serves it on 9001 (a free port here)
    [secure] = free_ports(1)
    secure_port_file(root).write_text(str(secure))
    procs.spawn(
        f"agent-{node}",
        [
            "start", "--node-name", node, "--root-mount", str(root), "--kubeconfig", str(reader),
            "--builtin-drainer", "--metrics-url", "127.0.0.1:0", "--kubelet-healthz-enabled=false", "-v",
            "--secure-metrics-url", f"127.0.0.1:{secure}", *extra,
        ],
        env={"POD_NAMESPACE": NAMESPACE, "POD_NAME": f"machine-config-daemon-{node}"},
    )  # fmt: skip


def start_controller(procs: Processes, replica: str, kubeconfig: Path, lease_duration: float = 4.0) -> None:
    """One `mcd pool-controller` replica as the Deployment runs it, with its ServiceAccount's token."""
    procs.spawn(
        f"controller-{replica}",
        ["pool-controller", "--kubeconfig", str(kubeconfig), "--identity", replica,
         "--lease-duration", str(lease_duration), "--interval", "1", "-v"],
        env={"POD_NAMESPACE": NAMESPACE, "POD_NAME": replica},
    )  # fmt: skip


def lease_holder(cluster: RealCluster) -> str:
    got = cluster.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/machine-config-controller"
    )
    return str((got.json().get("spec") or {}).get("holderIdentity") or "") if got.status == 200 else ""


class Kubelet:
    """The kubelets and the disruption controller of a workload: one pod per node (label
    app=web, named web-NODE), kept Running and Ready; an evicted pod, Terminating for ever
    without a kubelet, is force-deleted here; a node's pod is started again once the node is
    schedulable; the PodDisruptionBudget's status is written as the disruption controller does.
    It also samples how many nodes are unavailable at once."""

    def __init__(self, cluster: RealCluster, namespace: str, nodes: list[str], min_available: int) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.nodes = nodes
        self.min_available = min_available
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self.force_deleted: list[str] = []
        self.max_unavailable_seen = 0
        self.errors: list[str] = []
        # while set, evicted pods stay Terminating (the drain waiting on them): a test holds a
        # node mid-drain with it, for as long as it needs
        self.hold = threading.Event()

    def setup(self) -> None:
        ns = self.ns
        self.cluster.kubectl("create", "namespace", ns)
        # no controller-manager: no `default` ServiceAccount, and none to make its token Secret
        self.cluster.kubectl("create", "serviceaccount", "web", "-n", ns)
        pdb = {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"minAvailable": self.min_available, "selector": {"matchLabels": {"app": "web"}}},
        }
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pdb))
        for node in self.nodes:
            self._start_pod(node)
        self._pdb_status()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Ends the loop; safe before start() (a set-up that failed early is torn down too)."""
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=30)

    def _start_pod(self, node: str) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"web-{node}", "namespace": self.ns, "labels": {"app": "web"}},
            "spec": {
                "nodeName": node,
                "serviceAccountName": "web",
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "web", "image": "example.invalid/web:1"}],
            },
        }
        made = self.cluster.request("POST", f"/api/v1/namespaces/{self.ns}/pods", pod)
        if made.status != 201:
            raise ClusterError(f"pod web-{node}: {made.status} {made.body!r}")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}}  # fmt: skip
        patched = self.cluster.request(
            "PATCH", f"/api/v1/namespaces/{self.ns}/pods/web-{node}/status", status, content_type=MERGE_PATCH
        )
        if patched.status != 200:
            raise ClusterError(f"pod web-{node} status: {patched.status} {patched.body!r}")

    def terminating(self) -> list[str]:
        """The pods evicted (or deleted) and not gone yet."""
        return [p["metadata"]["name"] for p in self._pods() if "deletionTimestamp" in p["metadata"]]

    def _pods(self) -> list[Obj]:
        got = self.cluster.request("GET", f"/api/v1/namespaces/{self.ns}/pods")
        return list(got.json()["items"]) if got.status == 200 else []

    def _pdb_status(self) -> None:
        path = f"/apis/policy/v1beta1/namespaces/{self.ns}/poddisruptionbudgets/web"
        got = self.cluster.request("GET", path)
        if got.status != 200:
            return
        pdb = got.json()
        healthy = sum(
            1
            for p in self._pods()
            if "deletionTimestamp" not in p["metadata"] and (p.get("status") or {}).get("phase") == "Running"
        )
        want = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "currentHealthy": healthy,
            "desiredHealthy": self.min_available,
            "expectedPods": len(self.nodes),
            "disruptionsAllowed": max(0, healthy - self.min_available),
        }
        status = pdb.get("status") or {}
        if all(status.get(k) == v for k, v in want.items()) and not status.get("disruptedPods"):
            return
        pdb["status"] = want  # a conflict (an eviction changed it meanwhile) is redone next pass
        self.cluster.request("PUT", f"{path}/status", pdb)

    def _unavailable(self) -> int:
        got = self.cluster.request("GET", "/api/v1/nodes")
        if got.status != 200:
            return 0
        count = 0
        for node in got.json()["items"]:
            if node["metadata"]["name"] not in self.nodes:
                continue
            a = node["metadata"].get("annotations") or {}
            if (
                node["spec"].get("unschedulable")
                or a.get(CURRENT) != a.get(DESIRED)
                or a.get(STATE) != "Done"
            ):
                count += 1
        return count

    def _pass(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self._pods()}
        for name, pod in pods.items():
            if "deletionTimestamp" in pod["metadata"] and not self.hold.is_set():
                # no kubelet here to end the containers and confirm: play it
                gone = self.cluster.request(
                    "DELETE", f"/api/v1/namespaces/{self.ns}/pods/{name}", {"gracePeriodSeconds": 0}
                )
                if gone.status in (200, 202):
                    self.force_deleted.append(name)
        self._pdb_status()
        got = self.cluster.request("GET", "/api/v1/nodes")
        if got.status == 200:
            schedulable = {
                n["metadata"]["name"] for n in got.json()["items"] if not n["spec"].get("unschedulable")
            }
            for node in self.nodes:
                if f"web-{node}" not in pods and node in schedulable:
                    with contextlib.suppress(ClusterError):  # a pod still being deleted: next pass
                        self._start_pod(node)
        self.max_unavailable_seen = max(self.max_unavailable_seen, self._unavailable())

    def _loop(self) -> None:
        while not self.stop_event.wait(0.2):
            try:
                self._pass()
            except (OSError, ValueError, KeyError) as exc:  # the API server restarting
                self.errors.append(repr(exc))


def machineconfig(name: str, path: str, text: str) -> Obj:
    """A worker MachineConfig of one file."""
    file = {"path": path, "mode": 420, "overwrite": True, "contents": {"source": "data:," + text}}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [file]}}},
    }


def pool_target(cluster: RealCluster) -> str:
    """The rendered config the worker pool's controller targets (spec.configuration)."""
    got = cluster.request("GET", f"{MC_API}/machineconfigpools/worker")
    spec = (got.json().get("spec") or {}) if got.status == 200 else {}
    return str((spec.get("configuration") or {}).get("name") or "")


def wait(what: str, check: Callable[[], bool], timeout: float, procs: Processes) -> None:
    """wait_for, and on a timeout the end of every mcd process's log in the error."""
    try:
        wait_for(what, check, timeout, interval=0.2)
    except ClusterError as exc:
        logs = "\n".join(f"--- {n}\n{procs.log(n)[-3000:]}" for n in procs.procs)
        raise ClusterError(f"{exc}\n{logs}") from exc


def deploy(
    cluster: RealCluster,
    work: Path,
    procs: Processes,
    kubelet: Kubelet,
    nodes: list[str],
    *,
    agent_extra: tuple[str, ...] = (),
) -> tuple[str, float]:
    """What a user does, then mcd: the manifests applied; the operator's MachineConfiguration
    (with a Drain policy for DRAIN_FILE: a sandbox node has no reboot to take); the Nodes; the
    worker pool, maxUnavailable 1, and its first MachineConfig; the workload; two pool controller
    replicas, which render the pool; each node provisioned with that config (`--once-from` and
    node-annotations.json, as a joining node) and its agent started, until every node is Done.
    Returns the first rendered config and time.time() when mcd's first process started."""
    from mcd_sim.sandbox import make_sandbox_root
    from mcd_sim.simulate import bootstrap_node

    apply_manifests(cluster)
    operator_part(cluster, {"files": [{"path": DRAIN_FILE, "actions": [{"type": "Drain"}]}]})
    for node in nodes:
        add_node(cluster, node, {"node-role.kubernetes.io/worker": ""})
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(WORKER_POOL))
    base = machineconfig("00-worker-base", "/etc/mcd-kube/base.conf", "base")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(base))
    kubelet.setup()
    controller_config = cluster.token_kubeconfig("controller", cluster.token(CONTROLLER_SA, NAMESPACE))
    agent_config = cluster.token_kubeconfig("agent", cluster.token(AGENT_SA, NAMESPACE))
    started = time.time()
    for replica in ("replica-1", "replica-2"):
        start_controller(procs, replica, controller_config)
    wait("the pool rendered", lambda: bool(pool_target(cluster)), 60, procs)
    old = pool_target(cluster)
    rendered = cluster.request("GET", f"{MC_API}/machineconfigs/{old}").json()
    old_file = work / "rendered-old.json"
    old_file.write_text(json.dumps(rendered))
    for node in nodes:
        root = make_sandbox_root(work / "nodes" / node)
        bootstrap_node(root, old_file, old)
        start_agent(cluster, procs, node, root, agent_config, extra=agent_extra)
    wait(f"every node Done on {old}", lambda: all(done_on(cluster, n, old) for n in nodes), 90, procs)
    return old, started
