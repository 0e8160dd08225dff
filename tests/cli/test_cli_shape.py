"""The command line's shape (issue 26 item 9, issue 28 items 4-5): the parser one function per
command and no function of mcd/cli over 80 lines, no `# fmt: skip` squeezing; usage errors as
one line and a hint; `mcd version`; `mcd completion`; the simulator's commands gone to `mcd-sim`."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import Run

from mcd import __version__
from mcd.cli.completion import script
from mcd.cli.main import COMMANDS
from mcd.cli.parser import build_parser

CLI = Path(__file__).resolve().parents[2] / "mcd" / "cli"
MAX_FUNCTION_LINES = 80


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return [(n.name, (n.end_lineno or n.lineno) - n.lineno + 1) for n in nodes]


def test_no_function_of_the_cli_is_over_80_lines_and_nothing_is_squeezed() -> None:
    sizes = [(p.name, name, n) for p in CLI.glob("*.py") for name, n in _functions(p)]
    long = [(file, name, n) for file, name, n in sizes if n > MAX_FUNCTION_LINES]
    assert long == []
    assert [p.name for p in CLI.glob("*.py") if "fmt: skip" in p.read_text()] == []


def test_every_command_has_its_own_parser_function_and_a_handler() -> None:
    defined = {name for name, _ in _functions(CLI / "parser.py")}
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    commands = set(sub.choices)  # type: ignore[arg-type]
    named = {c for c in commands if c != "firstboot-complete-machineconfig"}
    assert {"_add_" + c.replace("-", "_") for c in named} <= defined
    assert "_add_firstboot" in defined
    assert commands == set(COMMANDS)


def test_a_usage_error_prints_no_usage(capsys: pytest.CaptureFixture[str]) -> None:
    from mcd.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    required = "mcd validate: error: the following arguments are required: PATH\n"
    assert err == required + "See 'mcd validate --help'.\n"


@pytest.mark.parametrize("command", ["sandbox", "sim-cluster", "simulate"])
def test_the_simulator_commands_say_where_they_went(run: Run, command: str) -> None:
    code, out, err = run(command, "--help")
    assert (code, out) == (2, "")
    assert f"`mcd-sim {command}`" in err
    assert "pip install ./sim" in err


def test_version_text_json_and_yaml(run: Run) -> None:
    assert run("version") == (0, f"mcd {__version__}\n", "")
    code, out, _ = run("version", "-o", "json")
    assert code == 0
    assert json.loads(out)["mcdVersion"] == __version__
    code, out, _ = run("version", "-o", "yaml")
    assert yaml.safe_load(out)["mcdVersion"] == __version__


def _complete(shell_script: str, words: list[str]) -> list[str]:
    """What bash completes for `words` (the last one being typed) with the script loaded."""
    probe = (
        f"{shell_script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        '_mcd; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.allow_commands
@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_and_each_commands_flags(run: Run) -> None:
    code, bash, _ = run("completion", "bash")
    assert code == 0
    assert _complete(bash, ["mcd", "pl"]) == ["plan"]
    assert _complete(bash, ["mcd", "start", "--once"]) == ["--once-from"]
    assert _complete(bash, ["mcd", "render", "--po"]) == ["--pool"]
    # a flag added to the parser completes without anyone editing a script
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    sub.choices["plan"].add_argument("--brand-new-flag")  # type: ignore[index]
    assert _complete(script(parser, "bash"), ["mcd", "plan", "--brand"]) == ["--brand-new-flag"]


def test_zsh_completion_runs_the_same_function_through_bashcompinit(run: Run) -> None:
    _, bash, _ = run("completion", "bash")
    code, zsh, _ = run("completion", "zsh")
    assert code == 0
    assert "bashcompinit" in zsh
    assert zsh.endswith(bash)
