"""The pool's MachineConfigs before and after the simulated change.

Before it the pool has one MachineConfig, `00-<pool>`: the content of `--old` (a rendered
config, as the pool's nodes run it). After it, either `--new`'s content in its place, or that
base with the admin's own MachineConfigs (`--pool NAME PATH...`, those labelled for the pool)
beside it, a config of the same name replacing the base: the pool controller renders them as
upstream's render controller merges a pool's configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcd.config.findings import Finding, InputError
from mcd.config.load import load_objects
from mcd.render import RenderError, render_pool
from mcd_sim.poolcontrollers import ROLE_LABEL, Change

Obj = dict[str, Any]
SUFFIXES = (".yaml", ".yml", ".json")


def as_source(rendered: Obj, pool: str, name: str) -> Obj:
    """A rendered config's content as one of the pool's own MachineConfigs."""
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE_LABEL: pool}},
        "spec": rendered.get("spec") or {},
    }


def _files(arg: str) -> list[Path]:
    path = Path(arg)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
    return [path]


def admin_configs(pool: str, paths: Sequence[str]) -> list[Obj]:
    """The MachineConfigs labelled for `pool` in the files and directories `paths`."""
    found: list[Obj] = []
    for arg in paths:
        for path in _files(arg):
            found.extend(
                dict(obj)
                for _, obj in load_objects(path.read_bytes(), str(path))
                if obj.get("kind") == "MachineConfig"
                and ((obj.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) == pool
            )
    if not found:
        raise InputError(" ".join(paths), [Finding((), f"no MachineConfig labelled {ROLE_LABEL}: {pool}")])
    return found


def _rendered(pool: str, sources: Sequence[Obj], what: str) -> Change:
    try:
        # what the pool controller renders (mcd.render): the stand-in is given it, the real
        # controller's own rendering is checked against its name
        return Change(tuple(sources), render_pool(pool, sources))
    except RenderError as exc:
        raise InputError(what, [Finding((), str(exc))]) from None


def changes(
    pool: str, old: Obj, new: Obj, admin: Sequence[str], where: tuple[str, str] = ("OLD", "NEW")
) -> tuple[Change, Change]:
    """(before, after), each with the rendered config it makes; `where` names OLD's and NEW's
    files in errors."""
    base = as_source(old, pool, f"00-{pool}")
    before = _rendered(pool, [base], where[0])
    if not admin:
        return before, _rendered(pool, [as_source(new, pool, f"00-{pool}")], where[1])
    mine = admin_configs(pool, admin)
    names = {m["metadata"]["name"] for m in mine}
    kept = [s for s in before.sources if s["metadata"]["name"] not in names]
    return before, _rendered(pool, [*kept, *mine], " ".join(admin))
