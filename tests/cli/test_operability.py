"""Operability of the long-running commands (issue 28 item 4): a bad kubeconfig is one line,
log lines in klog's shape or JSON, warnings not repeated for the same thing, `--once-from`'s
phases as it goes."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import Run
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.logsetup import JsonFormatter, KlogFormatter, SaidOnce

REPO = Path(__file__).resolve().parents[2]
KLOG = re.compile(r"^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [\w.]+:\d+\] ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not: [valid", "not a kubeconfig: expected ',' or ']', but got '<stream end>' (line 1, column 12)"),
        ("clusters: 3\n", "clusters: expected a list of named entries"),
        ("users: [{user: {}}]\n", "users[0]: expected a mapping with a name"),
        ("- a\n", "not a kubeconfig: expected a mapping, got list"),
        ("", "empty: not a kubeconfig"),
    ],
)
@pytest.mark.parametrize("command", ["start", "pool-controller"])
def test_a_malformed_kubeconfig_is_one_line(
    run: Run, tmp_path: Path, command: str, content: str, message: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(content)
    argv = ["--kubeconfig", str(kubeconfig)]
    if command == "start":
        argv += ["--node-name", "worker-0", "--root-mount", str(tmp_path)]
    assert run(command, *argv) == (1, "", f"{kubeconfig}: {message}\n")


@pytest.mark.parametrize("command", ["start", "pool-controller"])
def test_an_unreadable_kubeconfig_is_one_line(run: Run, tmp_path: Path, command: str) -> None:
    argv = ["--kubeconfig", str(tmp_path)]  # a directory
    if command == "start":
        argv += ["--node-name", "worker-0", "--root-mount", str(tmp_path)]
    assert run(command, *argv) == (1, "", f"{tmp_path}: cannot read the kubeconfig: Is a directory\n")


def _record(level: int, msg: str, *args: object) -> logging.LogRecord:
    record = logging.LogRecord("mcd.agent.sync", level, "/x/mcd/agent/sync.py", 42, msg, args, None)
    record.created, record.process = 1795868400.123456, 4321
    return record


def test_klog_lines() -> None:
    line = KlogFormatter().format(_record(logging.WARNING, "node %s drifted", "worker-0"))
    assert KLOG.match(line), line
    assert line.startswith("W")
    assert line.endswith("    4321 sync.py:42] node worker-0 drifted")
    assert KlogFormatter().format(_record(logging.ERROR, "x")).startswith("E")
    assert KlogFormatter().format(_record(logging.INFO, "x")).startswith("I")


def test_json_lines() -> None:
    doc = json.loads(JsonFormatter().format(_record(logging.INFO, "applied %s", "rendered-x")))
    assert doc == {
        "ts": 1795868400.123456, "level": "info", "logger": "mcd.agent.sync", "caller": "sync.py:42",
        "msg": "applied rendered-x",
    }  # fmt: skip


def test_the_same_warning_is_said_once_per_window() -> None:
    now = [0.0]
    said = SaidOnce(window=600, clock=lambda: now[0])
    absent = "cannot read /etc/kubernetes/kubeconfig: absent"
    assert said.filter(_record(logging.WARNING, absent))
    now[0] = 30.0  # the next update meets the same absent thing
    assert not said.filter(_record(logging.WARNING, absent))
    assert said.filter(_record(logging.WARNING, "another thing"))
    assert said.filter(_record(logging.ERROR, absent))  # errors are never hidden
    now[0] = 601.0
    assert said.filter(_record(logging.WARNING, absent))  # said again once the window passed


@pytest.mark.allow_commands
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_once_from_shows_its_phases_as_it_goes(tmp_path: Path, log_format: str) -> None:
    root = make_sandbox_root(tmp_path / "root")
    cmd = [sys.executable, "-m", "mcd", "start", "--once-from", str(REPO / "examples" / "old.yaml"),
           "--root-mount", str(root), "--skip-reboot", "--log-format", log_format]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    if log_format == "json":
        messages = [json.loads(line)["msg"] for line in lines]
    else:
        assert all(KLOG.match(line) for line in lines), lines
        messages = [line.split("] ", 1)[1] for line in lines]
    phases = [m.split(":", 1)[0] + ": " + m.split(": ", 1)[1].split(" ", 1)[0] for m in messages]
    assert phases[:4] == ["once-from: reading", "once-from: rendered-worker-1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d",
                          "once-from: updating", "once-from: applied"]  # fmt: skip
    assert json.loads(done.stdout)["config"] == "rendered-worker-1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d"
