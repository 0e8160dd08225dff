"""A pool's rendered MachineConfig, as upstream's render controller makes it. Pure: no I/O.

The rules (upstream `MergeMachineConfigs` and the render controller, in our words):

* order: the configs labelled for the `worker` role first, then the others, each group by name
  (so a custom pool's own configs override the worker configs it inherits);
* Ignition: the first config's (an empty spec 3.5 config when it has none), then each later one
  merged over it (`mcd.render.merge`); a file the later config gives no compression loses the
  compression of the earlier one; every file without `overwrite` gets `overwrite: true`;
* `kernelArguments` and `extensions`: every config's, in order (duplicates kept);
* `fips`: true when any config sets it; `kernelType`: the last `realtime` or `64k-pages`, else
  `default`; the `kernel-devel` extension only with the default kernel;
* `osImageURL` and `baseOSExtensionsContainerImage`: the last non-empty value of a config that
  no controller generated, else the cluster's (`os_image_url`, upstream's ControllerConfig);
* name: ``rendered-<pool>-<md5 of a fixed salt and the spec as YAML>`` (`mcd.render.goyaml`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from mcd import __version__
from mcd.config import ostables
from mcd.config.digest import md5
from mcd.config.findings import InputError, JsonPath, format_path
from mcd.config.ignition import SPEC2_VERSIONS, spec3_document
from mcd.config.machineconfig import MC_API_GROUP, VALID_KERNEL_TYPES, machineconfig_from_object
from mcd.config.record import record
from mcd.render.goyaml import go_yaml, unreadable_character
from mcd.render.merge import SPEC_VERSION, in_field_order, merge, normalize
from mcd.render.spec2 import Spec2Error, upstream_cleanup

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

ROLE_LABEL = f"{MC_API_GROUP}/role"
GENERATED_BY_ANNOTATION = f"{MC_API_GROUP}/generated-by-controller-version"
OS_IMAGE_URL_OVERRIDDEN_ANNOTATION = f"{MC_API_GROUP}/os-image-url-overridden"
RENDERED_PREFIX = "rendered-"
# what we write in the generated-by annotation: upstream writes its controller's commit
GENERATED_BY = f"mcd-{__version__}"
WORKER = "worker"
_KERNEL_ROLE = {"realtime", "64k-pages"}
# upstream's fixed salt before the spec's YAML (80 bytes; changing it renames every pool's config)
_SALT = bytes.fromhex(
    "107ccee48b38afaf4fe586769d9ad36e195d2ffdac6a2507ae0da0b96e115734db830cceda8d7487"
    "bcb5c097e93e7ea54053b3770fa8d0c5926b3ae385bcee1a211aebca20ad1fea2990944f06ce1716"
)


class RenderError(ValueError):
    """A pool's MachineConfigs cannot be rendered: names the config (`index` in the input, its
    `name`) and the JSON path of the offending value within it."""

    def __init__(self, index: int | None, name: str, path: JsonPath, message: str) -> None:
        self.index = index
        self.name = name
        self.path = path
        self.message = message
        where = f"MachineConfig {name!r}: " if name else ""
        at = f"{format_path(path)}: " if path else ""
        super().__init__(f"{where}{at}{message}")


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's labels ({} when it has none)."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def is_in_pool(obj: Mapping[str, Any], pool: str) -> bool:
    """Whether a MachineConfig is selected by a pool's selector as upstream's default pools
    select (``machineconfiguration.openshift.io/role: <pool>``)."""
    return labels_of(obj).get(ROLE_LABEL) == pool


@record
class _Config:
    """One input config, checked: where it was in the input, its name, spec and annotations."""

    position: int
    name: str
    spec: Mapping[str, Any]
    annotations: Mapping[str, str]


def _checked(index: int, obj: object) -> _Config:
    """The config's name and spec; RenderError for what upstream refuses before merging."""
    if not isinstance(obj, Mapping):
        raise RenderError(index, "", (), f"expected a MachineConfig object, got {type(obj).__name__}")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise RenderError(index, "", ("metadata", "name"), "a MachineConfig needs a name")
    try:
        mc = machineconfig_from_object(obj, name)
    except InputError as exc:
        first = exc.findings[0]
        raise RenderError(index, name, first.path, first.message) from None
    if not labels_of(obj):
        raise RenderError(index, name, ("metadata", "labels"), "cannot find label in MachineConfig")
    if mc.kernel_type not in VALID_KERNEL_TYPES:
        raise RenderError(index, name, ("spec", "kernelType"), f"kernelType={mc.kernel_type} is invalid")
    spec: Mapping[str, Any] = obj.get("spec") or {}
    if spec.get("config") is not None:
        spec = _spec2_cleaned(index, name, spec)
        errors = mc.ignition.errors
        # a spec 2.2 config may hold duplicates that upstream's clean-up removes: valid once cleaned
        if errors and spec is not obj.get("spec"):
            errors = errors if machineconfig_from_object({**obj, "spec": spec}, name).ignition.errors else ()
        if errors:
            return_path = (*mc.ignition_path, *errors[0].path)
            raise RenderError(index, name, return_path, errors[0].message)
        # as upstream: the extensions are checked only beside an Ignition config
        for i, ext in enumerate(mc.extensions):
            if ext not in ostables.SUPPORTED_EXTENSIONS:
                raise RenderError(index, name, ("spec", "extensions", i), f"invalid extension {ext!r}")
    return _Config(index, name, spec, dict(mc.annotations))


