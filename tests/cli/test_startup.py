"""Start-up of the pure commands (issue 30, item 2): `mcd --help`, `version`, `validate`, `plan`
and `render` load no module that could reach a cluster or a node (the Kubernetes client, D-Bus,
the journal, Prometheus, inotify, mcd's host, kube, agent, controller, update and runtime layers),
nor the simulator. Checked on `sys.modules` of a fresh interpreter after the command ran: what
the process paid for at start-up, whatever the machine's speed (bench/startup.py has the times)."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from mcd.cli import parser
from mcd.config import contents
from mcd.host import rootlock
from mcd.planner import nodefacts

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"
pytestmark = pytest.mark.allow_commands

FORBIDDEN = (
    "kubernetes",
    "urllib3",
    "dbus",
    "jeepney",
    "systemd",
    "prometheus_client",
    "pyinotify",
    "mcd_sim",
    "mcd.host",
    "mcd.kube",
    "mcd.agent",
    "mcd.controller",
    "mcd.update",
    "mcd.runtime",
)
PURE = {
    "help": ["--help"],
    "version": ["version"],
    "validate": ["validate", str(EX / "new.yaml")],
    "plan": ["plan", str(EX / "old.yaml"), str(EX / "new.yaml")],
    "render": ["render", "--pool", "worker", str(EX / "pool")],
}
PROBE = """
import json, sys
from mcd.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def loaded_by(argv: list[str], tmp_path: Path) -> tuple[object, list[str]]:
    """The exit code and the modules of a process that ran `mcd ARGV`. Without `site` (-S), the
    checkout and the environment's packages on the path: the dev venv's `.pth` hooks (the
    editable install's finder imports pathlib, re, urllib) would hide what mcd itself loads, and
    an install of mcd has none of them."""
    report = tmp_path / "modules.json"
    cmd = [sys.executable, "-S", "-c", PROBE, str(report), *argv]
    path = os.pathsep.join([str(REPO), *site.getsitepackages()])
    env = {**os.environ, "PYTHONPATH": path}
    subprocess.run(
        cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path, env=env
    )
    loaded = json.loads(report.read_text())
    return loaded["code"], loaded["modules"]


def forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


@pytest.mark.parametrize("name", sorted(PURE))
def test_a_pure_command_loads_nothing_of_a_cluster_or_a_node(name: str, tmp_path: Path) -> None:
    code, modules = loaded_by(PURE[name], tmp_path)
    assert code in (0, None)
    assert forbidden(modules) == []


@pytest.mark.parametrize("name", ["validate", "plan", "render"])
def test_a_clean_input_is_validated_without_importing_jsonschema(name: str, tmp_path: Path) -> None:
    """About 100 ms of start-up: the schema walker (mcd.config.schemawalk) proves these clean."""
    _, modules = loaded_by(PURE[name], tmp_path)
    assert "jsonschema" not in modules


def test_jsonschema_reports_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"mode": 420}]}}))
    code, modules = loaded_by(["validate", str(bad)], tmp_path)
    assert code == 1
    assert "jsonschema" in modules


def test_the_probe_sees_a_command_that_does_load_the_host(tmp_path: Path) -> None:
    """The check above can fail: `mcd status` reads a node's root through the host layer."""
    _, modules = loaded_by(["status", "--root-mount", str(tmp_path)], tmp_path)
    assert "mcd.host.root" in forbidden(modules)


def test_the_parsers_defaults_are_their_owners() -> None:
    assert parser.DEFAULT_LOCK_TIMEOUT == rootlock.DEFAULT_TIMEOUT
    assert parser.DEFAULT_MAX_FILE_SIZE == contents.DEFAULT_MAX_FILE_SIZE
    assert parser.HIGHLY_AVAILABLE == nodefacts.HIGHLY_AVAILABLE
    assert parser.TOPOLOGIES == nodefacts.TOPOLOGIES


def test_the_help_loads_no_layer_of_mcd_below_the_command_line(tmp_path: Path) -> None:
    """`mcd --help` builds the parser and nothing else of mcd."""
    _, modules = loaded_by(["--help"], tmp_path)
    assert [m for m in modules if m.startswith("mcd.") and not m.startswith("mcd.cli")] == []


# what the short commands do without (issue 30: each a few ms of a process's start):
# dataclasses (the pure core's classes are mcd.config.record's), pathlib and urllib.parse
# (mcd.cli.inputs, mcd.config.ignition_rules.url_scheme), hashlib (mcd.config.digest), typing
SLOW = ("dataclasses", "inspect", "ast", "pathlib", "urllib.parse", "hashlib", "typing")
# examples/new.yaml changes registries.conf: its plan reads it with tomllib, which imports typing
NEEDED = {"plan": {"typing"}}


@pytest.mark.parametrize("name", sorted(PURE))
def test_a_short_command_does_without_the_slow_imports(name: str, tmp_path: Path) -> None:
    _, modules = loaded_by(PURE[name], tmp_path)
    assert [m for m in SLOW if m in modules and m not in NEEDED.get(name, set())] == []


def test_a_json_input_does_without_pyyaml(tmp_path: Path) -> None:
    mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig"}
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({**mc, "metadata": {"name": "a"}, "spec": {}}))
    for argv in (["validate", str(config)], ["plan", "-o", "json", "-", str(config)]):
        code, modules = loaded_by(argv, tmp_path)
        assert code in (0, None, 2)
        assert "yaml" not in modules


def test_a_compressed_file_kept_in_memory_is_not_hashed(tmp_path: Path) -> None:
    """`plan` keeps the decoded contents of a gzip-compressed file: no digest is made of them,
    so hashlib (OpenSSL's libcrypto) is not loaded for it."""
    import base64
    import gzip

    source = "data:;base64," + base64.b64encode(gzip.compress(b"hello\n")).decode()
    files = [{"path": "/etc/gz", "mode": 420, "contents": {"compression": "gzip", "source": source}}]
    mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
          "metadata": {"name": "gz"},
          "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}}  # fmt: skip
    config = tmp_path / "gz.json"
    config.write_text(json.dumps(mc))
    code, modules = loaded_by(["plan", "-o", "json", "-", str(config)], tmp_path)
    assert code in (0, None)
    assert "_hashlib" not in modules and "hashlib" not in modules
