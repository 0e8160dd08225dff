"""`mcd render PATH... --pool NAME`: a pool's MachineConfigs, read from files and directories,
merged into its rendered MachineConfig (`mcd.render`); also what `mcd plan --pool` renders.

A directory gives its `*.yaml`, `*.yml` and `*.json` files (not its subdirectories), in name
order; a file may hold several YAML documents or a `List`. The pool's configs are the
MachineConfigs its selector picks: the `--role` labels when given (a custom pool selects
`worker` and its own role), else the `machineConfigSelector` of a MachineConfigPool of that
name among the inputs, else the label `machineconfiguration.openshift.io/role: <pool>` (what
the selectors of upstream's `master` and `worker` pools pick). Other objects are ignored,
except a ControllerConfig, whose `spec.baseOSContainerImage` is the cluster's OS image
(`--os-image-url` wins over it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from mcd.cli.inputs import files_of
from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.load import load_objects
from mcd.config.record import record
from mcd.config.selector import SelectorError, check_selector, selects
from mcd.render import ROLE_LABEL, RenderError, is_in_pool, labels_of, render_pool

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any


@record
class Located:
    """An object read from a file, and where: the file and the JSON path of the object in it."""

    source: str
    path: JsonPath
    obj: Mapping[str, Any]


def read_objects(args: Sequence[str], read: Callable[[str], bytes]) -> list[Located]:
    """Every object of the files and directories `args` names."""
    out: list[Located] = []
    for arg in args:
        for source in files_of(arg):
            out.extend(Located(source, path, obj) for path, obj in load_objects(read(source), source))
    return out


def render_objects(
    objects: Sequence[Located], pool: str, roles: Sequence[str] | None, os_image_url: str | None, what: str
) -> dict[str, Any]:
    """The rendered MachineConfig of `pool` from the `objects` its selector picks (see the module
    docstring); InputError (file and JSON path) for input that cannot be rendered. `what` names
    the input in the message when the pool has no config."""
    picks, which = _selection(objects, pool, roles)
    selected = [o for o in objects if o.obj.get("kind") == "MachineConfig" and picks(o.obj)]
    if not selected:
        raise InputError(what, [Finding((), f"no MachineConfig {which}")])
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


def _selection(
    objects: Sequence[Located], pool: str, roles: Sequence[str] | None
) -> tuple[Callable[[Mapping[str, Any]], bool], str]:
    """What picks the pool's configs, and its description: the `--role` labels when given, else
    the `machineConfigSelector` of the MachineConfigPool of that name among the inputs, else the
    pool's own role label."""
    pool_object = None if roles is not None else _pool_object(objects, pool)
    if pool_object is not None:
        spec = pool_object.obj.get("spec")
        where = (*pool_object.path, "spec", "machineConfigSelector")
        try:
            selector = check_selector(
                spec.get("machineConfigSelector") if isinstance(spec, Mapping) else None
            )
        except SelectorError as exc:
            raise InputError(pool_object.source, [Finding((*where, *exc.path), str(exc))]) from None
        return (lambda obj: selects(selector, labels_of(obj))), f"selected by MachineConfigPool {pool!r}"
    wanted = list(roles or [pool])
    return (
        lambda obj: any(is_in_pool(obj, r) for r in wanted)
    ), f"labelled {ROLE_LABEL}: {' or '.join(wanted)}"


def _pool_object(objects: Sequence[Located], pool: str) -> Located | None:
    for o in objects:
        meta = o.obj.get("metadata")
        if (
            o.obj.get("kind") == "MachineConfigPool"
            and isinstance(meta, Mapping)
            and meta.get("name") == pool
        ):
            return o
    return None


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
    return render_objects(read_objects(paths, read), args.pool, args.role, args.os_image_url, " ".join(paths))


def cmd_render(args: Any, read: Callable[[str], bytes], dump: Callable[[Any, str, Any], None]) -> int:
    rendered = rendered_from(args.paths, args, read)
    if args.output == "text":
        sys.stdout.write(summary(rendered, args.pool))
    else:
        dump(rendered, args.output, sys.stdout)
    return 0


def summary(rendered: Mapping[str, Any], pool: str) -> str:
    """`mcd render`'s human output: the rendered config's name and what it holds."""
    spec = rendered.get("spec") or {}
    config = spec.get("config") or {}
    counts = {
        "files": len((config.get("storage") or {}).get("files") or ()),
        "units": len((config.get("systemd") or {}).get("units") or ()),
        "users": len((config.get("passwd") or {}).get("users") or ()),
        "kernel arguments": len(spec.get("kernelArguments") or ()),
        "extensions": len(spec.get("extensions") or ()),
    }
    lines = [
        f"{rendered['metadata']['name']}  (pool {pool})",
        "  " + ", ".join(f"{what}: {n}" for what, n in counts.items()),
        f"  kernel type: {spec.get('kernelType') or 'default'}, FIPS: {str(bool(spec.get('fips'))).lower()}, "
        f"OS image: {spec.get('osImageURL') or '(the cluster default)'}",
        "-o yaml (or -o json) prints the rendered MachineConfig itself",
    ]
    return "\n".join(lines) + "\n"
