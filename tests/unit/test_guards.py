"""The project's guards hold: tests cannot run commands, and the pure modules do no I/O."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

# The pure core: every module of these packages (docs/architecture.md).
PURE_PACKAGES = ("config", "node", "planner", "policy", "render")
PURE_MODULES: tuple[str, ...] = ()
BANNED_IMPORTS = (
    *("subprocess", "socket", "kubernetes", "dbus", "pyinotify", "shutil", "tempfile"),
    *("mcd.host", "mcd.kube.client"),
)
# Modules whose `open` attribute opens a file (os.open, io.open …), as opposed to e.g. `tar.open`.
OPENERS = ("os", "io", "builtins", "codecs")


def io_violations(source: str, package: str) -> list[str]:
    """What in `source` breaks purity: banned imports and calls of open(); `package` resolves `from .x`."""
    found: list[tuple[int, str]] = []

    def check_import(name: str, line: int) -> bool:
        if any(name == banned or name.startswith(banned + ".") for banned in BANNED_IMPORTS):
            found.append((line, f"imports {name}"))
            return True
        return False

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check_import(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            if not check_import(base, node.lineno):
                for alias in node.names:
                    # `from mcd import host` imports mcd.host
                    check_import(f"{base}.{alias.name}", node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "open") or (
                isinstance(func, ast.Attribute)
                and func.attr == "open"
                and isinstance(func.value, ast.Name)
                and func.value.id in OPENERS
            ):
                found.append((node.lineno, "calls open()"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _pure_module_params() -> list[Any]:
    packaged = sorted(p for pkg in PURE_PACKAGES for p in (REPO / "mcd" / pkg).rglob("*.py"))
    named = [REPO / Path(*name.split(".")).with_suffix(".py") for name in PURE_MODULES]
    params = []
    for path in [*packaged, *named]:
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        params.append(pytest.param(path, module, id=module))
    return params


@pytest.mark.parametrize(("path", "module"), _pure_module_params())
def test_pure_module_does_no_io(path: Path, module: str) -> None:
    if not path.is_file():
        pytest.skip(f"{module} not written yet")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    assert io_violations(path.read_text(), package) == []


def test_io_violations_finds_each_kind_of_breach() -> None:
    source = "\n".join([
        "import subprocess",
        "import kubernetes.client as k",
        "from shutil import copy",
        "from .. import host",
        "from ..kube.client import Client",
        "data = open('/etc/hosts').read()",
        "import os; fd = os.open('/x', 0)",
    ])  # fmt: skip
    assert io_violations(source, "mcd.config") == [
        "line 1: imports subprocess",
        "line 2: imports kubernetes.client",
        "line 3: imports shutil",
        "line 4: imports mcd.host",
        "line 5: imports mcd.kube.client",
        "line 6: calls open()",
        "line 7: calls open()",
    ]


def test_io_violations_accepts_pure_code() -> None:
    source = "\n".join([
        "import json, tomllib",
        "from . import findings",
        "from .findings import Finding",
        "from mcd.node import annotations",
        "ports = firewall.open(22)",
    ])  # fmt: skip
    assert io_violations(source, "mcd.config") == []


COMMANDS: list[tuple[str, Callable[[], object]]] = [
    ("subprocess.run", lambda: subprocess.run(["true"], check=False)),
    ("subprocess.check_output", lambda: subprocess.check_output(["true"])),
    ("subprocess.call", lambda: subprocess.call("true", shell=True)),
    ("os.system", lambda: os.system("true")),
    ("os.popen", lambda: os.popen("true")),
    ("os.posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {})),
]


@pytest.mark.parametrize("start", [c for _, c in COMMANDS], ids=[name for name, _ in COMMANDS])
def test_running_a_command_raises(start: Callable[[], object]) -> None:
    with pytest.raises(RuntimeError, match=r"mark the test @pytest\.mark\.allow_commands"):
        start()


@pytest.mark.allow_commands
def test_allow_commands_marker_lifts_the_guard() -> None:
    result = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, check=True)
    assert result.stdout == b"ran\n"


# Exactly one module may run commands and exactly one may talk to Kubernetes (the brief's rule).
SOLE_IMPORTERS = {"subprocess": "mcd.host.runner", "kubernetes": "mcd.kube.client"}


def _imported_roots(source: str) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(("library", "owner"), sorted(SOLE_IMPORTERS.items()))
def test_only_one_module_imports(library: str, owner: str) -> None:
    importers = []
    for path in sorted((REPO / "mcd").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        if library in _imported_roots(path.read_text()):
            importers.append(module)
    assert set(importers) <= {owner}, f"{library} imported outside {owner}: {importers}"


def test_the_sole_importer_check_sees_imports() -> None:
    assert _imported_roots("import subprocess as sp\nfrom kubernetes import client\n") == {
        "subprocess",
        "kubernetes",
    }
