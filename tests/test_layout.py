"""Every module of mcd/ belongs to a layer of the import contracts (pyproject.toml), so a module
added outside them fails here, not silently KEPT by lint-imports; and no module grows past 500 lines."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 500


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _docstring_only(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def _modules(top: Path) -> list[str]:
    """Dotted names of the modules under `top`; a package counts when its __init__ holds code."""
    out = []
    for path in sorted(top.rglob("*.py")):
        parts = path.relative_to(top.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            if _docstring_only(path):
                continue
            parts = parts[:-1]
        out.append(".".join(parts))
    return out


def _layer_names(layers: list[str], container: str = "") -> list[str]:
    names = [name.strip() for layer in layers for name in layer.split("|")]
    return [f"{container}.{name}" if container else name for name in names]


def _in(module: str, names: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def _placement(module: str) -> list[str]:
    """What is missing for `module`: the top contract's layer, and its container's own layer."""
    missing = []
    top, *nested = [c for c in _contracts() if c["type"] == "layers"]
    if not _in(module, _layer_names(top["layers"])):  # type: ignore[arg-type]
        missing.append(f"no layer of {top['name']!r}")
    for contract in nested:
        for container in contract.get("containers", []):  # type: ignore[attr-defined]
            inside = module.startswith(container + ".")
            if inside and not _in(module, _layer_names(contract["layers"], container)):  # type: ignore[arg-type]
                missing.append(f"no layer of {contract['name']!r}")
    return missing


# the root package itself holds only the version, which every layer may read
TOP_PACKAGES = {"mcd"}


@pytest.mark.parametrize("module", [m for m in _modules(REPO / "mcd") if m not in TOP_PACKAGES])
def test_every_module_is_in_a_layer(module: str) -> None:
    assert _placement(module) == []


def test_a_module_outside_every_layer_is_found() -> None:
    top, agent = (str(c["name"]) for c in _contracts()[:2])
    assert _placement("mcd.newthing") == [f"no layer of {top!r}"]
    assert _placement("mcd.agent.newthing") == [f"no layer of {agent!r}"]
    assert _placement("mcd.agent.watch.drift") == []


def test_every_package_with_a_nested_contract_has_one() -> None:
    """A package of more than one module states its own inner order (the config, policy and host
    packages are leaves of the data flow whose modules lint-imports checks by the top contract)."""
    contracts = _contracts()
    containers = {c for contract in contracts for c in contract.get("containers", [])}  # type: ignore[attr-defined]
    assert containers == {"mcd.agent", "mcd.cli", "mcd.update", "mcd.planner", "mcd.render", "mcd.controller"}


@pytest.mark.parametrize("path", sorted((REPO / "mcd").rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_is_over_the_line_limit(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_every_package_says_what_it_is_for() -> None:
    for init in sorted((REPO / "mcd").rglob("__init__.py")):
        text = init.read_text().lstrip()
        assert text.startswith('"""'), f"{init.relative_to(REPO)} has no docstring"
