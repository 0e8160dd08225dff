"""The type of the CLI tests' `run` fixture (tests/cli/conftest.py)."""

from collections.abc import Callable

# run(*argv) -> (exit code, stdout, stderr)
Run = Callable[..., tuple[int, str, str]]
