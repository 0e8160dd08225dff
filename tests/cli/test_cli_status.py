"""`mcd status`: the node's status from its root alone, as text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import ign_file, mc_object

from mcd.cli.main import main
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.host.status import record_drift, record_state


def _status(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, str]:
    code = main(["status", "--root-mount", str(root), *extra])
    return code, capsys.readouterr().out


def _with_config(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc/machine-config-daemon").mkdir(parents=True)
    obj = mc_object("rendered-worker-a", files=[ign_file("/etc/a", "a")])
    (root / "etc/machine-config-daemon/currentconfig").write_text(json.dumps(obj))
    return root


def test_a_root_never_configured(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = _status(capsys, tmp_path, "-o", "json")
    assert code == 0
    assert json.loads(out) == {
        "currentConfig": "", "desiredConfig": "", "state": "", "reason": "", "since": "",
        "lastDrift": None, "rebootOwed": None, "updateInProgress": False,
    }  # fmt: skip


def test_a_node_applied_once_and_never_run_by_the_daemon_is_done(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _status(capsys, _with_config(tmp_path))
    assert code == 0
    assert "current config:  rendered-worker-a\n" in out
    assert "state:           Done\n" in out
    assert "reboot owed:     no\n" in out
    assert "last drift:      none seen\n" in out


def test_degraded_with_drift_and_a_reboot_owed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _with_config(tmp_path)
    hr = HostRoot(root)
    record_state(hr, "Degraded", 'content mismatch for file "/etc/a"', "rendered-worker-b")
    record_drift(hr, "/etc/a", 'content mismatch for file "/etc/a"', "rendered-worker-a", 0.0)
    state.mark_reboot(hr, "rendered-worker-a", "kernel arguments changed")
    obj = json.loads(_status(capsys, root, "-o", "json")[1])
    assert obj["state"] == "Degraded"
    assert obj["desiredConfig"] == "rendered-worker-b"
    assert obj["reason"] == 'content mismatch for file "/etc/a"'
    assert obj["lastDrift"] == {
        "path": "/etc/a", "reason": 'content mismatch for file "/etc/a"', "config": "rendered-worker-a",
        "time": "1970-01-01T00:00:00Z",
    }  # fmt: skip
    assert obj["rebootOwed"] == {"config": "rendered-worker-a", "reason": "kernel arguments changed"}
    text = _status(capsys, root)[1]
    assert "reason:          content mismatch" in text
    assert "reboot owed:     yes, for rendered-worker-a (kernel arguments changed)" in text


def test_a_missing_root_is_an_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["status", "--root-mount", str(tmp_path / "nope")]) == 1
    assert capsys.readouterr().err == f"mcd: --root-mount {tmp_path / 'nope'} is not a directory\n"
