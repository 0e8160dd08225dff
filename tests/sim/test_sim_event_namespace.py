"""The stand-in refuses the Events kube-apiserver refuses: an involved object's namespace must be
the Event's own, and an Event about a cluster-scoped object lives only in `default` (422 otherwise,
as mcd's pool controller met on a real server)."""

from __future__ import annotations

import json

import pytest
from mcd_sim.apiserver import ApiServer
from simkube import raw_request

from mcd.controller.events import pool_event

MCO_NS = "openshift-machine-config-operator"
POOL = {"metadata": {"name": "worker", "uid": "u-1"}}


def _event(involved_ns: str | None, namespace: str = MCO_NS) -> bytes:
    obj = pool_event(POOL, "SetDesiredConfig", "m", "machineconfigcontroller-nodecontroller", namespace)
    if involved_ns is None:
        del obj["involvedObject"]["namespace"]
    else:
        obj["involvedObject"]["namespace"] = involved_ns
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    ("namespace", "involved", "code"),
    [
        (MCO_NS, None, 422),  # the pool controller's Events before the fix
        (MCO_NS, "default", 422),
        (MCO_NS, MCO_NS, 201),  # as upstream's namespaced recorder sets it
        ("default", None, 201),  # a cluster-scoped object's Event in default
    ],
)
def test_event_namespace_rule(sim: ApiServer, namespace: str, involved: str | None, code: int) -> None:
    headers = {"Content-Type": "application/json"}
    path = f"/api/v1/namespaces/{namespace}/events"
    status, _, body = raw_request(sim, "POST", path, _event(involved, namespace), headers)
    assert status == code, body
    if code == 422:
        assert b"involvedObject.namespace" in body and b"does not match event.namespace" in body


def test_pool_events_name_the_controllers_namespace() -> None:
    assert json.loads(_event(MCO_NS))["involvedObject"]["namespace"] == MCO_NS
    obj = pool_event(POOL, "r", "m", "c", "elsewhere")
    assert obj["involvedObject"]["namespace"] == obj["metadata"]["namespace"] == "elsewhere"
