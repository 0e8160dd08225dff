"""The files a path argument names, for `mcd render`, `mcd plan --pool` and `mcd validate`: a
file itself, or a directory's `*.yaml`, `*.yml` and `*.json` files (not its subdirectories) in
name order, as `kubectl apply -f DIR` reads one."""

from __future__ import annotations

from pathlib import Path

from mcd.config.findings import Finding, InputError

SUFFIXES = (".yaml", ".yml", ".json")


def files_of(arg: str) -> list[str]:
    """The files `arg` names: itself, or a directory's config files in name order; InputError
    for a directory that cannot be listed or holds none."""
    if arg != "-" and _is_dir(arg):
        try:
            names = sorted(p.name for p in Path(arg).iterdir() if p.suffix in SUFFIXES and p.is_file())
        except OSError as exc:
            raise InputError(arg, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None
        if not names:
            raise InputError(arg, [Finding((), "no *.yaml, *.yml or *.json file in this directory")])
        return [str(Path(arg) / name) for name in names]
    return [arg]


def _is_dir(arg: str) -> bool:
    try:
        return Path(arg).is_dir()
    except OSError:  # a name too long for the kernel: not a directory; reading it says why
        return False
