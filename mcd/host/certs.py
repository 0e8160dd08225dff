"""The certificate writer's side effects: the ControllerConfig's CAs and pull secret on the node.

What to write comes from `mcd.planner.certs`; this module only writes it, atomically
(`mcd.host.atomicfs`), with upstream's modes: a single file that exists keeps its mode (a new
one is 0644 in 0755 directories), each registry CA is `ca.crt` 0644 in a 0755 directory of its
own, and registry directories the ControllerConfig no longer lists are removed. A file that
already holds what it should is not written again, so a resync changes nothing on disk.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from mcd.host import atomicfs
from mcd.host.root import HostRoot
from mcd.host.systemd import SystemdManager
from mcd.planner.certs import Certificates, registry_ca_path, with_cluster_ca, with_newline
from mcd.planner.managed_paths import IMAGE_CA_DIR

LOG = logging.getLogger(__name__)

DEFAULT_FILE_MODE = 0o644
DEFAULT_DIR_MODE = 0o755
KUBELET_KUBECONFIG = "/var/lib/kubelet/kubeconfig"
KUBELET_UNIT = "kubelet.service"


@dataclass
class Written:
    """What one run changed on disk (paths as the node sees them)."""

    files: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files or self.removed)


def write_bundle(root: HostRoot, path: str, data: bytes) -> bool:
    """Write one single file (ending in a newline), keeping the mode of the file it replaces."""
    host = root.join(path)
    try:
        mode = stat.S_IMODE(os.stat(host).st_mode)  # as upstream, the mode of what a link points to
    except FileNotFoundError:
        mode = DEFAULT_FILE_MODE
    return atomicfs.atomic_write(host, with_newline(data), mode, dir_mode=DEFAULT_DIR_MODE)


def sync_registry_cas(root: HostRoot, cas: dict[str, bytes], out: Written) -> None:
    """Remove the registry directories not in `cas`, then write each registry's `ca.crt`."""
    base = root.join(IMAGE_CA_DIR)
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        entries = []
    for entry in entries:
        # a directory itself, not a link to one (Go's DirEntry.IsDir, as upstream reads it)
        if entry.name in cas or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            atomicfs.remove_tree(Path(entry.path))
        except OSError as exc:
            LOG.warning("Could not remove old certificate: %s/%s: %s", IMAGE_CA_DIR, entry.name, exc)
            continue
        out.removed.append(f"{IMAGE_CA_DIR}/{entry.name}")
    for name, data in cas.items():
        path = registry_ca_path(name)
        if atomicfs.atomic_write(root.join(path), data, DEFAULT_FILE_MODE, dir_mode=DEFAULT_DIR_MODE):
            out.files.append(path)


def write_certificates(root: HostRoot, certs: Certificates) -> Written:
    """Put everything `certs` asks for on the node, in upstream's order; OSError on failure."""
    out = Written()
    for path, data in certs.bundles().items():
        if write_bundle(root, path, data):
            out.files.append(path)
    sync_registry_cas(root, dict(certs.registry_cas), out)
    return out


def restart_kubelet_with_ca(root: HostRoot, systemd: SystemdManager, ca: bytes) -> None:
    """Upstream's kubelet restart for a kube-apiserver CA rotation: stop the kubelet, set `ca`
    as the cluster CA of its own kubeconfig (the rest kept), daemon-reload, start it.

    The kubelet is started again even when the rewrite failed (the error is raised after): a
    node must not be left with its kubelet stopped, and upstream's retry never comes back here
    once the rotation is recorded as observed.
    """
    LOG.info("restarting kubelet due to server-ca rotation")
    systemd.stop(KUBELET_UNIT)
    try:
        current = root.join(KUBELET_KUBECONFIG).read_bytes()
        write_bundle(root, KUBELET_KUBECONFIG, with_cluster_ca(current, ca))
        systemd.daemon_reload()
    finally:
        systemd.start(KUBELET_UNIT)
