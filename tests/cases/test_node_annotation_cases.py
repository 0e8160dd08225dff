"""Upstream's truncate and prepUpdateFromCluster tables against mcd.node.annotations."""

from __future__ import annotations

from typing import Any

import pytest
from casefiles import case_params, load_cases

from mcd.node import annotations as ann
from mcd.node.annotations import NodeView, decide_update


@pytest.mark.parametrize("case", case_params(load_cases("misc.json", "truncate")))
def test_truncate_matches_upstream(case: dict[str, Any]) -> None:
    assert ann.truncate(case["input"]["s"], case["input"]["limit"]) == case["expected"]["out"]


@pytest.mark.parametrize("case", case_params(load_cases("misc.json", "prep_update_from_cluster")))
def test_decide_update_matches_upstream(case: dict[str, Any]) -> None:
    inp, want = case["input"], case["expected"]
    node = NodeView("n", {ann.PREFIX + k: v for k, v in inp["nodeAnnotations"].items()})
    got = decide_update(node, inp["onDiskCurrentConfigName"], inp["onDiskCurrentImage"])
    assert got.update == want["update"]
    for key, attr in (("currentConfig", "current_config"), ("desiredConfig", "desired_config"),
                      ("currentImage", "current_image"), ("desiredImage", "desired_image")):  # fmt: skip
        if key in want:
            assert getattr(got, attr) == want[key]
