"""The certificate writer's attempts (`mcd.agent.certs`): a failed write is told once and
retried with backoff, a refused ControllerConfig is told once and not retried, and nothing is
recorded on the node until the files are written."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

from mcd.agent.certs import INVALID, WRITE_FAILED, CertificateWriter
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.host.root import HostRoot
from mcd.node import annotations as ann

PEM = b"-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"


class Api:
    def __init__(self) -> None:
        self.node: dict[str, Any] = {"metadata": {"name": "n", "resourceVersion": "1", "annotations": {}}}

    def get_node(self, name: str) -> dict[str, Any]:
        return self.node

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        meta = self.node["metadata"]
        meta["annotations"].update(patch["metadata"].get("annotations") or {})
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return self.node


class Events(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, "n")
        self.seen: list[tuple[str, str]] = []

    def record(self, etype: str, reason: str, message: str) -> None:
        self.seen.append((reason, message))


def cc(rv: str, kubelet_ca: bytes = PEM) -> dict[str, Any]:
    registry = {"file": "r", "data": base64.b64encode(PEM).decode()}
    ca = base64.b64encode(kubelet_ca).decode()
    spec = {"kubeAPIServerServingCAData": ca, "imageRegistryBundleData": [registry]}
    return {"metadata": {"name": "machine-config-controller", "resourceVersion": rv}, "spec": spec}


def writer(tmp_path: Path) -> tuple[CertificateWriter, Api, Events]:
    api, events = Api(), Events()
    node = NodeWriter(api, "n")
    node.refresh()
    w = CertificateWriter(None, node, events, HostRoot(tmp_path), threading.Event())  # type: ignore[arg-type]
    return w, api, events


def test_a_failed_write_is_told_once_retried_and_recorded_only_once_written(tmp_path: Path) -> None:
    w, api, events = writer(tmp_path)
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/certs.d").write_text("a file where the directory goes")
    w._offer(cc("5"))
    w.attempt()  # the same failure again: one event
    assert [r for r, _ in events.seen] == [WRITE_FAILED]
    assert w._retry_at is not None
    assert ann.LAST_SYNCED_CONTROLLER_CONFIG not in api.node["metadata"]["annotations"]
    (tmp_path / "etc/docker/certs.d").unlink()
    w.attempt()
    assert w._retry_at is None
    assert api.node["metadata"]["annotations"][ann.LAST_SYNCED_CONTROLLER_CONFIG] == "5"
    assert (tmp_path / "etc/docker/certs.d/r/ca.crt").read_bytes() == PEM


def test_a_refused_controllerconfig_is_told_once_and_not_retried(tmp_path: Path) -> None:
    w, api, events = writer(tmp_path)
    w._offer(cc("6", kubelet_ca=b"garbage"))
    w.attempt()
    assert [r for r, _ in events.seen] == [INVALID]
    assert w._retry_at is None
    assert not (tmp_path / "etc").exists()
    assert api.node["metadata"]["annotations"] == {}


def test_a_cluster_without_controllerconfigs_is_said_once_and_looked_at_seldom(
    tmp_path: Path, caplog: Any
) -> None:
    """No Machine Config Operator (a 404 for the collection): no retry every few seconds."""
    import logging

    from mcd.agent import certs
    from mcd.kube.errors import NotFoundError

    api, events = Api(), Events()
    node = NodeWriter(api, "n")
    node.refresh()
    stop = threading.Event()
    lists: list[str] = []
    waits: list[float] = []

    class NoCrd(Api):
        def list_named(self, resource: str, name: str) -> Any:
            lists.append(name)
            raise NotFoundError(404, "the server could not find the requested resource")

    class CountingStop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            if len(waits) == 3:
                stop.set()
            return stop.is_set()

        def is_set(self) -> bool:
            return stop.is_set()

    w = CertificateWriter(NoCrd(), node, events, HostRoot(tmp_path), CountingStop())  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="mcd.agent.certs")
    w.run()
    assert len(lists) == 3 and waits == [certs.ABSENT_RECHECK] * 3
    assert sum("serves no ControllerConfig" in r.getMessage() for r in caplog.records) == 1
    assert events.seen == []
