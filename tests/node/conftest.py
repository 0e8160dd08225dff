"""The real-node tier (`make node-test`): collected only with MCD_NODE_TEST=1, so `make test`
neither imports nor lists it. It needs root, mmdebstrap, systemd-nspawn, nsenter and kubectl
(scripts/node/deps.sh installs what apt has)."""

from __future__ import annotations

import os

import pytest
from nodeharness import print_figures, timed_base_root

collect_ignore_glob = [] if os.environ.get("MCD_NODE_TEST") == "1" else ["test_*.py"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    print_figures(terminalreporter.write_line)


@pytest.fixture(scope="session", autouse=True)
def _base_root() -> None:
    """The cached Debian root, built (about 30 to 60 s) before the first scenario's clock starts."""
    timed_base_root()
