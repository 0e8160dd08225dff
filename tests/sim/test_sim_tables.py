"""Server-side printing: kubectl's age format and the node status column."""

from __future__ import annotations

import pytest
from mcd_sim.apiserver import resource_type
from mcd_sim.apiserver.tables import human_duration, table


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"), (3 * 3600, "3h"),
     (5 * 3600 + 600, "5h10m"), (30 * 3600, "30h"), (3 * 86400 + 4 * 3600, "3d4h"), (400 * 86400, "400d"),
     (3 * 365 * 86400 + 30 * 86400, "3y30d"), (9 * 365 * 86400, "9y")],
)  # fmt: skip
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_node_row() -> None:
    node = {
        "metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}],
                   "nodeInfo": {"kubeletVersion": "v1"}},
    }  # fmt: skip
    out = table(resource_type("Node"), [node], now=1767225600.0 + 90)
    assert out["rows"][0]["cells"][:5] == ["n", "NotReady,SchedulingDisabled", "infra,worker", "90s", "v1"]
    assert out["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert [c["name"] for c in out["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Roles", "Age", "Version"
    ]  # fmt: skip
