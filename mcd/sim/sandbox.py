"""A minimal node root in a directory: what `--root-mount` points at in demos and tests."""

from __future__ import annotations

import os
from pathlib import Path

CORE_UID = CORE_GID = 1000

PASSWD = "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n"
GROUP = "root:x:0:\nwheel:x:10:core\ncore:x:1000:\n"
# a --coreos sandbox is an RHCOS node (OpenShift's default), so kernel types and extensions apply;
# replace it with ID=fedora to try a Fedora CoreOS node, where upstream skips them
RHCOS_OS_RELEASE = (
    'NAME="Red Hat Enterprise Linux CoreOS"\nID="rhcos"\nID_LIKE="rhel fedora"\nVARIANT_ID=coreos\n'
)


class SandboxError(ValueError):
    """The directory cannot be made a sandbox root (the message says why, without the path)."""


def make_sandbox_root(path: str | os.PathLike[str], *, coreos: bool = False) -> Path:
    """Create (or complete) a sandbox root: /etc/passwd and /etc/group with `core`, /home/core.

    With `coreos`, `/run/ostree-booted` marks it as an rpm-ostree system (the OS layer then runs
    rpm-ostree, which tests point at their stand-in), and an RHCOS os-release is written under
    /usr/lib unless the root has one.
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
    if coreos:
        (root / "run").mkdir(exist_ok=True)
        (root / "run" / "ostree-booted").touch()
        lib_release = root / "usr" / "lib" / "os-release"
        if not (root / "etc" / "os-release").exists() and not lib_release.exists():
            lib_release.parent.mkdir(parents=True, exist_ok=True)
            lib_release.write_text(RHCOS_OS_RELEASE)
    return root
