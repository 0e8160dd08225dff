"""A kubeconfig read before the Kubernetes client reads it, so that a malformed or unreadable
one is one line naming the file and where in it (`mcd start`, `mcd pool-controller`), never
the client's YAML traceback or a Python type error from deep in its loader."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mcd.config.findings import Finding, InputError
from mcd.config.yamllib import yaml

# the sections kubectl reads as lists of named entries
LIST_SECTIONS = ("clusters", "contexts", "users")


def check_kubeconfig(paths: str) -> None:
    """Raise InputError for the first file of `paths` (one file, or a $KUBECONFIG list) that
    cannot be read or is not a kubeconfig's shape; files kubectl would skip as absent in a list
    are left to the client, which names them."""
    files = [p for p in paths.split(os.pathsep) if p]
    for name in files:
        path = Path(name)
        if len(files) > 1 and not path.exists():
            continue  # kubectl merges the files of a list that exist
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InputError(name, [Finding((), f"cannot read the kubeconfig: {why}")]) from None
        _check_text(name, text)


def _check_text(name: str, text: str) -> None:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise InputError(name, [Finding((), f"not a kubeconfig: {problem}{where}")]) from None
    if doc is None:
        raise InputError(name, [Finding((), "empty: not a kubeconfig")])
    if not isinstance(doc, Mapping):
        message = f"not a kubeconfig: expected a mapping, got {type(doc).__name__}"
        raise InputError(name, [Finding((), message)])
    for section in LIST_SECTIONS:
        entries = doc.get(section)
        if entries is not None and not isinstance(entries, list):
            raise InputError(name, [Finding((section,), "expected a list of named entries")])
        for i, entry in enumerate(entries or ()):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise InputError(name, [Finding((section, i), "expected a mapping with a name")])
