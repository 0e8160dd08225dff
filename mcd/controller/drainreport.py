"""What the drain controller tells about a drain besides the handshake: the phases on the node's
MachineConfigNode (Cordoned, Drained, Uncordoned with UpdateComplete), as upstream's drain
controller writes them, and the sentence naming the budgets that hold a drain. Best effort: a
MachineConfigNode that cannot be written is logged and the drain goes on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, ConflictError, NotFoundError
from mcd.node import annotations as ann
from mcd.node import machineconfignode as mcn
from mcd.node.drainrules import blocking_pdbs

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def budgets_sentence(pdbs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> str:
    """The budgets that allow no disruption of these pods, each with its counts, and whether it
    can ever allow one without a change to the workload or the budget. Pure."""
    by_name = {_key(p): p for p in pdbs}
    parts = []
    for name in blocking_pdbs(pdbs, pods):
        status = by_name[name].get("status") or {}
        healthy, desired, expected = (
            int(status.get(k, 0) or 0) for k in ("currentHealthy", "desiredHealthy", "expectedPods")
        )
        never = " and never will as it stands (it needs every pod it expects)" if desired >= expected else ""
        parts.append(
            f"PodDisruptionBudget {name} allows no disruption{never}: "
            f"{healthy} healthy of {expected} expected, {desired} needed"
        )
    return "; ".join(parts)


class MachineConfigNodeReports:
    def __init__(
        self, api: KubeClient, *, fence: Callable[[], None], clock: Callable[[], float] = time.time
    ) -> None:
        self.api, self.fence, self.clock = api, fence, clock

    def report(self, node: Mapping[str, Any], report: mcn.Report) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        annotations = meta.get("annotations") or {}
        desired, current = annotations.get(ann.DESIRED_CONFIG, ""), annotations.get(ann.CURRENT_CONFIG, "")
        for _ in range(3):  # a write of the agent in between: read again
            try:
                self._write(name, report, desired, current)
                return
            except ConflictError:
                continue
            except ApiError as exc:
                what = (report.child or report.parent).type
                LOG.warning("machineconfignode %s: %s not reported: %s", name, what, exc)
                return
        LOG.info("machineconfignode %s kept changing: %s not reported", name, report.parent.type)

    def _write(self, name: str, report: mcn.Report, desired: str, current: str) -> None:
        try:
            obj = self.api.get_machineconfignode(name)
        except NotFoundError:
            self.fence()
            obj = self.api.create_machineconfignode(mcn.new_object(name, mcn.pool_of(desired), desired))
        spec_desired = str(((obj.get("spec") or {}).get("configVersion") or {}).get("desired", ""))
        status = mcn.merge(
            obj.get("status"),
            report,
            spec_desired=spec_desired,
            current_config=current,
            desired_config=desired,
            now=self.clock(),
        )
        if status is None:
            return
        self.fence()
        self.api.update_machineconfignode(name, {**obj, "status": status}, status=True)
