"""Every thread of mcd starts through the guard (`mcd.runtime.guard`), so none dies silently."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.node import NodeWriter
from mcd.kube.errors import NotFoundError
from mcd.node import machineconfignode as mcn

MCD = Path(__file__).resolve().parents[2] / "mcd"
GUARD = MCD / "runtime" / "guard.py"


def test_no_thread_is_started_outside_the_guard() -> None:
    pattern = re.compile(r"\b(threading\.)?Thread\(")
    offenders = [
        f"{path.relative_to(MCD.parent)}:{n}"
        for path in sorted(MCD.rglob("*.py"))
        if path != GUARD
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == [], "start threads with mcd.runtime.guard.spawn"


class _FlakyApi:
    """Fails once with an error the writer does not expect (a bug, an odd answer), then works."""

    def __init__(self) -> None:
        self.calls = 0
        self.written = threading.Event()

    def get_machineconfignode(self, name: str) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("unexpected answer")
        raise NotFoundError(404, "not found")

    def create_machineconfignode(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}

    def update_machineconfignode(self, name: str, obj: Mapping[str, Any], *, status: bool = False) -> Any:
        self.written.set()
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}


def test_the_machineconfignode_writer_survives_an_unexpected_error() -> None:
    """Reported (B3): the writer thread was not guarded; one unexpected error ended it for good and
    no phase was reported again until the agent restarted."""
    api = _FlakyApi()
    reporter = MachineConfigNodeReporter(api, NodeWriter(None, "node-0"))  # type: ignore[arg-type]
    reporter.start()
    try:
        reporter.report(mcn.needs_update("node-0"))
        assert api.written.wait(10), "the report was never written after the writer failed once"
        assert api.calls >= 2
    finally:
        started = time.monotonic()
        reporter.stop()
        assert time.monotonic() - started < 10
