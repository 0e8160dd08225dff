"""The pool controller's shipped RBAC (`manifests/pool-controller/01-rbac.yaml`) against what it
asks of the API server, both ways.

The controller runs its passes as its ServiceAccount against the stand-in API server, with the
shipped roles enforced and the audit log on, through
its repertoire: the Lease created, renewed, released; a pool rendered (the configs listed, the
rendered one created, the pool's target and status patched); its nodes listed and retargeted; a
drain (the pods listed, a cordon, an eviction a PodDisruptionBudget refuses, then allows) and an
uncordon. Every request it made must be allowed by the roles bound to its ServiceAccount, and
every verb they grant must have been used.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from fakes import Replicas, add_nodes, agent_step, mc, pool
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.authn import service_account
from test_pool_controller_manifests import controller_objects
from test_rbac import _allows, _calls, _grants

from mcd.controller import rollout
from mcd.controller.drain import DrainTiming
from mcd.controller.run import ControllerOptions, PoolController
from mcd.kube.client import CONTROLLER_USER_AGENT, KubeClient
from mcd.kube.lease import LeaseSettings
from mcd.node import machineconfignode as mcn

ACCOUNT = "machine-config-controller"
RBAC_KINDS = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
NS = "openshift-machine-config-operator"


def _run_the_repertoire(sim: ApiServer, kubeconfig: Path) -> bool:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 2, "rendered-worker-boot")
    for name in ("worker-0", "gone"):  # the agents' MachineConfigNodes: one to own, one to delete
        sim.put(mcn.new_object(name, "worker", "rendered-worker-boot"))
    web = Replicas(sim, "web", 2)
    web.reconcile()
    sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"namespace": "shop", "name": "web"},
             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})  # fmt: skip
    api = KubeClient.from_kubeconfig(str(kubeconfig), CONTROLLER_USER_AGENT)
    # a refused eviction names its budgets at once (a list of them), not after 30 s
    options = ControllerOptions(LeaseSettings(NS, "machine-config-controller", "me"),
                                drain_timing=DrainTiming(blocked_notice=0))  # fmt: skip
    controller = PoolController(api, options)
    controller.drains.retry_seconds = 0.0
    refused = False
    try:
        assert controller.elector.tick()
        controller.caches.start()  # the informers: each collection listed, then watched
        sim.wait_for(controller.caches.synced, timeout=30)
        for _ in range(100):
            assert controller.elector.tick()
            controller.one_pass()
            refused = refused or bool(controller.drains.blocked)
            if refused:  # the budget said no once: let it allow one disruption from now on
                sim.patch("PodDisruptionBudget", "web", {"spec": {"minAvailable": 1}}, "shop")
            for node in sim.objects("Node"):
                agent_step(sim, node["metadata"]["name"])
            web.reconcile()
            target = rollout.pool_target(sim.get("MachineConfigPool", "worker") or {})
            if target and all(rollout.is_updated(n, target) for n in sim.objects("Node")):
                controller.one_pass()  # the status says so
                break
        else:
            raise AssertionError("the rollout did not finish")
    finally:
        controller.caches.stop()
        controller.elector.release()
        api.close()
    return refused


def test_the_shipped_roles_grant_exactly_what_the_controller_asks(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    with ApiServer(audit_log_path=audit) as sim:
        # as its ServiceAccount, under the shipped roles alone: a request they refuse fails the run
        token = sim.authn.add_token(service_account(NS, ACCOUNT))
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(sim.kubeconfig(user={"token": token})))
        sim.enforce_rbac([o for o in controller_objects() if o["kind"] in RBAC_KINDS])
        refused = _run_the_repertoire(sim, kubeconfig)
    assert refused, "no eviction was refused: the repertoire is incomplete"
    grants = _grants(objs=controller_objects(), account=ACCOUNT)
    calls = list(_calls(audit, CONTROLLER_USER_AGENT.split("/")[0] + "/"))
    assert calls
    assert {c.user for c in calls} == {f"system:serviceaccount:{NS}:{ACCOUNT}"}
    assert [c.uri for c in calls if c.code == 403] == []
    denied = sorted({f"{c.verb} {c.uri}" for c in calls if not any(_allows(g, c) for g in grants)})
    assert denied == [], "requests the shipped roles do not allow"
    unused = sorted(
        {(g.scope, g.group, g.resource, g.verb) for g in grants if not any(_allows(g, c) for c in calls)}
    )
    assert unused == [], "granted but never requested"
