"""The Events an update posts, in upstream's order and words (in process, on a sandbox root):
SIGTERM protection around the whole update, FailedToReconcile, a failed action's Event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer

from mcd.agent.applied import ApplyError
from mcd.agent.errors import UnreconcilableError
from mcd.agent.report.events import EventRecorder
from mcd.agent.sync import Result, Syncer
from mcd.node import annotations as ann
from mcd.node.errors import McdError

POLICY = "/etc/containers/policy.json"  # the default policy reloads crio: rebootless
OLD = mc_object("rendered-old", files=[ign_file(POLICY, "{}\n")])
NEW = mc_object("rendered-new", files=[ign_file(POLICY, '{"default": []}\n')])
ADD = ("Normal", "AddSigtermProtection", "Adding SIGTERM protection")
REMOVE = ("Normal", "RemoveSigtermProtection", "Removing SIGTERM protection")


class Recorded(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, "worker-0")
        self.seen: list[tuple[str, str, str]] = []

    def record(self, etype: str, reason: str, message: str) -> None:
        self.seen.append((etype, reason, message))


def _updating(tmp_path: Path, new: dict[str, Any]) -> tuple[Syncer, Recorded, MemoryApi]:
    root = make_root(tmp_path, OLD)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: new["metadata"]["name"],
                     ann.STATE: "Done"})  # fmt: skip
    api.mcs[new["metadata"]["name"]] = new
    events = Recorded()
    s = syncer(root, api, events=events)
    return s, events, api


def test_a_rebootless_update_is_protected_from_start_to_done(tmp_path: Path) -> None:
    s, events, _ = _updating(tmp_path, NEW)
    assert s.sync(boot=False) is Result.IDLE
    reasons = [r for _, r, _ in events.seen]
    # upstream: on after Working, off when update() returns, Done written before it
    assert events.seen[0] == ADD
    assert events.seen[-1] == REMOVE
    assert reasons.index("NodeDone") < reasons.index("RemoveSigtermProtection")
    assert reasons.count("AddSigtermProtection") == reasons.count("RemoveSigtermProtection") == 1
    assert not s.protection.on


def test_protection_ends_before_the_reboot_event(tmp_path: Path) -> None:
    rebooting = mc_object("rendered-new", files=[ign_file("/etc/app.conf", "b\n")])  # a reboot by policy
    s, events, _ = _updating(tmp_path, rebooting)
    assert s.sync(boot=False) is Result.SIMULATED_REBOOT
    reasons = [r for _, r, _ in events.seen]
    assert reasons[0] == "AddSigtermProtection"
    assert reasons.index("RemoveSigtermProtection") == reasons.index("Reboot") - 1
    assert reasons.count("RemoveSigtermProtection") == 1


def test_an_unreconcilable_update_is_working_then_failed_to_reconcile_in_upstreams_words(
    tmp_path: Path,
) -> None:
    disks = mc_object("rendered-new")
    disks["spec"]["config"]["storage"] = {"disks": [{"device": "/dev/vdb", "wipeTable": True}]}
    s, events, api = _updating(tmp_path, disks)
    with pytest.raises(UnreconcilableError) as info:
        s.sync(boot=False)
    # upstream's update() writes Working before its reconcile check
    assert [state for state, _ in api.states()] == ["Done", "Working"]
    reason = str(info.value)
    assert reason.startswith(
        "can't reconcile config rendered-old with rendered-new: configs rendered-old, rendered-new "
        "are not reconcilable: "
    )
    assert events.seen == [ADD, ("Warning", "FailedToReconcile", reason), REMOVE]


def test_a_failed_action_posts_its_event_and_the_protection_ends(tmp_path: Path) -> None:
    s, events, _ = _updating(tmp_path, NEW)
    failed = ("FailedServiceReload", "Reloading service crio failed. Error: Job for crio.service failed")

    def apply(*_args: object, **_kwargs: object) -> None:
        raise ApplyError("update to rendered-new failed and was rolled back: …", failed)

    s.applier.apply = apply  # type: ignore[method-assign,assignment]
    with pytest.raises(McdError):
        s.sync(boot=False)
    assert events.seen == [ADD, ("Warning", *failed), REMOVE]
