"""The packaging tests: the manifests, the RBAC rules against the agent's requests, the Vagrantfile.

The RBAC tests drive the agent with the agent tests' harness (`tests/agent/harness.py` and
`simcluster.py`) and the pool controller with its tests' fakes (`tests/controller/fakes.py`), so
those directories are importable from here too.
"""

from __future__ import annotations

import sys
from pathlib import Path

for _dir in ("agent", "controller"):
    _tests = str(Path(__file__).resolve().parents[1] / _dir)
    if _tests not in sys.path:
        sys.path.insert(0, _tests)
