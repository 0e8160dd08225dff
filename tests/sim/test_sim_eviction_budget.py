"""The Eviction subresource spends the budget as kube-apiserver's does: each eviction takes one
disruption off `disruptionsAllowed` and records the pod in `disruptedPods`, and the budget's
floor is scaled on the pods' controller, so a second eviction finds none left until the evicted
pod is gone and its replacement is Ready."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.errors import ApiError
from mcd_sim.apiserver.lifecycle import DISRUPTED_POD_TIMEOUT, pdb_status, running_status
from mcd_sim.apiserver.objectrules import rfc3339

NS = "default"


@pytest.fixture
def web() -> Iterator[ApiServer]:
    """Three Ready pods of a ReplicaSet (replicas 3), a budget allowing one disruption."""
    with ApiServer(tls=False) as sim:
        sim.add_node("worker-0")
        rs = sim.put(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        for i in range(3):
            sim.put(_pod(f"web-{i}", rs["metadata"]["uid"]))
        sim.put(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        yield sim


def _pod(name: str, owner_uid: str, **status: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app": "web"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": "worker-0", "containers": [{"name": "c", "image": "registry.example/app:1"}]},
    }
    if status:
        pod["status"] = status
    return pod


def _budget(sim: ApiServer) -> dict[str, Any]:
    pdb = sim.get("PodDisruptionBudget", "web", NS)
    assert pdb is not None
    return dict(pdb["status"])


def _refused(sim: ApiServer, name: str) -> bool:
    try:
        sim.evict(NS, name, grace_seconds=0)
    except ApiError as exc:
        assert exc.code == 429
        return True
    return False


def test_second_eviction_waits_for_the_replacement(web: ApiServer) -> None:
    assert _budget(web)["disruptionsAllowed"] == 1
    assert not _refused(web, "web-0")  # gone at once (grace 0): the floor stays on 3 replicas
    status = _budget(web)
    assert (status["disruptionsAllowed"], status["currentHealthy"], status["desiredHealthy"]) == (0, 2, 2)
    assert _refused(web, "web-1")
    uid = web.get("ReplicaSet", "web", NS)["metadata"]["uid"]  # type: ignore[index]
    web.put(_pod("web-3", uid, phase="Pending"))
    assert _refused(web, "web-1")  # a replacement not Ready yet does not count
    web.patch("Pod", "web-3", {"status": running_status({"spec": {}}, web.store.clock())}, NS, status=True)
    assert _budget(web)["disruptionsAllowed"] == 1
    assert not _refused(web, "web-1")
    assert _refused(web, "web-2")


def test_an_eviction_whose_delete_fails_keeps_its_disruption_spent(web: ApiServer) -> None:
    with pytest.raises(ApiError) as failed:
        web.lifecycle.evict(NS, "web-0", {"deleteOptions": {"preconditions": {"uid": "not-this-pod"}}})
    assert failed.value.code == 409
    status = _budget(web)
    assert list(status["disruptedPods"]) == ["web-0"]
    assert (status["disruptionsAllowed"], status["currentHealthy"]) == (0, 2)
    assert _refused(web, "web-1")


def test_disrupted_pods_are_forgotten_when_terminating_or_after_the_timeout() -> None:
    now = 1_000_000.0
    pods = [
        {"metadata": {"name": f"web-{i}", "labels": {"app": "web"}}, **{"status": running_status({}, now)}}
        for i in range(3)
    ]
    pdb = {
        "metadata": {"name": "web", "generation": 1},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptedPods": {"web-0": rfc3339(now)}},
    }
    held = pdb_status(pdb, pods, now + 1)
    assert (held["disruptedPods"], held["currentHealthy"], held["disruptionsAllowed"]) == (
        {"web-0": rfc3339(now)},
        2,
        0,
    )
    expired = pdb_status(pdb, pods, now + DISRUPTED_POD_TIMEOUT + 1)
    assert "disruptedPods" not in expired and expired["disruptionsAllowed"] == 1
    pods[0]["metadata"]["deletionTimestamp"] = rfc3339(now)
    terminating = pdb_status(pdb, pods, now + 1)
    assert "disruptedPods" not in terminating and terminating["currentHealthy"] == 2
