"""Patch formats: JSON merge, JSON patch and strategic merge."""

from __future__ import annotations

import pytest
from mcd_sim.apiserver.patch import PatchError, json_patch, merge_patch, strategic_merge_patch


def test_merge_patch_merges_objects_and_null_deletes() -> None:
    node = {"metadata": {"annotations": {"a": "1", "b": "2"}}, "spec": {"taints": [{"key": "x"}]}}
    out = merge_patch(node, {"metadata": {"annotations": {"a": None, "c": "3"}}, "spec": {"taints": []}})
    assert out == {"metadata": {"annotations": {"b": "2", "c": "3"}}, "spec": {"taints": []}}
    assert node["metadata"]["annotations"] == {"a": "1", "b": "2"}  # input untouched


def test_json_patch_operations() -> None:
    doc = {"metadata": {"labels": {"a/b": "1"}}, "list": [1, 2]}
    out = json_patch(
        doc,
        [
            {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "remove", "path": "/list/0"},
            {"op": "copy", "from": "/list", "path": "/copy"},
            {"op": "move", "from": "/copy", "path": "/moved"},
        ],
    )
    assert out == {"metadata": {"labels": {"a/b": "2"}}, "list": [2, 3], "moved": [2, 3]}
    with pytest.raises(PatchError, match="test failed"):
        json_patch(doc, [{"op": "test", "path": "/list/0", "value": 9}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/missing"}])


def test_strategic_merge_by_key_and_directives() -> None:
    pod = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
        },
        "metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
        "spec": {"taints": [{"key": "old", "effect": "NoSchedule"}], "unschedulable": False},
    }
    patch = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "$patch": "delete"}],
            "$setElementOrder/conditions": [{"type": "Ready"}],
        },
        "metadata": {"finalizers": ["b"], "labels": {"y": None}},
        "spec": {"taints": [{"key": "new", "effect": "NoExecute"}], "unschedulable": True},
    }
    out = strategic_merge_patch(pod, patch)
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert out["metadata"] == {"finalizers": ["a", "b"], "labels": {"x": "1"}}
    assert out["spec"] == {"taints": [{"key": "new", "effect": "NoExecute"}], "unschedulable": True}


def test_strategic_replace_and_delete_from_primitive_list() -> None:
    obj = {"spec": {"a": 1, "b": 2}, "metadata": {"finalizers": ["x", "y"]}}
    out = strategic_merge_patch(
        obj,
        {"spec": {"$patch": "replace", "c": 3}, "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
    )
    assert out == {"spec": {"c": 3}, "metadata": {"finalizers": ["y"]}}
