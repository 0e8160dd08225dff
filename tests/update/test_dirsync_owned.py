"""The directory syncs an update defers belong to that update (its `Host`): a writer it did not
hand them to, the certificate writer, syncs its directories at once while the update runs
(issue 26, item 6: no module-global batch in the host layer)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from recording import RecordingRunner
from watch.drifttools import laid_down, parse

from mcd.host import failpoints
from mcd.host.certs import write_certificates
from mcd.host.root import HostRoot
from mcd.planner.certs import Certificates
from mcd.planner.managed_paths import KUBELET_CA
from mcd.update.transaction import Host, update


def test_the_certificate_writer_syncs_at_once_during_an_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = mc_object("a", files=[ign_file(f"/etc/mcd-t/d{i}/f.conf", "1\n") for i in range(3)])
    b = mc_object("b", files=[ign_file(f"/etc/mcd-t/d{i}/f.conf", "2\n") for i in range(3)])
    root, old = laid_down(tmp_path, a)
    synced: list[str] = []
    real_fsync = os.fsync
    lock = threading.Lock()

    def fsync(fd: int) -> None:
        with lock:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    ca_dir = str((root / KUBELET_CA.lstrip("/")).parent)
    seen: list[bool] = []

    def hook(name: str) -> None:
        # inside the update's steps, its directory syncs deferred: the certificate writer runs
        if name == "renamed, directory not synced" and not seen:
            seen.append(True)
            certs = Certificates("1", "", b"CA2", b"", b"{}", {})
            before = len(synced)
            write_certificates(HostRoot(root), certs)
            with lock:
                seen[0] = ca_dir in synced[before:]

    failpoints.install(hook)
    try:
        update(
            Host.for_root(HostRoot(root), RecordingRunner().expect(["systemctl"])),
            old,
            parse(b),
            legacy=True,
            skip_reboot=True,
        )
    finally:
        failpoints.install(None)
    assert seen == [True], "the certificate writer's directory sync waited for the update's"
    assert (root / KUBELET_CA.lstrip("/")).read_bytes() == b"CA2\n"
