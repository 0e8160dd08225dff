"""The packaging tests: the manifests, the RBAC rules against the agent's requests, the Vagrantfile.

The RBAC test drives the agent with the agent tests' harness (`tests/agent/harness.py` and
`simcluster.py`), so that directory is importable from here too.
"""

from __future__ import annotations

import sys
from pathlib import Path

AGENT_TESTS = str(Path(__file__).resolve().parents[1] / "agent")
if AGENT_TESTS not in sys.path:
    sys.path.insert(0, AGENT_TESTS)