def _spec2_cleaned(index: int, name: str, spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """`spec` with a spec 2.2 config cleaned up as upstream does first (`mcd.render.spec2`)."""
    config = spec["config"]
    ignition = config.get("ignition") if isinstance(config, Mapping) else None
    if not isinstance(ignition, Mapping) or ignition.get("version") not in SPEC2_VERSIONS:
        return spec
    try:
        return {**spec, "config": upstream_cleanup(config)}
    except Spec2Error as exc:
        raise RenderError(index, name, ("spec", "config", *exc.path), str(exc)) from None


def _ordered(configs: Sequence[Mapping[str, Any]]) -> list[_Config]:
    checked = [_checked(i, obj) for i, obj in enumerate(configs)]
    workers = sorted((c for c in checked if is_in_pool(configs[c.position], WORKER)), key=lambda c: c.name)
    others = sorted((c for c in checked if not is_in_pool(configs[c.position], WORKER)), key=lambda c: c.name)
    return [*workers, *others]


def _files(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = doc.get("storage", {}).get("files", [])
    return files


def _merged_ignition(ordered: Sequence[_Config]) -> dict[str, Any]:
    def document(spec: Mapping[str, Any]) -> dict[str, Any]:
        doc = normalize(spec3_document(spec["config"]))
        doc["ignition"] = {**doc.get("ignition", {}), "version": SPEC_VERSION}
        return doc

    first = ordered[0].spec
    out = document(first) if first.get("config") is not None else {"ignition": {"version": SPEC_VERSION}}
    for config in ordered[1:]:
        if config.spec.get("config") is None:
            continue
        child = document(config.spec)
        # Ignition merges a file's compression apart from its contents: a later file without
        # compression would keep an earlier gzip. Upstream marks "none" as an empty string for
        # the merge and clears it after (https://github.com/coreos/butane/issues/332)
        for file in _files(child):
            file["contents"] = {"compression": "", **file.get("contents", {})}
        out = merge(out, child)
        for file in _files(out):
            if file.get("contents", {}).get("compression") == "":
                contents = {k: v for k, v in file["contents"].items() if k != "compression"}
                if contents:
                    file["contents"] = contents
                else:
                    del file["contents"]
    # upstream writes files over what a node has, whatever the config says (spec 3 made
    # Ignition's default `false`, which a new node joining the pool would otherwise follow)
    files = _files(out)
    for i, file in enumerate(files):
        if "overwrite" not in file:
            files[i] = in_field_order({**file, "overwrite": True}, "File")
    return out


def _last_set(ordered: Sequence[_Config], key: str, base: str) -> str:
    value = base
    for config in ordered:
        if config.annotations.get(GENERATED_BY_ANNOTATION):
            continue  # a generated config carries the cluster's value, not an override
        if config.spec.get(key):
            value = config.spec[key]
    return value


def _strings(ordered: Sequence[_Config], key: str) -> list[str]:
    return [item for config in ordered for item in config.spec.get(key) or ()]


def rendered_name(pool: str, spec: Mapping[str, Any]) -> str:
    """``rendered-<pool>-<hash>``: the MD5 of upstream's salt and the spec as upstream's YAML."""
    text = go_yaml(spec)
    return f"{RENDERED_PREFIX}{pool}-{md5(_SALT + text.encode()).hexdigest()}"


def _kernel_type(ordered: Sequence[_Config]) -> str:
    kernel_type = ""
    for config in ordered:
        if config.spec.get("kernelType") in _KERNEL_ROLE:
            kernel_type = config.spec["kernelType"]
    return kernel_type or "default"


def source_refs(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The pool's `spec.configuration.source` upstream writes beside a rendered config: a
    reference to each config, in the order they were merged (upstream's merge sorts the list it
    is given, and the references are made from that list)."""
    return [
        {"apiVersion": f"{MC_API_GROUP}/v1", "kind": "MachineConfig", "name": config.name}
        for config in _ordered(configs)
    ]


def render_pool(
    pool: str, configs: Sequence[Mapping[str, Any]], *, os_image_url: str | None = None
) -> dict[str, Any]:
    """The rendered MachineConfig of `pool` from its MachineConfigs (the caller selects them);
    `os_image_url` is the cluster's OS image (upstream's ControllerConfig `baseOSContainerImage`).
    Raises RenderError naming the offending config and JSON path."""
    if not configs:
        raise RenderError(None, "", (), f"no MachineConfig for pool {pool!r}")
    ordered = _ordered(configs)
    kernel_type = _kernel_type(ordered)
    extensions = _strings(ordered, "extensions")
    if kernel_type != "default" and "kernel-devel" in extensions:
        config = next(c for c in ordered if "kernel-devel" in (c.spec.get("extensions") or ()))
        where = ("spec", "extensions", list(config.spec["extensions"]).index("kernel-devel"))
        message = f"installing kernel-devel extension is not supported with kernelType: {kernel_type}"
        raise RenderError(config.position, config.name, where, message)
    base = os_image_url or ""
    spec_out: dict[str, Any] = {
        "osImageURL": _last_set(ordered, "osImageURL", base),
        "baseOSExtensionsContainerImage": _last_set(ordered, "baseOSExtensionsContainerImage", ""),
        "config": _merged_ignition(ordered),
        "kernelArguments": _strings(ordered, "kernelArguments"),
        "extensions": extensions,
        "fips": any(config.spec.get("fips") is True for config in ordered),
        "kernelType": kernel_type,
    }
    _check_hashable(ordered, spec_out)
    annotations = {GENERATED_BY_ANNOTATION: GENERATED_BY}
    if spec_out["osImageURL"] != base:
        annotations[OS_IMAGE_URL_OVERRIDDEN_ANNOTATION] = "true"
    return {
        "apiVersion": f"{MC_API_GROUP}/v1",
        "kind": "MachineConfig",
        "metadata": {"name": rendered_name(pool, spec_out), "annotations": annotations},
        "spec": spec_out,
    }


def _check_hashable(ordered: Sequence[_Config], spec: Mapping[str, Any]) -> None:
    """Refuse a text upstream's YAML step refuses (a raw DEL or C1 control character) or folds
    (a raw NEL becomes a space there, so the name would differ), named where it came from."""
    found = _find_text(spec, _unhashable)
    if found is None:
        return
    text = found[1]
    ch = unreadable_character(text) or "\x85"
    message = f"character U+{ord(ch):04X} cannot be named as upstream names a rendered config"
    for config in ordered:
        place = _find_text(config.spec, lambda s: s == text)
        if place is not None:
            raise RenderError(config.position, config.name, ("spec", *place[0]), message)
    raise RenderError(None, "", (), message)  # pragma: no cover - every text comes from a config


def _unhashable(text: str) -> bool:
    return unreadable_character(text) is not None or "\x85" in text


def _find_text(
    value: object, test: Callable[[str], bool], path: JsonPath = ()
) -> tuple[JsonPath, str] | None:
    """The first string in `value` that passes `test`, with its path."""
    if isinstance(value, str):
        return (path, value) if test(value) else None
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        found = _find_text(item, test, (*path, key))
        if found is not None:
            return found
    return None
