"""The store's kube-apiserver semantics, without HTTP."""

from __future__ import annotations

import pytest
from mcd_sim.apiserver import ApiError, resource_type
from mcd_sim.apiserver.store import Store

NODES = resource_type("Node")
MC = resource_type("MachineConfig")
MCFG = resource_type("MachineConfiguration")
NS = resource_type("Namespace")
PODS = resource_type("Pod")


def test_every_write_gets_a_higher_resource_version() -> None:
    store = Store()
    a = store.create(NODES, "", {"metadata": {"name": "a"}})
    b = store.create(NODES, "", {"metadata": {"name": "b"}})
    a2 = store.mutate(NODES, "", "a", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "1"}}})
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, a2)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    _, list_rv = store.select(NODES, None)
    assert list_rv == rvs[-1]


def test_stale_resource_version_is_a_conflict() -> None:
    store = Store()
    node = store.create(NODES, "", {"metadata": {"name": "n"}})
    store.update(NODES, "", "n", {**node, "metadata": {**node["metadata"], "labels": {"a": "1"}}})
    with pytest.raises(ApiError) as err:
        store.update(NODES, "", "n", {**node, "metadata": {**node["metadata"], "labels": {"a": "2"}}})
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert err.value.message == (
        'Operation cannot be fulfilled on nodes "n": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )
    assert store.get(NODES, "", "n")["metadata"]["labels"] == {"a": "1"}


def test_create_twice_is_already_exists_and_missing_is_not_found() -> None:
    store = Store()
    store.create(MC, "", {"metadata": {"name": "mc"}})
    with pytest.raises(ApiError) as exists:
        store.create(MC, "", {"metadata": {"name": "mc"}})
    assert (exists.value.code, exists.value.reason) == (409, "AlreadyExists")
    assert exists.value.message == 'machineconfigs.machineconfiguration.openshift.io "mc" already exists'
    with pytest.raises(ApiError) as missing:
        store.get(NODES, "", "nope")
    assert (missing.value.code, missing.value.message) == (404, 'nodes "nope" not found')


def test_generation_moves_on_spec_changes_only() -> None:
    store = Store()
    obj = store.create(MCFG, "", {"metadata": {"name": "cluster"}, "spec": {"logLevel": "Normal"}})
    assert obj["metadata"]["generation"] == 1
    obj = store.mutate(
        MCFG, "", "cluster", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"a": "b"}}}
    )
    assert obj["metadata"]["generation"] == 1
    obj = store.mutate(
        MCFG, "", "cluster", lambda o: {**o, "status": {"observedGeneration": 1}}, subresource="status"
    )
    assert obj["metadata"]["generation"] == 1 and obj["status"] == {"observedGeneration": 1}
    obj = store.mutate(MCFG, "", "cluster", lambda o: {**o, "spec": {"logLevel": "Debug"}})
    assert obj["metadata"]["generation"] == 2


def test_status_subresource_splits_writes() -> None:
    store = Store()
    store.create(MCFG, "", {"metadata": {"name": "cluster"}, "spec": {"a": 1}, "status": {"ignored": True}})
    assert "status" not in store.get(MCFG, "", "cluster")  # a custom resource's status is not set on create
    store.mutate(
        MCFG, "", "cluster", lambda o: {**o, "spec": {"a": 9}, "status": {"s": 1}}, subresource="status"
    )
    assert store.get(MCFG, "", "cluster")["spec"] == {"a": 1}
    store.mutate(MCFG, "", "cluster", lambda o: {**o, "spec": {"a": 2}, "status": {"s": 2}})
    obj = store.get(MCFG, "", "cluster")
    assert obj["spec"] == {"a": 2} and obj["status"] == {"s": 1}


def test_no_op_write_keeps_the_resource_version() -> None:
    store = Store()
    node = store.create(NODES, "", {"metadata": {"name": "n"}})
    again = store.mutate(NODES, "", "n", lambda o: o)
    assert again["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]


def test_generate_name_and_namespace_must_exist() -> None:
    store = Store()
    store.create(NS, "", {"metadata": {"name": "default"}})
    pod = store.create(PODS, "default", {"metadata": {"generateName": "web-"}, "spec": {"containers": []}})
    assert pod["metadata"]["name"].startswith("web-") and len(pod["metadata"]["name"]) == len("web-") + 5
    with pytest.raises(ApiError) as err:
        store.create(PODS, "nowhere", {"metadata": {"name": "x"}})
    assert err.value.message == 'namespaces "nowhere" not found'


def test_watch_resumes_from_a_resource_version_and_expires_old_ones() -> None:
    store = Store(history=3)
    first = store.create(NODES, "", {"metadata": {"name": "a"}})
    rv = int(first["metadata"]["resourceVersion"])
    store.create(NODES, "", {"metadata": {"name": "b"}})
    watcher, backlog = store.watch(NODES, None, rv)
    assert [(e.type, e.obj["metadata"]["name"]) for e in backlog] == [("ADDED", "b")]
    store.delete(NODES, "", "b")
    event = watcher.events.get(timeout=1)
    assert event is not None and (event.type, event.obj["metadata"]["name"]) == ("DELETED", "b")
    store.unwatch(watcher)
    for i in range(4):
        store.create(NODES, "", {"metadata": {"name": f"x{i}"}})
    with pytest.raises(ApiError) as err:
        store.watch(NODES, None, rv)
    assert (err.value.code, err.value.reason) == (410, "Expired")


def test_pod_on_a_node_terminates_gracefully() -> None:
    store = Store()
    store.create(NS, "", {"metadata": {"name": "default"}})
    store.create(PODS, "default", {"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": []}})
    obj, gone = store.delete(PODS, "default", "p", grace_seconds=30)
    assert not gone and obj["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.finish_termination(PODS, "default", "p", obj["metadata"]["uid"])
    assert store.find(PODS, "default", "p") is None


def test_finalizers_hold_deletion_until_removed() -> None:
    store = Store()
    store.create(MC, "", {"metadata": {"name": "mc", "finalizers": ["x"]}})
    _, gone = store.delete(MC, "", "mc")
    assert not gone and store.get(MC, "", "mc")["metadata"]["deletionTimestamp"]
    store.mutate(MC, "", "mc", lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}})
    assert store.find(MC, "", "mc") is None


def test_terminated_pod_goes_when_its_last_finalizer_does() -> None:
    store = Store()
    store.create(NS, "", {"metadata": {"name": "default"}})
    store.create(PODS, "default", {"metadata": {"name": "p", "finalizers": ["x"]}, "spec": {"nodeName": "n"}})
    obj, gone = store.delete(PODS, "default", "p", grace_seconds=0)
    assert not gone
    # the finalizer holds it past its (zero) grace period
    assert not store.finish_termination(PODS, "default", "p", obj["metadata"]["uid"])
    store.mutate(PODS, "default", "p", lambda o: {**o, "metadata": {**o["metadata"], "finalizers": None}})
    assert store.find(PODS, "default", "p") is None
