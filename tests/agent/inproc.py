"""The sync in this process: a real `Syncer`, `NodeWriter` and `NodeApplier` on a sandbox root,
with an in-memory Node and MachineConfig store instead of an API server (no threads, no waits)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from unittest import mock

from recording import RecordingRunner

from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.sync import Syncer
from mcd.host.root import HostRoot
from mcd.host.runner import Runner
from mcd.kube.errors import NotFoundError
from mcd.node import annotations as ann

NODE = "worker-0"


class MemoryApi:
    """A Node (merge patches, resourceVersions, every committed version kept) and MachineConfigs."""

    def __init__(self, annotations: dict[str, str]) -> None:
        self.rv = 1
        self.obj: dict[str, Any] = {
            "metadata": {"name": NODE, "resourceVersion": "1", "annotations": dict(annotations)},
            "spec": {},
        }
        self.history: list[dict[str, str]] = [dict(annotations)]
        self.mcs: dict[str, dict[str, Any]] = {}

    def get_node(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.obj)

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        annotations = self.obj["metadata"]["annotations"]
        for key, value in (patch.get("metadata", {}).get("annotations") or {}).items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if "spec" in patch:
            self.obj["spec"].update(patch["spec"])
        self.rv += 1
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append(dict(annotations))
        return copy.deepcopy(self.obj)

    def set(self, **changes: str | None) -> None:
        """A change by someone else (the controller, an admin): keys without the prefix."""
        self.patch_node(NODE, {"metadata": {"annotations": {ann.PREFIX + k: v for k, v in changes.items()}}})

    def get_machineconfig_json(self, name: str) -> tuple[dict[str, Any], bytes | None]:
        if name not in self.mcs:
            raise NotFoundError(404, f"machineconfig {name} not found")
        text = json.dumps(self.mcs[name]).encode()  # as an API server sends it
        return json.loads(text), text

    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None:
        return None

    def states(self) -> list[tuple[str, str]]:
        """(state, reason) of every committed version, repeats collapsed."""
        out: list[tuple[str, str]] = []
        for a in self.history:
            pair = (a.get(ann.STATE, ""), a.get(ann.REASON, ""))
            if not out or out[-1] != pair:
                out.append(pair)
        return out


def syncer(
    root: Path,
    api: MemoryApi,
    runner: Runner | None = None,
    events: EventRecorder | None = None,
    **hooks: Any,
) -> Syncer:
    writer = NodeWriter(api, NODE)
    return Syncer(
        api=api,
        writer=writer,
        events=events or EventRecorder(None, NODE),
        metrics=Metrics(),
        applier=NodeApplier(HostRoot(root), runner or RecordingRunner()),
        drainer=mock.MagicMock(),
        **hooks,
    )
