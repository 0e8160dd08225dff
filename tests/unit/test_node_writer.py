"""The Node writer: merge patches with resourceVersion preconditions; nothing sent when nothing changes."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from mcd.agent.errors import TransientError
from mcd.agent.report.node import NodeWriter
from mcd.kube.errors import ConflictError
from mcd.node import annotations as ann
from mcd.node.annotations import NodeState


class Api:
    def __init__(self, annotations: dict[str, str]) -> None:
        meta = {"name": "n", "resourceVersion": "1", "annotations": annotations}
        self.node: dict[str, Any] = {"metadata": meta}
        self.patches: list[Mapping[str, Any]] = []
        self.conflicts = 0
        self.gets = 0

    def get_node(self, name: str) -> dict[str, Any]:
        self.gets += 1
        return copy.deepcopy(self.node)

    def patch_node(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> dict[str, Any]:
        self.patches.append(copy.deepcopy(patch))
        if self.conflicts:
            self.conflicts -= 1
            self.bump({ann.DESIRED_CONFIG: "moved"})
            raise ConflictError(409, "modified")
        assert patch["metadata"]["resourceVersion"] == self.node["metadata"]["resourceVersion"]
        for k, v in (patch["metadata"].get("annotations") or {}).items():
            if v is None:
                self.node["metadata"]["annotations"].pop(k, None)
            else:
                self.node["metadata"]["annotations"][k] = v
        if "spec" in patch:
            self.node.setdefault("spec", {}).update(patch["spec"])
        self.bump({})
        return copy.deepcopy(self.node)

    def bump(self, changes: dict[str, str]) -> None:
        self.node["metadata"]["annotations"].update(changes)
        self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)


def test_unchanged_values_send_nothing() -> None:
    api = Api({ann.STATE: "Done", ann.REASON: ""})
    w = NodeWriter(api, "n")
    w.set_state(NodeState.DONE)
    assert api.patches == []


def test_only_changed_keys_are_patched_with_the_resource_version() -> None:
    api = Api({ann.STATE: "Done", ann.REASON: "", ann.CURRENT_CONFIG: "a"})
    w = NodeWriter(api, "n")
    w.set_state(NodeState.WORKING, extra={ann.CURRENT_CONFIG: "a", ann.DESIRED_IMAGE: None})
    assert api.patches == [{"metadata": {"resourceVersion": "1", "annotations": {ann.STATE: "Working"}}}]


def test_a_conflict_reads_the_node_again_and_retries() -> None:
    api = Api({ann.STATE: "Done"})
    w = NodeWriter(api, "n")
    w.refresh()
    api.conflicts = 1
    view = w.set_annotations({ann.STATE: "Working"})
    assert view.state is NodeState.WORKING and view.desired_config == "moved"
    assert [p["metadata"]["resourceVersion"] for p in api.patches] == ["1", "2"]


def test_endless_conflicts_are_transient() -> None:
    api = Api({})
    api.conflicts = 100
    with pytest.raises(TransientError):
        NodeWriter(api, "n").set_annotations({ann.STATE: "Working"})


def test_cordon_and_annotation_go_in_one_patch_and_deletes_only_present_keys() -> None:
    api = Api({"x": "1"})
    w = NodeWriter(api, "n")
    w.set_annotations({"mark": "c", "absent": None, "x": None}, unschedulable=True)
    assert api.patches == [{"metadata": {"resourceVersion": "1", "annotations": {"mark": "c", "x": None}},
                            "spec": {"unschedulable": True}}]  # fmt: skip


def test_an_older_copy_from_the_watch_does_not_replace_a_newer_one() -> None:
    api = Api({ann.STATE: "Done"})
    w = NodeWriter(api, "n")
    w.observe({"metadata": {"name": "n", "resourceVersion": "5", "annotations": {ann.STATE: "Working"}}})
    w.observe({"metadata": {"name": "n", "resourceVersion": "4", "annotations": {ann.STATE: "Done"}}})
    assert w.node().state is NodeState.WORKING


def test_a_copy_without_resource_version_is_ignored_and_never_leads_to_an_unconditional_patch() -> None:
    """Reported: a watch event with no resourceVersion replaced the cached Node, and the next
    write went out as a PATCH without precondition (the node marked Degraded over others' edits)."""
    api = Api({ann.STATE: "Done", ann.REASON: "", ann.DESIRED_CONFIG: "a"})
    w = NodeWriter(api, "n")
    w.refresh()
    stray = {"metadata": {"name": "n", "annotations": {ann.STATE: "Done", ann.DESIRED_CONFIG: "zzz"}}}
    assert w.observe(stray).resource_version == "1"
    assert w.node().desired_config == "a"
    w.set_state(NodeState.DEGRADED, "boom")
    assert [p["metadata"]["resourceVersion"] for p in api.patches] == ["1"]
    fresh = NodeWriter(api, "n")
    assert fresh.observe(stray).resource_version == ""
    assert fresh.cached is None
