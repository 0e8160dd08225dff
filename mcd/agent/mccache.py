"""The desired MachineConfig, ready before the sync asks for it: a watch keeps one entry.

Upstream's daemon reads the rendered config from its informer's cache, never from the API
server on an update: the render controller creates `rendered-<pool>-<hash>` before the node
controller names it in the node's desiredConfig, so it is in the cache by then. Caching every
MachineConfig as upstream does would cost tens of megabytes per rendered config here (a parsed
config is large); this keeps at most one: the newest rendered config of the node's pool (the
pool in the name of the config on disk) that the watch delivered, parsed already (with the
config on disk as `like`, as the sync would) and with its JSON text as served (the update
records it as it is). The sync takes it when its name is the desired one and reads the API
server otherwise: a miss is normal (a config that came with the desiredConfig patch, a config
older than the agent, a watch that broke off).

What is held, and when it is let go:
- the watch starts from "now" (a list that can match nothing gives the collection's
  resourceVersion): nothing already there is read, and the idle agent holds nothing;
- an ADDED or MODIFIED config of the pool replaces the entry (events come in resourceVersion
  order: the newest wins, a newer version of the same name too); a DELETED one drops it;
- the config on disk, and the last name the sync asked for, are not held (the sync keeps what
  it took for its retries, which read the server to see whether it changed; a config it missed
  it reads and parses itself);
- every break of the watch (an error, 410 Gone, a server that ends it at once) drops it: what
  changed meanwhile is not known, and the list that follows starts from "now" again; a watch
  the server ends in order (its timeout) is resumed from the last resourceVersion, which loses
  no event, so the entry stays;
- taken is taken: the sync's copy is the only one (two parsed copies would double the memory).
The watch thread decodes and parses; the sync's thread only takes, under a lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from mcd.agent.applied import parse_machineconfig
from mcd.config.machineconfig import MachineConfig
from mcd.kube.client import NO_OBJECT
from mcd.kube.watch import follow_events
from mcd.node.errors import McdError
from mcd.node.machineconfignode import pool_of

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]
RESOURCE = "machineconfigs"


class MachineConfigWatchApi(Protocol):
    def list_named(self, resource: str, name: str) -> tuple[Obj | None, str]: ...

    def watch(
        self, resource: str, resource_version: str, timeout_seconds: int, *, name: str = ""
    ) -> Iterator[tuple[str, Obj, bytes | None]]: ...


@dataclass(frozen=True)
class Ahead:
    """A rendered config as the watch delivered it: its name, resourceVersion and parse."""

    name: str
    resource_version: str
    config: MachineConfig


class MachineConfigCache:
    """One rendered config of the node's pool, parsed ahead (`run` on a guarded thread, `take`
    from the sync)."""

    def __init__(
        self,
        api: MachineConfigWatchApi,
        disk: Callable[[], MachineConfig | None],
        stop: threading.Event,
        watch_timeout_seconds: int = 300,
        *,
        release: Callable[[], None] | None = None,
    ) -> None:
        """`disk`: the config on disk (its pool is the one followed; its parse is `like`);
        `release`: asks for the memory an event's decoding left free to be handed back to the
        system once the agent is idle (the loop's release; never in the middle of an update,
        whose allocations would wait for it and fault the pages in again)."""
        self.api, self._disk, self.stop, self._release = api, disk, stop, release
        self.watch_timeout_seconds = watch_timeout_seconds
        self._lock = threading.Lock()
        self._entry: Ahead | None = None
        self._taken = ""

    def run(self) -> None:
        """Watch the MachineConfigs from now on until `stop` is set."""
        # run again by the guard after a failure: what was kept then may be stale by now
        self._drop(None, "the watch starts again")
        follow_events(
            RESOURCE,
            lambda: self.api.list_named(RESOURCE, NO_OBJECT),
            lambda rv: self.api.watch(RESOURCE, rv, self.watch_timeout_seconds),
            self.event,
            self.stop,
            listed=lambda _nothing: LOG.debug("watching MachineConfigs from now on"),
            cut=lambda: self._drop(None, "the watch broke off"),
            # what an event's decoding left free (its line and chunks, a config not kept: 6 to 15
            # MB) goes back to the system, not only after the next sync: the agent may idle long
            settled=self._release,
        )

    def take(self, name: str) -> Ahead | None:
        """The config `name` when it is the one held (it is then no longer held); else None.

        Either way `name` is not held from now on: the sync has its own copy, or reads it from
        the server (a config that came with the desiredConfig patch is then not parsed twice,
        nor held after it was applied)."""
        with self._lock:
            entry, self._taken = self._entry, name
            if entry is None or entry.name != name:
                return None
            self._entry = None
        LOG.debug("MachineConfig %s taken from the watch", name)
        return entry

    def held(self) -> str | None:
        """The name of the config held, if any."""
        with self._lock:
            return None if self._entry is None else self._entry.name

    def _drop(self, name: str | None, why: str) -> None:
        """Drop the entry (only when it is `name`, if given)."""
        with self._lock:
            entry = self._entry
            if entry is None or (name is not None and entry.name != name):
                return
            self._entry = None
        LOG.debug("no longer holding MachineConfig %s: %s", entry.name, why)

    def event(self, etype: str, obj: Obj, text: bytes | None) -> None:
        """One event of the watch (on its thread): hold, replace or drop the entry."""
        meta = obj.get("metadata") or {}
        name, rv = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        if etype == "DELETED":
            self._drop(name, "deleted")
            return
        if etype not in ("ADDED", "MODIFIED"):
            return
        disk = self._disk()
        pool = pool_of(disk.name, "") if disk is not None else ""
        with self._lock:
            taken = self._taken
        if disk is None or not pool or pool_of(name, "") != pool or name in (disk.name, taken):
            return
        try:
            mc = parse_machineconfig(obj, f"MachineConfig {name}", text=text, like=disk)
        except McdError as exc:
            # the sync reads it from the server and reports what is wrong with it, as without us
            LOG.debug("not holding MachineConfig %s: %s", name, exc)
            self._drop(None, f"{name} is newer")
            return
        with self._lock:
            if name == self._taken:  # asked for while it was parsed: the sync has its own
                return
            self._entry = Ahead(name, rv, mc)
        LOG.debug("holding MachineConfig %s at resourceVersion %s", name, rv)
