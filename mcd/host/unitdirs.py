"""The systemd directories `systemctl --root` writes to must stay inside the root.

mcd's own writers resolve every path through `HostRoot.join`, which re-roots absolute links
and refuses climbs above the root. `systemctl --root=<prefix>` does not: it opens
`<prefix>/etc/systemd/system/<target>.wants/<unit>` and the kernel follows every link on the
way as on the machine running mcd. A `multi-user.target.wants` linked to a directory outside
the prefix (or an `/etc/systemd/system` that is such a link) would make `enable` create links
there, `disable` remove them there and `preset` read policy from there. So before anything of
an update is written, and again right before each offline systemctl call, every directory
systemctl may touch is resolved the way the kernel resolves it, and anything leading out of the
root is refused, naming the path. Links that stay inside (a wants directory linked to one in
/usr, with a relative target, as distributions ship) are fine.
"""

from __future__ import annotations

import os

from mcd.host.root import HostRoot
from mcd.planner.managed_paths import UNIT_DIR

PRESET_DIR = "/etc/systemd/system-preset"
# the directories under /etc/systemd/system systemd reads or systemctl writes: enablement
# links go into the dependency directories, dropins into `<unit>.d`
_DIR_SUFFIXES = (".wants", ".requires", ".upholds", ".d")


def _inside(prefix: str, real: str) -> bool:
    return prefix in ("/", real) or real.startswith(prefix + "/")


def escapes(root: HostRoot) -> list[str]:
    """One message per systemd directory (or link standing for one) that leads out of `root`.

    Checked: /etc/systemd/system and /etc/systemd/system-preset with their parents, and each
    link right in /etc/systemd/system that is used as a directory (named like a dependency or
    dropin directory, or leading to a directory). Alias links and enablement links that point at
    unit files are not written through, so their targets are not judged.
    """
    prefix = str(root.prefix)
    problems: list[str] = []
    for directory in (UNIT_DIR, PRESET_DIR):
        real = os.path.realpath(prefix + directory)
        if not _inside(prefix, real):
            problems.append(
                f"refusing {directory}: it resolves to {real}, outside the root {prefix} "
                "(systemctl --root follows it there)"
            )
    unit_dir = os.path.realpath(prefix + UNIT_DIR)
    if problems and not _inside(prefix, unit_dir):
        return problems
    try:
        with os.scandir(unit_dir) as it:
            links = sorted(e.name for e in it if e.is_symlink())
    except (FileNotFoundError, NotADirectoryError):
        return problems
    for name in links:
        host = os.path.join(unit_dir, name)
        real = os.path.realpath(host)
        if _inside(prefix, real) or not (name.endswith(_DIR_SUFFIXES) or os.path.isdir(host)):
            continue
        problems.append(
            f"refusing {UNIT_DIR}/{name}: symlink -> {os.readlink(host)} resolves to {real}, "
            f"outside the root {prefix} (systemctl --root would write there)"
        )
    return problems
