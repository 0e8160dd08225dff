"""What the sync writes on the Node while it updates (in process, on a sandbox root)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer

from mcd.agent.kube import annotations as ann
from mcd.agent.sync import Result

POLICY = "/etc/containers/policy.json"  # a rebootless change: the default policy reloads crio
OLD = mc_object("rendered-old", files=[ign_file(POLICY, "{}\n")])
NEW = mc_object("rendered-new", files=[ign_file(POLICY, '{"default": []}\n')])


@pytest.mark.parametrize("state", ["Degraded", "Unreconcilable"])
def test_an_update_of_a_degraded_node_keeps_its_state_and_reason_until_done(
    tmp_path: Path, state: str
) -> None:
    root = make_root(tmp_path, OLD)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: "rendered-new",
                     ann.STATE: state, ann.REASON: "the reason it is in"})  # fmt: skip
    api.mcs["rendered-new"] = NEW
    assert syncer(root, api).sync(boot=False) is Result.IDLE
    # upstream writes no Working on such a node: state and reason stay until Done
    assert api.states() == [(state, "the reason it is in"), ("Done", "")]
