"""The agent's adapter to the executor: action labels as values, the recorded config parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import config_a, make_root
from recording import RecordingRunner
from trees import walk

from mcd.agent.node_apply import NodeApplier, ServiceAction, _service_action
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.policy import DEFAULT_POLICIES


def test_executor_action_labels_become_values() -> None:
    assert _service_action("reload crio.service") == ServiceAction("reload", "crio", skipped=False)
    assert _service_action("restart kubelet.service (skipped: not the live root)") == ServiceAction(
        "restart", "kubelet", skipped=True
    )
    assert _service_action("daemon-reload") == ServiceAction("daemon-reload", "", skipped=False)


def test_recorded_config_is_parsed_once_per_version(tmp_path: Path) -> None:
    root = make_root(tmp_path, config_a())
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    first = applier.disk_config()
    assert first is not None and first.name == "rendered-worker-a"
    assert applier.disk_config() is first
    current = root / "etc/machine-config-daemon/currentconfig"
    current.write_text(current.read_text().replace("rendered-worker-a", "rendered-worker-z"))
    changed = applier.disk_config()
    assert changed is not None and changed.name == "rendered-worker-z"


def test_check_reports_the_first_difference_with_upstreams_text(tmp_path: Path) -> None:
    root = make_root(tmp_path, config_a())
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    mc = applier.disk_config()
    assert mc is not None
    assert applier.check(mc) is None
    (root / "etc/mcd-test/a.conf").chmod(0o600)
    assert applier.check(mc) == (
        'mode mismatch for file: "/etc/mcd-test/a.conf"; '
        "expected: -rw-r--r--/420/0644; received: -rw-------/384/0600"
    )


@pytest.mark.allow_commands
def test_reapplying_the_current_config_repairs_units_dropins_and_links(tmp_path: Path) -> None:
    unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    obj = mc_object(
        "rendered-worker-a",
        files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")],
        units=[
            {
                "name": "hello.service",
                "enabled": True,
                "contents": unit,
                "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}],
            }
        ],
    )
    root = make_root(tmp_path, obj, SubprocessRunner())
    units = root / "etc/systemd/system"
    good = walk(root)
    (units / "hello.service").write_text("[Service]\nExecStart=/bin/false\n")
    (units / "hello.service.d/10-env.conf").unlink()
    (units / "multi-user.target.wants/hello.service").unlink()
    applier = NodeApplier(HostRoot(root), SubprocessRunner())
    mc = applier.disk_config()
    assert mc is not None and applier.check(mc) is not None
    facts = applier.facts(mc, mc, "HighlyAvailable")
    p = applier.plan(mc, mc, facts, DEFAULT_POLICIES)
    assert p.repairs == (
        "/etc/systemd/system/hello.service.d/10-env.conf",
        "/etc/systemd/system/hello.service",
        "hello.service",
    )
    applier.apply(mc, mc, facts, DEFAULT_POLICIES)
    assert applier.check(mc) is None
    assert walk(root) == good
