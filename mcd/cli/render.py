"""`mcd render PATH... --pool NAME`: a pool's MachineConfigs, read from files and directories,
merged into its rendered MachineConfig (`mcd.render`); also what `mcd plan --pool` renders.

A directory gives its `*.yaml`, `*.yml` and `*.json` files (not its subdirectories), in name
order; a file may hold several YAML documents or a `List`. The pool's configs are the
MachineConfigs labelled `machineconfiguration.openshift.io/role: <pool>` (or one of the
`--role` values: a custom pool selects `worker` and its own role), as the selectors of
upstream's pools pick them; other objects are ignored, except a ControllerConfig, whose
`spec.baseOSContainerImage` is the cluster's OS image (`--os-image-url` wins over it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.load import load_objects
from mcd.render import ROLE_LABEL, RenderError, is_in_pool, render_pool

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Located:
    """An object read from a file, and where: the file and the JSON path of the object in it."""

    source: str
    path: JsonPath
    obj: Mapping[str, Any]


def _files(arg: str) -> list[str]:
    """The files an argument names: itself, or a directory's config files in name order."""
    if arg != "-" and Path(arg).is_dir():
        try:
            names = sorted(p.name for p in Path(arg).iterdir() if p.suffix in SUFFIXES and p.is_file())
        except OSError as exc:
            raise InputError(arg, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None
        if not names:
            raise InputError(arg, [Finding((), "no *.yaml, *.yml or *.json file in this directory")])
        return [str(Path(arg) / name) for name in names]
    return [arg]


def read_objects(args: Sequence[str], read: Callable[[str], bytes]) -> list[Located]:
    """Every object of the files and directories `args` names."""
    out: list[Located] = []
    for arg in args:
        for source in _files(arg):
            out.extend(Located(source, path, obj) for path, obj in load_objects(read(source), source))
    return out


def render_objects(
    objects: Sequence[Located], pool: str, roles: Sequence[str], os_image_url: str | None, what: str
) -> dict[str, Any]:
    """The rendered MachineConfig of `pool` from the `objects` labelled for one of `roles`;
    InputError (file and JSON path) for input that cannot be rendered. `what` names the input
    in the message when the pool has no config."""
    selected = [
        o
        for o in objects
        if o.obj.get("kind") == "MachineConfig" and any(is_in_pool(o.obj, r) for r in roles)
    ]
    if not selected:
        message = f"no MachineConfig labelled {ROLE_LABEL}: {' or '.join(roles)}"
        raise InputError(what, [Finding((), message)])
    _refuse_duplicate_names(selected)
    if os_image_url is None:
        os_image_url = _controllerconfig_image(objects)
    try:
        return render_pool(pool, [o.obj for o in selected], os_image_url=os_image_url)
    except RenderError as exc:
        if exc.index is None:  # pragma: no cover - the pool has configs, each error names one
            raise InputError(what, [Finding((), str(exc))]) from None
        where = selected[exc.index]
        raise InputError(where.source, [Finding((*where.path, *exc.path), exc.message)]) from None


def _refuse_duplicate_names(selected: Sequence[Located]) -> None:
    """Two configs of one name cannot both be in a cluster: the input is ambiguous."""
    seen: dict[str, Located] = {}
    for o in selected:
        name = (o.obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and name in seen:
            first = seen[name]
            message = f"MachineConfig {name!r} is also defined in {first.source}"
            raise InputError(o.source, [Finding((*o.path, "metadata", "name"), message)])
        if isinstance(name, str):
            seen[name] = o


def _controllerconfig_image(objects: Sequence[Located]) -> str | None:
    for o in objects:
        if o.obj.get("kind") == "ControllerConfig":
            spec = o.obj.get("spec")
            image = spec.get("baseOSContainerImage") if isinstance(spec, Mapping) else None
            if not isinstance(image, str):
                where = (*o.path, "spec", "baseOSContainerImage")
                raise InputError(o.source, [Finding(where, "expected the cluster's OS image (a string)")])
            return image
    return None


def rendered_from(paths: Sequence[str], args: Any, read: Callable[[str], bytes]) -> dict[str, Any]:
    """The rendered MachineConfig of the pool `args` names (`--pool`, `--role`, `--os-image-url`)
    from the files and directories `paths`."""
    roles = args.role or [args.pool]
    return render_objects(read_objects(paths, read), args.pool, roles, args.os_image_url, " ".join(paths))


def cmd_render(args: Any, read: Callable[[str], bytes], dump: Callable[[Any, str, Any], None]) -> int:
    rendered = rendered_from(args.paths, args, read)
    dump(rendered, args.output, sys.stdout)
    return 0
