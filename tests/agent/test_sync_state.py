"""What the sync writes on the Node while it updates (in process, on a sandbox root)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer

from mcd.agent.sync import Result
from mcd.node import annotations as ann
from mcd.node.errors import McdError

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


IMAGE = "quay.io/openshift/os@sha256:" + "b" * 64


def test_a_desired_image_is_one_update_with_a_reboot_then_done_in_that_image(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    api = MemoryApi(
        {ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: "rendered-old", ann.STATE: "Done"}
    )
    api.mcs["rendered-old"] = OLD
    s = syncer(root, api)
    assert s.sync(boot=True) is Result.IDLE
    api.set(desiredImage=IMAGE)  # the controller built the pool's image
    s.writer.refresh()  # what the watch does
    # an OS change: the update records the image and asks for the reboot (simulated here)
    assert s.sync(boot=False) is Result.SIMULATED_REBOOT
    assert (root / "etc/machine-config-daemon/currentimage").read_text() == IMAGE
    after = syncer(root, api)  # the process after the boot
    assert after.sync(boot=True) is Result.IDLE
    a = api.history[-1]
    assert (a[ann.STATE], a[ann.CURRENT_IMAGE], a[ann.DESIRED_IMAGE]) == ("Done", IMAGE, IMAGE)
    writes = len(api.history)
    assert after.sync(boot=False) is Result.IDLE  # nothing more to do: no loop
    assert len(api.history) == writes
    assert [s for s, _ in api.states()] == ["Done", "Working", "Done"]


def test_a_failing_boot_check_is_retried_without_recovering_again(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    (root / POLICY.lstrip("/")).write_text("edited\n")
    api = MemoryApi(
        {ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: "rendered-old", ann.STATE: "Done"}
    )
    s = syncer(root, api)
    calls: list[str] = []
    s.applier.recover = lambda: calls.append("recover")  # type: ignore[method-assign]
    s.applier.cleanup_rollback = lambda: calls.append("cleanup -r")  # type: ignore[method-assign]
    for _ in range(3):
        with pytest.raises(McdError, match="unexpected on-disk state validating against rendered-old"):
            s.sync(boot=True)
    assert calls == ["recover", "cleanup -r"]
    (root / POLICY.lstrip("/")).write_text("{}\n")  # put back: the next try is Done
    assert s.sync(boot=True) is Result.IDLE
    assert calls == ["recover", "cleanup -r"]
