"""Whether this machine has room for a fleet of agents, and the open-file limit raised for it.

Every simulated node is an `mcd start` process with an inotify instance of its own (the drift
monitor), and the in-process API server holds each agent's connections and watches (about 8
descriptors an agent). A user gets 128 inotify instances by default, and a shell's soft limit of
1,024 open files is far below its hard limit: a pool of a hundred nodes or more would stop part
way with EMFILE or a drift monitor that cannot start. `mcd-sim simulate --nodes N` and
bench/fleet.py ask here first, and say what to raise instead.
"""

from __future__ import annotations

import resource
from pathlib import Path

INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
# the tests and tools running beside a fleet hold a few instances and descriptors of their own
SPARE_INSTANCES = 16
BASE_FILES, FILES_PER_AGENT = 256, 16


def inotify_room(nodes: int) -> str | None:
    """Why `nodes` agents cannot all start their drift monitors here, or None."""
    try:
        limit = int(INOTIFY_INSTANCES.read_text())
    except (OSError, ValueError):
        return None  # not Linux's procfs: nothing to tell
    if limit >= nodes + SPARE_INSTANCES:
        return None
    return (
        f"{nodes} agents need {nodes} inotify instances and fs.inotify.max_user_instances is {limit}: "
        f"raise it first (sysctl -w fs.inotify.max_user_instances={max(1024, 2 * nodes)})"
    )


def open_files_room(nodes: int) -> str | None:
    """Raise this process's open-file limit to its hard limit; why that is still too few for
    `nodes` agents, or None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    need = BASE_FILES + FILES_PER_AGENT * nodes
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    return f"{nodes} agents need about {need} open files in this process; its hard limit is {hard}: raise it"


def fleet_room(nodes: int) -> str | None:
    """Both checks, the open-file limit raised: what stops a fleet of `nodes` here, or None."""
    return inotify_room(nodes) or open_files_room(nodes)
