"""The agent's adapter to the executor: action labels as values, the recorded config parsed once."""

from __future__ import annotations

from pathlib import Path

from harness import config_a, make_root

from mcd.agent.node_apply import NodeApplier, ServiceAction, _service_action
from mcd.host.root import HostRoot
from mcd.host.runner import RecordingRunner


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
