"""The real-control-plane tier (`make kube-test`): etcd and a kube-apiserver v1.20.2 built from
Debian's source (scripts/kube/build-apiserver.sh, cached in /var/tmp/mcd-kube-cache). Runs only
with MCD_KUBE_TEST=1; otherwise every test here is skipped, so `make test` neither builds nor
starts anything."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from realcluster import RealCluster, build_apiserver

HERE = Path(__file__).resolve().parent
ENABLED = os.environ.get("MCD_KUBE_TEST") == "1"
SKIP_REASON = (
    "real-control-plane tier: set MCD_KUBE_TEST=1 (`make kube-test` builds kube-apiserver v1.20.2 "
    "once, about 6 min, as root, and starts it with etcd)"
)
_figures: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)


def record_figure(line: str) -> None:
    """A measured figure, printed in the terminal summary (`kube tier: ...`)."""
    _figures.append(line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _figures:
        terminalreporter.write_line(f"kube tier: {line}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[RealCluster]:
    """One control plane for the session: built (or taken from the cache), started, ready."""
    started = time.monotonic()
    binary = build_apiserver()
    built = time.monotonic()
    real = RealCluster(binary, keep=os.environ.get("MCD_KUBE_KEEP") == "1")
    real.start()
    ready = time.monotonic()
    _figures.append(f"binary {binary} ready in {built - started:.1f} s")
    _figures.append(f"control plane ready (RBAC effective) in {ready - built:.1f} s at {real.url}")
    try:
        yield real
    finally:
        real.stop()
        if real.keep:
            _figures.append(f"kept {real.workdir}")
