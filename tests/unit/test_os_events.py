"""Upstream's OS update events (spec §5.1 and §12), from the plan the agent runs: pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from builders import load, mc, mc_object

from mcd.agent.osevents import os_events_after, os_events_before, os_update_staged
from mcd.agent.report.events import EventRecorder
from mcd.config.machineconfig import OCL_IMAGE_ANNOTATION
from mcd.planner.nodefacts import Facts
from mcd.planner.plan import plan

A = "quay.io/openshift/os@sha256:" + "a" * 64
B = "quay.io/openshift/os@sha256:" + "b" * 64


def _plan(old_spec: dict[str, Any], new_spec: dict[str, Any], booted: str = A) -> Any:
    old, new = mc("rendered-a", **old_spec), mc("rendered-b", **new_spec)
    facts = Facts(booted_image=booted, requested_packages=(), requested_base_removals=())
    return old, new, plan(old, new, facts)


def test_an_image_change_announces_the_upgrade_and_reports_it_applied() -> None:
    old, new, p = _plan({"osImageURL": A}, {"osImageURL": B})
    assert os_events_before(p, new) == [
        ("InClusterUpgrade", f"Updating from oscontainer {B}"),
        ("OSUpdateStarted", "Upgrading OS"),
    ]
    assert os_events_after(p, old, new) == [
        ("OSUpgradeApplied", f"OS upgrade applied; new MachineConfig (rendered-b) has new OS image ({B})")
    ]


def test_an_image_the_node_already_booted_is_reported_skipped() -> None:
    old, new, p = _plan({"osImageURL": A}, {"osImageURL": B}, booted=B)
    assert os_events_after(p, old, new) == [
        (
            "OSUpgradeSkipped",
            f"OS upgrade skipped; new MachineConfig (rendered-b) has same OS image ({B}) "
            "as old MachineConfig (rendered-a)",
        )
    ]


@pytest.mark.parametrize(
    ("new_spec", "started"),
    [
        ({"osImageURL": A, "kernelArguments": ["nosmt"]}, "Changing kernel arguments"),
        ({"osImageURL": A, "extensions": ["usbguard"]}, "Installing extensions"),
        ({"osImageURL": B, "kernelType": "realtime"}, "Upgrading OS; Changing kernel type"),
    ],
)
def test_the_started_event_lists_what_changes_in_upstream_words(
    new_spec: dict[str, Any], started: str
) -> None:
    _, new, p = _plan({"osImageURL": A}, new_spec)
    assert os_events_before(p, new)[-1] == ("OSUpdateStarted", started)


def test_a_realtime_node_announces_its_kernel_on_every_update() -> None:
    spec = {"osImageURL": A, "kernelType": "realtime"}
    _, new, p = _plan(spec, {**spec, "kernelArguments": []})
    assert os_events_before(p, new) == [
        ("OSUpdateStarted", "Updating to a target config with realtime kernel")
    ]


def test_a_config_without_os_changes_posts_no_os_event() -> None:
    old, new, p = _plan({"osImageURL": A}, {"osImageURL": A})
    assert os_events_before(p, new) == []
    assert os_events_after(p, old, new) == []


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "staged"),
    [
        pytest.param({"osImageURL": A}, {"osImageURL": B}, True, id="image"),
        pytest.param({"osImageURL": A}, {"osImageURL": A, "kernelArguments": ["nosmt"]}, True, id="kargs"),
        pytest.param({"osImageURL": A}, {"osImageURL": A, "extensions": ["usbguard"]}, True, id="extensions"),
        pytest.param(
            {"osImageURL": A, "kernelType": "realtime"},
            {"osImageURL": A, "kernelType": "realtime"},
            True,
            id="realtime-reapplied",
        ),
        pytest.param({"osImageURL": A}, {"osImageURL": A}, False, id="no-os-change"),
    ],
)
def test_the_os_update_is_staged_when_upstreams_os_step_runs_to_its_end(
    old_spec: dict[str, Any], new_spec: dict[str, Any], staged: bool
) -> None:
    _, new, p = _plan(old_spec, new_spec)
    assert os_update_staged(p, new) is staged


def test_no_staged_event_under_on_cluster_layering() -> None:
    """Upstream's OS step returns before the event when the config is a layered image."""
    layered = mc_object("rendered-b", osImageURL=A)
    layered["metadata"]["annotations"] = {OCL_IMAGE_ANNOTATION: B}
    old, new = mc("rendered-a", osImageURL=A), load(layered)
    p = plan(old, new, Facts(booted_image=A, requested_packages=(), requested_base_removals=()))
    assert p.diff.os_update
    assert os_update_staged(p, new) is False


def test_the_staged_event_is_posted_at_once_in_the_default_namespace() -> None:
    posted: list[tuple[str, dict[str, Any]]] = []

    class Api:
        def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
            posted.append((namespace, dict(event)))

    recorder = EventRecorder(Api(), "worker-0")  # never started: nothing goes through the queue
    recorder.post_now("OSUpdateStaged", "Changes to OS staged")
    [(namespace, event)] = posted
    assert namespace == event["metadata"]["namespace"] == "default"
    assert (event["reason"], event["message"], event["type"]) == (
        "OSUpdateStaged",
        "Changes to OS staged",
        "Normal",
    )
    # upstream builds this reference by hand: no namespace, no apiVersion, no reporting fields
    assert event["involvedObject"] == {"kind": "Node", "name": "worker-0", "uid": ""}
    assert "reportingComponent" not in event and "reportingInstance" not in event
