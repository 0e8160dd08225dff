"""The stand-in API server is never on the production path."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_nothing_of_mcd_imports_mcd_sim() -> None:
    """Not even the CLI: the simulator's commands are its own command, mcd-sim (issue 26)."""
    offenders = []
    for path in sorted((REPO / "mcd").rglob("*.py")):
        rel = path.relative_to(REPO)
        if any(n == "mcd_sim" or n.startswith("mcd_sim.") for n in _imports(path)):
            offenders.append(str(rel))
    assert offenders == []


def test_the_apiserver_uses_no_kubernetes_client() -> None:
    for path in sorted((REPO / "mcd" / "sim").rglob("*.py")):
        assert not any(n == "kubernetes" or n.startswith("kubernetes.") for n in _imports(path)), path
