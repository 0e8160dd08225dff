"""The agent as a real process against a test API server and a sandbox root: updates end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.config.machineconfig import OCL_IMAGE_ANNOTATION
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands


def _wait_started(cluster: Cluster, config: str) -> None:
    """The agent took its boot path: it asked for the uncordon of its config and reported Done."""
    want = f"uncordon-{config}"
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.LAST_APPLIED_DRAIN) == want)
    cluster.wait_node(NODE, done_on(config))


def _boot_node(cluster: Cluster, config: str) -> None:
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: config, ann.DESIRED_CONFIG: config, ann.STATE: "Done"})


def _started_on(
    cluster: Cluster,
    start_agent: Callable[..., Agent],
    tmp_path: Path,
    a: dict[str, Any],
    b: dict[str, Any],
) -> tuple[Path, Agent]:
    """Node Done on `a` (rendered-worker-a) with the agent running; `b` served, drains answered."""
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    cluster.answer_drains()
    _boot_node(cluster, "rendered-worker-a")
    agent = start_agent(cluster, root)
    _wait_started(cluster, "rendered-worker-a")
    return root, agent


def _started_on_a_with_b_keys(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> tuple[Path, Agent]:
    """Node Done on rendered-worker-a with the agent running; rendered-worker-b adds an SSH key."""
    a = config_a()
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")],
                  ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip
    return _started_on(cluster, start_agent, tmp_path, a, b)


def test_rebootless_ssh_key_change_goes_working_then_done(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root, agent = _started_on_a_with_b_keys(cluster, start_agent, tmp_path)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    keys = (root / "home/core/.ssh/authorized_keys.d/ignition").read_text()
    assert "BBBB two" in keys
    assert cluster.state_history(NODE) == ["Done", "Working", "Done"]
    cluster.wait_event("NodeDone", 2)
    assert "SkipReboot" in cluster.event_reasons()
    assert agent.stop() == 0


REG_OLD = '[[registry]]\n  prefix = ""\n  location = "quay.io/a"\n'
REG_NEW = (
    REG_OLD
    + '\n  [[registry.mirror]]\n    location = "mirror.example.com/a"\n    pull-from-mirror = "digest-only"\n'
)
REG = "/etc/containers/registries.conf"


def test_registries_mirror_is_applied_with_a_crio_reload_and_no_drain(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = mc_object("rendered-worker-a", files=[ign_file(REG, REG_OLD)])
    b = mc_object("rendered-worker-b", files=[ign_file(REG, REG_NEW)])
    root, _ = _started_on(cluster, start_agent, tmp_path, a, b)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    assert (root / REG.lstrip("/")).read_text() == REG_NEW
    cluster.wait_event("ServiceReload")
    [msg] = cluster.event_messages("ServiceReload")
    assert msg.startswith("Config changes do not require reboot. Service crio was reloaded.")
    drains = [v for v in cluster.annotation_values(ann.DESIRED_DRAIN) if v.startswith("drain-")]
    assert drains == []


def test_kernel_argument_change_drains_reboots_simulated_and_ends_done(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    b = dict(config_a(), metadata={"name": "rendered-worker-b"})
    b["spec"] = dict(b["spec"], kernelArguments=["nosmt"])
    _, agent = _started_on(cluster, start_agent, tmp_path, a, b)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"))
    agent.wait_log("reboot simulated")
    assert node["metadata"]["annotations"][ann.POST_CONFIG_ACTION] == ""
    assert not node.get("spec", {}).get("unschedulable")
    assert cluster.state_history(NODE) == ["Done", "Working", "Done"]
    assert cluster.annotation_values(ann.DESIRED_DRAIN) == [
        "uncordon-rendered-worker-a", "drain-rendered-worker-b", "uncordon-rendered-worker-b",
    ]  # fmt: skip
    assert cluster.annotation_values(ann.POST_CONFIG_ACTION) == ["Rebooting", ""]
    cluster.wait_event("NodeDone", 2)
    reasons = cluster.event_reasons()
    assert (
        reasons.index("Drain") < reasons.index("Reboot") < len(reasons) - 1 - reasons[::-1].index("NodeDone")
    )


def test_disk_change_is_unreconcilable_and_changes_nothing(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    b = dict(config_a(), metadata={"name": "rendered-worker-b"})
    ign = dict(b["spec"]["config"])
    ign["storage"] = dict(ign["storage"], disks=[{"device": "/dev/vdb", "wipeTable": True}])
    b["spec"] = dict(b["spec"], config=ign)
    _started_on(cluster, start_agent, tmp_path, a, b)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    node = cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.STATE) == "Unreconcilable")
    reason = node["metadata"]["annotations"][ann.REASON]
    assert reason.startswith("can't reconcile config rendered-worker-a with rendered-worker-b: ")
    assert node["metadata"]["annotations"][ann.CURRENT_CONFIG] == "rendered-worker-a"
    cluster.wait_event("FailedToReconcile")
    assert cluster.event_messages("FailedToReconcile") == [reason]
    # upstream's update() writes Working before its reconcile check
    assert cluster.state_history(NODE) == ["Done", "Working", "Unreconcilable"]


def test_hand_edited_file_degrades_the_update_and_the_forcefile_recovers(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root, agent = _started_on_a_with_b_keys(cluster, start_agent, tmp_path)
    (root / "etc/mcd-test/a.conf").write_text("a=2\n")
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    # the monitor may report the edit first (the bare message); the update's preflight check then
    # refuses to start with upstream's prefix
    reason = (
        "unexpected on-disk state validating against rendered-worker-a: "
        'content mismatch for file "/etc/mcd-test/a.conf"'
    )
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.REASON) == reason)
    cluster.wait_event("PreflightConfigDriftCheckFailed")
    (root / "run").mkdir(exist_ok=True)
    (root / "run/machine-config-daemon-force").touch()
    cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=1\n"
    assert not (root / "run/machine-config-daemon-force").exists()
    agent.wait_log("reboot simulated")


def test_first_start_takes_the_bootstrap_annotations_and_keeps_the_file_as_bak(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    boot = {"currentConfig": "rendered-worker-a", "desiredConfig": "rendered-worker-a",
            "firstPivotConfig": "rendered-worker-a", "state": "Done"}  # fmt: skip
    (root / "etc/machine-config-daemon/node-annotations.json").write_text(json.dumps(boot))
    cluster.add_mc(a)
    cluster.answer_drains()
    cluster.add_node(NODE)
    agent = start_agent(cluster, root)
    agent.wait_log("is in config rendered-worker-a: Done")
    node = cluster.node(NODE)
    assert node["metadata"]["annotations"][ann.FIRST_PIVOT_CONFIG] == "rendered-worker-a"
    assert node["metadata"]["annotations"][ann.DESIRED_CONFIG] == "rendered-worker-a"
    assert not (root / "etc/machine-config-daemon/node-annotations.json").exists()
    assert json.loads((root / "etc/machine-config-daemon/node-annotation.json.bak").read_text()) == boot


def test_on_disk_config_wins_over_the_annotation_with_upstreams_log_line(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.answer_drains()
    old = {
        ann.CURRENT_CONFIG: "rendered-worker-old",
        ann.DESIRED_CONFIG: "rendered-worker-a",
        ann.STATE: "Working",
    }
    cluster.add_node(NODE, old)
    agent = start_agent(cluster, root)
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    agent.wait_log(
        'Disk currentConfig "rendered-worker-a" overrides node\'s currentConfig annotation "rendered-'
    )


def test_sigterm_while_waiting_for_the_controller_exits_cleanly_and_reports_no_error(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = make_root(tmp_path, config_a())
    cluster.add_mc(config_a())
    _boot_node(cluster, "rendered-worker-a")
    agent = start_agent(cluster, root)  # no controller: the uncordon request is never answered
    cluster.wait_node(
        NODE, lambda n: n["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == "uncordon-rendered-worker-a"
    )
    assert agent.stop() == 0
    assert cluster.annotations()[ann.STATE] == "Done"
    assert cluster.state_history() == ["Done"]
    # the boot path is no update: no SIGTERM protection (upstream exits at once there)
    assert not {"GotSigtermDuringUpdate", "AddSigtermProtection"} & set(cluster.event_reasons())


def test_sigterm_during_an_update_is_reported_in_upstreams_words(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/app.conf", "b\n")])  # drain and reboot
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    a_name = "rendered-worker-a"
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: a_name, ann.DESIRED_CONFIG: a_name, ann.STATE: "Done",
                            ann.LAST_APPLIED_DRAIN: f"uncordon-{a_name}"})  # fmt: skip
    agent = start_agent(cluster, root)  # no controller: the drain is never answered
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(
        NODE, lambda n: n["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == "drain-rendered-worker-b"
    )
    assert agent.stop() == 0
    assert "Got SIGTERM, but actively updating" in agent.log
    assert cluster.event_messages("GotSigtermDuringUpdate") == ["Got SIGTERM but actively updating"]
    reasons = cluster.event_reasons()
    added, removed = reasons.index("AddSigtermProtection"), reasons.index("RemoveSigtermProtection")
    assert added < reasons.index("Drain") < reasons.index("GotSigtermDuringUpdate") < removed


def test_a_hand_edit_under_a_layered_image_names_the_image_in_the_reason(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """On-cluster layering: the preflight check's reason names the image the node should run
    (upstream's wording), not the rendered config's name."""
    image = "quay.io/example/layered@sha256:" + "ab" * 32
    a = config_a()
    a["metadata"]["annotations"] = {OCL_IMAGE_ANNOTATION: image}
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")])
    b["metadata"]["annotations"] = {OCL_IMAGE_ANNOTATION: image}
    root, _ = _started_on(cluster, start_agent, tmp_path, a, b)
    (root / "etc/mcd-test/a.conf").write_text("a=2\n")
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    # (the drift monitor may report the edit first, with the bare message)
    mismatch = 'content mismatch for file "/etc/mcd-test/a.conf"'
    reason = f"unexpected on-disk state validating against {image}: {mismatch}"
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.REASON) == reason)
    cluster.wait_event("PreflightConfigDriftCheckFailed")
