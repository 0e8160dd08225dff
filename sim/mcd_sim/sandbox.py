"""A minimal node root in a directory: what `--root-mount` points at in demos and tests."""

from __future__ import annotations

import os
from pathlib import Path

from mcd.config.paths import LOCK_FILE

CORE_UID = CORE_GID = 1000

PASSWD = "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n"
GROUP = "root:x:0:\nwheel:x:10:core\ncore:x:1000:\n"
# a --coreos sandbox is an RHCOS node (OpenShift's default), so kernel types and extensions apply;
# replace it with ID=fedora to try a Fedora CoreOS node, where upstream skips them
RHCOS_OS_RELEASE = (
    'NAME="Red Hat Enterprise Linux CoreOS"\nID="rhcos"\nID_LIKE="rhel fedora"\nVARIANT_ID=coreos\n'
)

# no cluster behind it: only there because an rpm-ostree node always has one
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"


class SandboxError(ValueError):
    """The directory cannot be made a sandbox root (the message says why, without the path)."""


def make_sandbox_root(path: str | os.PathLike[str], *, coreos: bool = False) -> Path:
    """Create (or complete) a sandbox root: /etc/passwd and /etc/group with `core`, /home/core.

    With `coreos`, `/run/ostree-booted` marks it as an rpm-ostree system (the OS layer then runs
    rpm-ostree, which tests point at their stand-in), it gets a placeholder kubelet kubeconfig
    (`/etc/kubernetes/kubeconfig`, which every update of such a node needs), and an RHCOS
    os-release is written under /usr/lib unless the root has one.
    """
    root = Path(path)
    for parent in (root, *root.parents):
        # a file in the way: mkdir would only say "File exists" or "Not a directory"
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                where = "" if parent == root else f" ({parent} is not a directory)"
                raise SandboxError(f"not a directory{where}: give a new or an existing directory")
            break
    (root / "etc").mkdir(parents=True, exist_ok=True)
    for name, text in (("passwd", PASSWD), ("group", GROUP)):
        target = root / "etc" / name
        if not target.exists():
            target.write_text(text)
    home = root / "home" / "core"
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, CORE_UID, CORE_GID)
    home.chmod(0o700)
    # every root has a /run; the lock file is made here so that a run on a sandbox leaves the
    # tree exactly as the config says (updates create it where it is missing)
    (root / "run").mkdir(exist_ok=True)
    (root / LOCK_FILE.lstrip("/")).touch()
    if coreos:
        (root / "run" / "ostree-booted").touch()
        # an rpm-ostree node has the kubelet's kubeconfig, and an update fails without it (upstream)
        kubeconfig = root / "etc" / "kubernetes" / "kubeconfig"
        kubeconfig.parent.mkdir(exist_ok=True)
        if not kubeconfig.exists():
            kubeconfig.write_text(KUBECONFIG)
            kubeconfig.chmod(0o600)
        lib_release = root / "usr" / "lib" / "os-release"
        if not (root / "etc" / "os-release").exists() and not lib_release.exists():
            lib_release.parent.mkdir(parents=True, exist_ok=True)
            lib_release.write_text(RHCOS_OS_RELEASE)
    return root
