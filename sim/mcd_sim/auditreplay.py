"""The Nodes' history told by the API server's audit log alone: every successful write to a
Node (a merge patch, or an update carrying the whole object) replayed in the order the server
finished them, so a rollout's verdict can be checked against what clients asked the server to
do, independently of the store's own record (`mcd_sim.fleet`'s hook).

Pure (no I/O): takes the log's lines. Only writes made over HTTP are in the log: a client in the
server's process (the controller stand-in) is not, so this replay is for runs whose controller
is a process of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from mcd_sim import nodephase
from mcd_sim.apiserver.patch import merge_patch
from mcd_sim.timeline import NodeSample

Obj = dict[str, Any]


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def node_writes(lines: Iterable[str]) -> list[tuple[float, str, str, Obj]]:
    """(completed at, node, verb, body) of every successful patch or update of a Node, in order."""
    out = []
    for line in lines:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if (
            ref.get("resource") == "nodes"
            and ref.get("name")
            and not ref.get("subresource")
            and event.get("verb") in ("patch", "update")
            and 200 <= code < 300
            and isinstance(event.get("requestObject"), dict)
        ):
            out.append((_when(event["stageTimestamp"]), ref["name"], event["verb"], event["requestObject"]))
    return sorted(out, key=lambda w: w[0])


def replay(lines: Iterable[str], seed: Mapping[str, Obj], since: float) -> list[NodeSample]:
    """Samples of each Node after every write, times relative to `since`; `seed` is each node as
    it was before the log starts (what in-process writes made of it)."""
    nodes = {name: dict(obj) for name, obj in seed.items()}
    samples = []
    for t, name, verb, body in node_writes(lines):
        node = merge_patch(nodes.get(name, {}), body) if verb == "patch" else dict(body)
        nodes[name] = node
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        ready = nodephase.ready(
            (node.get("status") or {}).get("conditions") or [],
            bool((node.get("spec") or {}).get("unschedulable")),
        )
        sample = {k: str(annotations[k]) for k in nodephase.KEYS if annotations.get(k) is not None}
        samples.append(NodeSample(t - since, name, sample, ready))
    return samples
