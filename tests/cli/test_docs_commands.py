"""The README's and docs' commands run as written on a fresh clone (issue 28 item 7): every
command of a `console` or `sh` block of README.md and docs/*.md either runs here, from a copy of
the examples in a temporary directory (a node root the docs put at /tmp/node is made there
instead), or is a listed exception with its reason. A command that runs must not be a usage
error, crash, or be missing; its first output line shown in the docs must be the one printed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(console|sh)\n(.*?)```", re.S)
pytestmark = pytest.mark.allow_commands

# (pattern, reason): commands not run here, each with why
EXCEPTIONS = [
    (r"^make (test|lint|node-test|fleet-test|image|vagrant-check|mutate|bench|setup)\b",
     "a make target that runs a suite, needs root or takes minutes; CI runs it"),
    (r"^make demo\b", "about a minute (setup included); its steps are the commands run here and tests/sim"),
    (r"^make clean\b", "removes the checkout's caches, which this test run uses"),
    (r"^\.venv/bin/python scripts/mutate\.py", "the mutation run: minutes"),
    (r"^sudo ", "needs root on the host"),
    (r"^(buildah|podman|docker) ", "builds or pushes an image: root and a registry"),
    (r"^(KUBECONFIG=\S+ )?kubectl ", "needs a cluster (tests/kube and the node tier run these)"),
    (r"^mcd start --node-name ", "the cluster agent: needs a cluster (tests/agent run it)"),
    (r"^mcd-sim sim-cluster ", "a server until stopped (tests/sim/test_sim_cli.py runs it)"),
    (r"^mcd-sim simulate ", "a simulated rollout of a minute or more (tests/sim/test_simulate*.py run it)"),
    (r"^mcd plan --root-mount \.demo/root ",
     "make demo's third step, on the root make demo left on old.yaml at that point"),
]  # fmt: skip


@dataclass(frozen=True)
class Command:
    doc: str
    block: int  # the commands of one block run in order, on one working directory
    line: str
    shown: str  # the first output line the docs show for it ("" when none)


def commands() -> list[Command]:
    found: list[Command] = []
    for doc in DOCS:
        for block, (kind, body) in enumerate(BLOCK.findall(doc.read_text())):
            lines = body.splitlines()
            i = 0
            while i < len(lines):
                text = lines[i]
                is_command = text.startswith("$ ") if kind == "console" else bool(text.strip()) and not (
                    text.lstrip().startswith("#")
                )
                if is_command:
                    line = text.removeprefix("$ ")
                    while line.endswith("\\") and i + 1 < len(lines):
                        i += 1
                        line = line[:-1] + " " + lines[i].strip()
                    if kind == "sh":
                        line = line.split("  #", 1)[0]
                    nxt = lines[i + 1] if i + 1 < len(lines) and kind == "console" else ""
                    shown = "" if nxt.startswith("$ ") else nxt
                    found.append(Command(doc.name, block, line.strip(), shown))
                i += 1
    return found


def exception(line: str) -> str | None:
    return next((why for pattern, why in EXCEPTIONS if re.search(pattern, line)), None)


ALL = commands()
RUN = [c for c in ALL if exception(c.line) is None]
BLOCKS = sorted({(c.doc, c.block) for c in RUN})


def test_every_command_runs_here_or_is_a_listed_exception() -> None:
    assert len(ALL) > 30  # the extraction finds the docs' commands
    assert len(RUN) >= 6
    unused = [p for p, _ in EXCEPTIONS if not any(re.search(p, c.line) for c in ALL)]
    assert unused == []  # an exception no command needs any more goes


@pytest.mark.parametrize(("doc", "block"), BLOCKS, ids=[f"{d}-block{b}" for d, b in BLOCKS])
def test_the_docs_commands_run_as_written(doc: str, block: int, tmp_path: Path) -> None:
    """A fresh clone's view: the examples copied, the docs' /tmp/node made in the temp dir."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    for command in [c for c in RUN if (c.doc, c.block) == (doc, block)]:
        _run(command, tmp_path)


def _run(command: Command, workdir: Path) -> None:
    node = str(workdir / "node")
    line = command.line.replace("/tmp/node", node)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=workdir, env=env,
                          check=False, timeout=120)  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 127, (line, output)  # a command that does not exist
    assert "Traceback" not in output, line
    assert "See 'mcd" not in output, (line, output)  # a usage error
    if command.shown and "…" not in command.shown and not command.shown.startswith(("{", "[")):
        printed = [ln for ln in output.splitlines() if not re.match(r"^[IWE]\d{4} ", ln)]
        assert printed, (line, output)
        assert printed[0] == command.shown.replace("/tmp/node", node), line
