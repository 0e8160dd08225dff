"""The official `kubernetes` client against the stand-in: typed models, conflicts, watches."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException
from mcd_sim.apiserver import ApiServer


def test_typed_models_deserialise(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    nodes = core.list_node()
    assert {n.metadata.name for n in nodes.items} >= {"worker-0", "worker-1"}
    node = core.read_node("worker-0")
    assert node.status.node_info.kubelet_version == "v1.31.6"
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert {ns.metadata.name for ns in core.list_namespace().items} >= {
        "default", "kube-system", "openshift-machine-config-operator"
    }  # fmt: skip
    only = core.list_node(field_selector="metadata.name=worker-1")
    assert [n.metadata.name for n in only.items] == ["worker-1"]
    workers = core.list_node(label_selector="node-role.kubernetes.io/worker")
    assert len(workers.items) == len(nodes.items)


def test_patch_node_annotations_and_conflict(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    node = core.read_node("worker-1")
    stale_rv = node.metadata.resource_version
    patched = core.patch_node(
        "worker-1", {"metadata": {"annotations": {"machineconfiguration.openshift.io/state": "Working"}}}
    )
    assert int(patched.metadata.resource_version) > int(stale_rv)
    with pytest.raises(ApiException) as err:
        core.patch_node(
            "worker-1",
            {
                "metadata": {
                    "resourceVersion": stale_rv,
                    "annotations": {"machineconfiguration.openshift.io/state": "x"},
                }
            },
        )
    assert err.value.status == 409
    node.metadata.annotations = {"a": "b"}
    with pytest.raises(ApiException) as err2:
        core.replace_node("worker-1", node)
    assert err2.value.status == 409


def test_custom_objects_and_status_subresource(sim: ApiServer, client: Any) -> None:
    custom = k8s.CustomObjectsApi(client)
    group, version = "operator.openshift.io", "v1"
    created = custom.create_cluster_custom_object(
        group, version, "machineconfigurations",
        {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
         "metadata": {"name": "cluster"}, "spec": {"managementState": "Managed"}},
    )  # fmt: skip
    assert created["metadata"]["generation"] == 1
    custom.patch_cluster_custom_object_status(
        group, version, "machineconfigurations", "cluster", {"status": {"observedGeneration": 1}}
    )
    got = custom.get_cluster_custom_object(group, version, "machineconfigurations", "cluster")
    assert got["status"] == {"observedGeneration": 1}
    with pytest.raises(ApiException) as err:
        custom.get_cluster_custom_object(group, version, "machineconfigurations", "missing")
    assert err.value.status == 404


def test_watch_resumes_after_a_dropped_watch(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    start_rv = core.list_node().metadata.resource_version
    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    ended = False

    def drop_then_change() -> None:
        sim.wait_for(lambda: sim.faults.end_watches() > 0, timeout=10)
        sim.patch("Node", "worker-0", {"metadata": {"labels": {"resumed": "yes"}}})

    threading.Thread(target=drop_then_change, daemon=True).start()
    for event in w.stream(core.list_node, resource_version=start_rv, _request_timeout=30):
        seen.append((event["type"], event["object"].metadata.name))
        if event["object"].metadata.labels.get("resumed") == "yes":
            w.stop()
            ended = True
    assert ended and seen[-1] == ("MODIFIED", "worker-0")


def test_watch_410_then_relist(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    old_rv = core.list_node().metadata.resource_version
    sim.patch("Node", "worker-1", {"metadata": {"labels": {"gen": "1"}}})
    sim.store.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_node, resource_version=old_rv, _request_timeout=10):
            pass
    assert err.value.status == 410
    fresh = core.list_node()  # the client's recovery: list again, watch from the new version
    events = watch.Watch().stream(
        core.list_node, resource_version=fresh.metadata.resource_version, timeout_seconds=1
    )
    assert list(events) == []


def test_watch_bookmarks_and_timeout(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    rv = core.list_node().metadata.resource_version
    resp = core.list_node(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1,
                          _preload_content=False)  # fmt: skip
    lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    resp.release_conn()
    assert lines and all(e["type"] == "BOOKMARK" for e in lines)
    assert lines[-1]["object"]["metadata"]["resourceVersion"] == rv


def test_watch_with_a_selector_sees_objects_enter_and_leave(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    rv = core.list_node(label_selector="canary=yes").metadata.resource_version
    events: list[tuple[str, str]] = []
    w = watch.Watch()

    def collect() -> None:
        for event in w.stream(
            core.list_node, label_selector="canary=yes", resource_version=rv, timeout_seconds=20
        ):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == 3:
                w.stop()

    before = sim.store.watcher_count()
    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    sim.wait_for(lambda: sim.store.watcher_count() > before)
    sim.patch("Node", "worker-0", {"metadata": {"labels": {"canary": "yes"}}})
    sim.patch("Node", "worker-1", {"metadata": {"labels": {"unrelated": "1"}}})  # not selected: no event
    sim.patch("Node", "worker-0", {"metadata": {"annotations": {"touched": "1"}}})
    sim.patch("Node", "worker-0", {"metadata": {"labels": {"canary": None}}})
    reader.join(timeout=20)
    assert events == [("ADDED", "worker-0"), ("MODIFIED", "worker-0"), ("DELETED", "worker-0")]


def test_strategic_merge_patch_of_a_custom_resource_is_415(sim: ApiServer, client: Any) -> None:
    from simkube import raw_request

    sim.put({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
             "metadata": {"name": "00-smp"}, "spec": {}})  # fmt: skip
    path = "/apis/machineconfiguration.openshift.io/v1/machineconfigs/00-smp"
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    code, _, body = raw_request(sim, "PATCH", path, b'{"metadata":{"labels":{"a":"b"}}}', headers)
    assert code == 415
    assert json.loads(body)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json"
    )
    headers = {"Content-Type": "application/merge-patch+json"}
    assert raw_request(sim, "PATCH", path, b'{"metadata":{"labels":{"a":"b"}}}', headers)[0] == 200
