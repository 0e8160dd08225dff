"""`mcd completion bash|zsh`: a completion script made from the parser itself, so that a new
flag completes without anyone editing a script. Commands complete after `mcd`, each command's
flags after a `-`, file names otherwise. zsh runs the bash function through bashcompinit (the
shape kubectl's early zsh completion had): one script to keep true instead of two."""

from __future__ import annotations

import argparse

_FUNCTION = """_mcd() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} opts=""
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur"))
        return
    fi
    case "${{COMP_WORDS[1]}}" in
{cases}
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _mcd mcd
"""


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell` (bash or zsh)."""
    commands = _commands(parser)
    cases = []
    for name, sub in commands.items():
        flags = sorted(o for a in sub._actions for o in a.option_strings)
        cases.append(f'        {name}) opts="{" ".join(flags)}" ;;')
    body = _FUNCTION.format(commands=" ".join(commands), cases="\n".join(cases))
    if shell == "zsh":
        return "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + body
    return body
