"""Reboots that take as long as a machine's: `mcd-sim simulate --nodes N --reboot-seconds S`.

On a sandbox root the agent's reboot is simulated: it re-executes itself at once and takes the
boot path. A real node is gone for minutes meanwhile, and its kubelet reports NotReady. Here,
as the agent announces the reboot (`post-config-action=Rebooting`), its process is stopped
(SIGSTOP: it is waiting for that write's answer) and the Node's Ready condition set False; S
seconds later the Node is Ready again and the process continues into its simulated reboot. The
agent's own code path is unchanged; only the time between the announcement and the boot grows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.objectrules import rfc3339

Obj = dict[str, Any]


class SlowReboots:
    def __init__(self, sim: ApiServer, seconds: float) -> None:
        self.sim, self.seconds = sim, seconds
        self._lock = threading.Lock()
        self._down: dict[str, tuple[int, threading.Timer]] = {}

    def begin(self, node: str, pid: int) -> None:
        """The node goes down: its agent stopped, the Node NotReady, both back in `seconds`."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        self._ready(node, False)
        timer = threading.Timer(self.seconds, self.end, (node,))
        timer.daemon = True
        with self._lock:
            self._down[node] = (pid, timer)
        timer.start()

    def end(self, node: str) -> None:
        with self._lock:
            entry = self._down.pop(node, None)
        if entry is None:
            return
        self._ready(node, True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(entry[0], signal.SIGCONT)

    def close(self) -> None:
        """Bring every node still down back now (before its agent is stopped for good)."""
        with self._lock:
            nodes = list(self._down)
            for _, timer in self._down.values():
                timer.cancel()
        for node in nodes:
            self.end(node)

    def _ready(self, node: str, ready: bool) -> None:
        obj = self.sim.get("Node", node) or {}
        now = rfc3339(self.sim.store.clock())
        conditions = [
            {
                **c,
                "status": "True" if ready else "Unknown",
                "lastTransitionTime": now,
                "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            }
            if c.get("type") == "Ready"
            else c
            for c in (obj.get("status") or {}).get("conditions") or []
        ]
        self.sim.patch("Node", node, {"status": {"conditions": conditions}}, status=True)
