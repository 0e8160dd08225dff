"""What scripts/prune-env.sh removes from the image's and the host's environment is never
imported: the agent runs to Done against the stand-in API server (with a kubeconfig, the path
that imports the most of the kubernetes package), and the pool controller and the command line
import, with every pruned module made unimportable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness import NODE, config_a, done_on, make_root
from shipped import REPO
from simcluster import Cluster

pytestmark = pytest.mark.allow_commands
PRUNE = REPO / "scripts" / "prune-env.sh"

BLOCKER = """
import importlib.abc, runpy, sys
BLOCKED = {blocked!r}
MODELS = "kubernetes.client.models."

class Pruned(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(MODELS) or any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"pruned from the image: {{name}}")
        return None

sys.meta_path.insert(0, Pruned())
{body}
"""


def _blocked() -> list[str]:
    text = PRUNE.read_text()
    dists = re.search(r'^UNUSED_DISTRIBUTIONS="([^"]+)"', text, re.M)
    parts = re.search(r'^UNUSED_KUBERNETES="([^"]+)"', text, re.M)
    assert dists and parts
    modules = [d.replace("-", "_") for d in dists[1].split()]
    modules = ["websocket" if m == "websocket_client" else m for m in modules]
    return modules + ["kubernetes." + p.replace("/", ".") for p in parts[1].split()]


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pruned.py"
    path.write_text(BLOCKER.format(blocked=_blocked(), body=body))
    return path


def test_the_blocker_blocks(tmp_path: Path) -> None:
    """The harness itself: a pruned module does not import (else the tests below prove nothing)."""
    # mcd's client first: it keeps `kubernetes/__init__` (which imports everything) from running
    for body, name in (("import mcd.kube.client\nimport kubernetes.client.models.v1_pod",
                        "kubernetes.client.models.v1_pod"),
                       ("import mcd.kube.client\nimport kubernetes.client.api.core_v1_api",
                        "kubernetes.client.api"),
                       ("import aiohttp", "aiohttp")):  # fmt: skip
        script = _script(tmp_path, body)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                              check=False, cwd=str(REPO))  # fmt: skip
        assert proc.returncode != 0 and f"pruned from the image: {name}" in proc.stderr, proc.stderr


def test_the_agent_runs_without_what_is_pruned(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    root = make_root(tmp_path, config_a())
    cluster.install_kubelet_identity(root)
    cluster.add_mc(config_a())
    prefix = "machineconfiguration.openshift.io"
    cluster.add_node(NODE, {f"{prefix}/currentConfig": "rendered-worker-a",
                            f"{prefix}/desiredConfig": "rendered-worker-a"})  # fmt: skip
    cluster.answer_drains()
    kubeconfig = cluster.write_user_kubeconfig(tmp_path / "kubeconfig")
    script = _script(tmp_path, "sys.argv[0] = 'mcd'\nrunpy.run_module('mcd', run_name='__main__')")
    log = tmp_path / "agent.log"
    argv = [sys.executable, str(script), "start", "--kubeconfig", str(kubeconfig), "--root-mount", str(root),
            "--node-name", NODE, "--metrics-url", "127.0.0.1:0", "--secure-metrics-url", "127.0.0.1:0",
            "--kubelet-healthz-enabled=false", "-v"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, cwd=str(REPO))
    try:
        cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=60)
        cluster.wait_event("ConfigDriftMonitorStarted")
    finally:
        proc.terminate()
        proc.wait(60)
        cluster.stop()
    assert "pruned from the image" not in log.read_text()


def test_the_pool_controller_and_the_command_line_import_without_it(tmp_path: Path) -> None:
    body = "import mcd.cli.main, mcd.controller.run, mcd.agent.loop\nprint('ok')"
    proc = subprocess.run([sys.executable, str(_script(tmp_path, body))], capture_output=True, text=True,
                          timeout=120, check=False, cwd=str(REPO))  # fmt: skip
    assert proc.stdout.strip() == "ok", proc.stderr
