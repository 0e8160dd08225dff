"""The root's lock between threads of one process (issue 26, item 6): what a process holds is
kept on the `HostRoot` object, re-entrant in the holding thread only; another thread, the
certificate writer beside an update, waits for it as another process would."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest
from agent.inproc import NODE, MemoryApi

from mcd.agent.certs import CertificateWriter
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.host import rootlock
from mcd.host.root import HostRoot
from mcd.planner.managed_paths import KUBELET_CA


def _in_thread(root: HostRoot, inside: threading.Event, release: threading.Event) -> threading.Thread:
    def hold() -> None:
        with rootlock.hold(root, timeout=5):
            inside.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(10)
    return t


def test_another_thread_waits_for_the_lock_and_the_holder_nests(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    inside, release = threading.Event(), threading.Event()
    holder = _in_thread(root, inside, release)
    try:
        taken = rootlock.hold(root, timeout=0.2)
        with pytest.raises(rootlock.RootLockError, match="another thread of this mcd is updating"), taken:
            pass
    finally:
        release.set()
        holder.join()
    with rootlock.hold(root, timeout=1), rootlock.hold(root, timeout=0):  # the holder's thread nests
        pass


PEM = (
    b"-----BEGIN CERTIFICATE-----\n"
    + base64.b64encode(bytes([0x30, 3, 2, 1, 1]))
    + b"\n-----END CERTIFICATE-----\n"
)


def _controllerconfig(ca: bytes) -> dict[str, object]:
    spec = {
        "kubeAPIServerServingCAData": base64.b64encode(ca).decode(),
        "cloudProviderCAData": "",
        "internalRegistryPullSecret": base64.b64encode(b"{}").decode(),
        "imageRegistryBundleData": [],
        "imageRegistryBundleUserData": [],
    }
    return {"metadata": {"name": "machine-config-controller", "resourceVersion": "7"}, "spec": spec}


def test_the_certificate_writer_waits_for_an_update_holding_the_lock(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    writer = NodeWriter(MemoryApi({}), NODE)
    writer.refresh()
    certs = CertificateWriter(
        None,
        writer,
        EventRecorder(None, NODE),
        root,
        threading.Event(),  # type: ignore[arg-type]
        lock_timeout=0.2,
    )
    inside, release = threading.Event(), threading.Event()
    update = _in_thread(root, inside, release)  # the agent's update, on its loop thread
    try:
        with pytest.raises(rootlock.RootLockError):
            certs.sync(_controllerconfig(PEM))
        assert not (tmp_path / KUBELET_CA.lstrip("/")).exists()  # nothing written under the update
    finally:
        release.set()
        update.join()
    certs.sync(_controllerconfig(PEM))  # the retry, once the update is over
    assert (tmp_path / KUBELET_CA.lstrip("/")).read_bytes() == PEM
