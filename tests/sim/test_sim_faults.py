"""Fault injection, restart with the same objects, the audit log, and events.k8s.io/v1."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException
from mcd_sim.apiserver import ApiServer
from simkube import raw_request


def test_fail_next_requests_with_a_status(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    rule = sim.faults.fail(500, verb="get", resource="nodes", name="worker-0", times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.read_node("worker-0")
        assert err.value.status == 500
    assert core.read_node("worker-0").metadata.name == "worker-0"
    assert rule.hits == 2
    sim.faults.fail(429, verb="list", resource="nodes")
    code, headers, body = raw_request(sim, "GET", "/api/v1/nodes")
    assert (code, headers["Retry-After"], json.loads(body)["reason"]) == (429, "1", "TooManyRequests")
    assert raw_request(sim, "GET", "/api/v1/nodes")[0] == 200


def test_forced_conflict_and_connection_reset(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    sim.faults.conflict(resource="nodes", name="worker-1")
    with pytest.raises(ApiException) as err:
        core.patch_node("worker-1", {"metadata": {"labels": {"c": "1"}}})
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    sim.faults.reset(verb="get", resource="nodes")
    with pytest.raises(OSError):  # connection reset (urllib: RemoteDisconnected or URLError)
        raw_request(sim, "GET", "/api/v1/nodes/worker-1")
    assert core.read_node("worker-1").metadata.name == "worker-1"
    sim.faults.reset(verb="get", resource="nodes", times=1)
    # the official client's urllib3 retries a dropped connection once and succeeds
    assert core.read_node("worker-1").metadata.name == "worker-1"


def test_delay_and_expired_watch(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    sim.faults.delay(0.2, verb="get", resource="nodes", times=1)
    import time

    started = time.monotonic()
    core.read_node("worker-0")
    assert time.monotonic() - started >= 0.2
    rv = core.list_node().metadata.resource_version
    sim.faults.expire(resource="nodes", times=2)  # the client's one automatic retry also gets 410
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_node, resource_version=rv, _request_timeout=10):
            pass
    assert err.value.status == 410


def test_restart_keeps_objects_and_ends_watches(tmp_path: Path) -> None:
    from kubernetes import config

    with ApiServer() as sim:
        sim.add_node("worker-0")
        api = config.new_client_from_config(config_file=str(sim.write_kubeconfig(tmp_path / "kc")))
        core = k8s.CoreV1Api(api)
        rv = core.list_node().metadata.resource_version
        ended = threading.Event()

        def watch_until_dropped() -> None:
            resp = core.list_node(watch=True, resource_version=rv, _preload_content=False)
            resp.read()  # returns when the server ends the stream
            resp.release_conn()
            ended.set()

        watcher = threading.Thread(target=watch_until_dropped, daemon=True)
        watcher.start()
        sim.wait_for(lambda: sim.store.watcher_count() > 0)
        url = sim.url
        sim.restart()
        assert ended.wait(10)
        watcher.join(10)
        assert sim.url == url
        assert (
            core.read_node("worker-0").metadata.resource_version
            == sim.get("Node", "worker-0")["metadata"]["resourceVersion"]
        )
        api.close()


def test_audit_log_records_each_request(tmp_path: Path) -> None:
    from kubernetes import config

    audit = tmp_path / "audit.log"
    with ApiServer(audit_log_path=audit) as sim:
        sim.add_node("worker-0")
        api = config.new_client_from_config(config_file=str(sim.write_kubeconfig(tmp_path / "kc")))
        core = k8s.CoreV1Api(api)
        core.read_node("worker-0")
        core.patch_node("worker-0", {"metadata": {"annotations": {"a": "b"}}})
        with pytest.raises(ApiException):
            core.read_namespaced_pod("missing", "default")
        api.close()
        token = sim.token
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["verb"], e["requestURI"], e["responseStatus"]["code"]) for e in events] == [
        ("get", "/api/v1/nodes/worker-0", 200),
        ("patch", "/api/v1/nodes/worker-0", 200),
        ("get", "/api/v1/namespaces/default/pods/missing", 404),
    ]
    get, patch, missing = events
    assert (
        get["kind"] == "Event"
        and get["apiVersion"] == "audit.k8s.io/v1"
        and get["stage"] == "ResponseComplete"
    )
    assert get["objectRef"] == {"resource": "nodes", "name": "worker-0", "apiGroup": "", "apiVersion": "v1"}
    assert get["user"]["username"] == "system:admin" and get["userAgent"].startswith("OpenAPI-Generator/")
    assert "requestObject" not in get
    assert patch["requestObject"] == {"metadata": {"annotations": {"a": "b"}}}
    assert missing["objectRef"]["namespace"] == "default"
    import re

    micro = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
    assert all(re.fullmatch(micro, e["requestReceivedTimestamp"]) for e in events)
    assert all(
        re.fullmatch(micro, e["stageTimestamp"]) and e["stageTimestamp"] >= e["requestReceivedTimestamp"]
        for e in events
    )
    assert token not in audit.read_text()


def test_events_v1_list_deserialises(sim: ApiServer, client: Any) -> None:
    core = k8s.CoreV1Api(client)
    core.create_namespaced_event(
        "openshift-machine-config-operator",
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="worker-0."),
            involved_object=k8s.V1ObjectReference(kind="Node", name="worker-0", api_version="v1",
                                                  namespace="openshift-machine-config-operator"),
            reason="NodeDone", message="Setting node worker-0, currentConfig rendered-worker-1 to Done",
            type="Normal", source=k8s.V1EventSource(component="machineconfigdaemon", host="worker-0"),
        ),
    )  # fmt: skip
    core_events = core.list_namespaced_event(
        "openshift-machine-config-operator", field_selector="involvedObject.name=worker-0,reason=NodeDone"
    )
    assert [e.message for e in core_events.items] == [
        "Setting node worker-0, currentConfig rendered-worker-1 to Done"
    ]
    # events.k8s.io/v1 shows the same event under its names; eventTime is null for an event made
    # through core/v1, as on a real cluster (the typed EventsV1Event model rejects that: read raw)
    resp = k8s.EventsV1Api(client).list_namespaced_event(
        "openshift-machine-config-operator", field_selector="regarding.name=worker-0", _preload_content=False
    )
    items = json.loads(resp.data)["items"]
    assert [
        (e["note"], e["eventTime"], e["deprecatedSource"]["component"])
        for e in items
        if e["reason"] == "NodeDone"
    ] == [("Setting node worker-0, currentConfig rendered-worker-1 to Done", None, "machineconfigdaemon")]
