"""A PUT without metadata.resourceVersion: kube-apiserver takes it for built-in types such as
Nodes, but refuses it for custom resources (422 `must be specified for an update`), as the replay
against the real server (tests/kube/test_replay.py) found. The stand-in must refuse it too."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from mcd_sim.apiserver import ApiServer

MCN = "/apis/machineconfiguration.openshift.io/v1/machineconfignodes"


def _put(server: ApiServer, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _mcn(name: str, rv: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
            "metadata": meta, "spec": {"node": {"name": name}}}  # fmt: skip


def test_custom_resource_put_needs_a_resource_version() -> None:
    with ApiServer(tls=False) as server:
        rv = server.put(_mcn("worker-0"))["metadata"]["resourceVersion"]
        for path in (f"{MCN}/worker-0", f"{MCN}/worker-0/status"):
            code, status = _put(server, path, _mcn("worker-0"))
            assert (code, status["reason"]) == (422, "Invalid"), path
            assert status["message"] == (
                'machineconfignodes.machineconfiguration.openshift.io "worker-0" is invalid: '
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
            )
            assert [(c["reason"], c["field"]) for c in status["details"]["causes"]] == [
                ("FieldValueInvalid", "metadata.resourceVersion")
            ]
        kept = server.get("MachineConfigNode", "worker-0")
        assert kept is not None and kept["metadata"]["resourceVersion"] == rv
        # with one it is an ordinary update; a missing object is still 404 first
        assert _put(server, f"{MCN}/worker-0", _mcn("worker-0", rv))[0] == 200
        assert _put(server, f"{MCN}/worker-9", _mcn("worker-9"))[0] == 404


def test_node_put_without_resource_version_is_unconditional() -> None:
    with ApiServer(tls=False) as server:
        node = server.add_node("worker-0")
        node["metadata"].pop("resourceVersion")
        node["metadata"]["labels"]["replayed"] = "yes"
        code, got = _put(server, "/api/v1/nodes/worker-0", node)
        assert code == 200
        assert got["metadata"]["labels"]["replayed"] == "yes"
