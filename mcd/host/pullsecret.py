"""The pull secret rpm-ostree pulls OS images with: `/run/ostree/auth.json` (spec §2.9, §5.2).

Upstream links it before every rebase: to the merged secret (internal registry + global pull
secret) the operator writes, or to the kubelet's pull secret when that file is missing or is
not JSON. The link is made atomically (a temporary link renamed over the old one), so
rpm-ostreed never sees the path missing, where upstream removes the old link first.
"""

from __future__ import annotations

import json
import logging

from mcd.host import atomicfs
from mcd.host.root import HostRoot, PathEscapeError
from mcd.planner.managed_paths import INTERNAL_REGISTRY_PULL_SECRET

LOG = logging.getLogger(__name__)

OSTREE_AUTH = "/run/ostree/auth.json"
KUBELET_AUTH = "/var/lib/kubelet/config.json"
MERGED_AUTH = INTERNAL_REGISTRY_PULL_SECRET


def pull_secret_source(root: HostRoot) -> str:
    """The secret to link: the merged one when it is there and is JSON, else the kubelet's."""
    try:
        data = root.join(MERGED_AUTH, follow_final=True).read_bytes()
    except (OSError, PathEscapeError):
        LOG.info("Merged secret file does not exist or cannot be read; defaulting to cluster pull secret")
        return KUBELET_AUTH
    try:
        json.loads(data)
    except ValueError:
        LOG.error("Merged secret file could not be validated; defaulting to cluster pull secret")
        return KUBELET_AUTH
    return MERGED_AUTH


def link_pull_secret(root: HostRoot) -> str:
    """Point `/run/ostree/auth.json` at the pull secret; returns the target linked to.

    The target is a node path (rpm-ostreed reads it in the node's namespace), never prefixed.
    """
    target = pull_secret_source(root)
    if atomicfs.atomic_symlink(root.join(OSTREE_AUTH), target):
        LOG.info("Linking rpm-ostree authfile to %s", target)
    return target
