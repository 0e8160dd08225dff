"""The MachineConfig value the daemon works on. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config import ostables
from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.ignition import (
    DEFAULT_PARSE,
    EMPTY_IGNITION,
    IgnitionConfig,
    IgnitionResult,
    ParseOptions,
    parse_ignition,
)
from mcd.config.record import field, record
from mcd.config.text import shown

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

MC_API_GROUP = "machineconfiguration.openshift.io"
EMPTY_MC_NAME = "mco-empty-mc"  # upstream's name for "no previous config"
OCL_IMAGE_ANNOTATION = "machineconfiguration.openshift.io/ocl-osimageurl"
VALID_KERNEL_TYPES = ("", "default", "realtime", "64k-pages")
ORIGINAL_OS_IMAGE_ANNOTATION = "machineconfiguration.openshift.io/original-osimageurl"


@record
class MachineConfig:
    """A (rendered) MachineConfig: spec fields plus the parsed Ignition config.

    `ignition` is the parse result; its config is None when the Ignition part is unusable,
    which upstream reports as an unreconcilable update rather than as bad input.
    """

    name: str
    ignition: IgnitionResult
    os_image_url: str = ""
    kernel_arguments: tuple[str, ...] = ()
    kernel_type: str = ""
    extensions: tuple[str, ...] = ()
    fips: bool = False
    base_os_extensions_container_image: str = ""
    annotations: tuple[tuple[str, str], ...] = ()
    # where the Ignition config sits in the source document, to locate findings
    ignition_path: JsonPath = ("spec", "config")
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # `raw` and the JSON text it was decoded from, when that text is a whole source document:
    # the update record is then that text, not `raw` encoded again (megabytes for a rendered
    # config). Kept beside `raw` so a config given another `raw` is not written with this text.
    raw_text: tuple[Mapping[str, Any], bytes] | None = field(default=None, compare=False, repr=False)
    # findings about spec fields other than the Ignition config (warnings), located already
    spec_findings: tuple[Finding, ...] = field(default=(), compare=False, repr=False)

    @property
    def config(self) -> IgnitionConfig | None:
        return self.ignition.config

    @property
    def source_text(self) -> bytes | None:
        """The JSON text of `raw` as read (see `raw_text`), or None."""
        if self.raw_text is not None and self.raw_text[0] is self.raw:
            return self.raw_text[1]
        return None

    @property
    def ocl_image(self) -> str:
        return dict(self.annotations).get(OCL_IMAGE_ANNOTATION, "")

    def located_findings(self) -> list[Finding]:
        return [*self.spec_findings, *(f.located(self.ignition_path) for f in self.ignition.findings)]


def empty_machineconfig(name: str = EMPTY_MC_NAME) -> MachineConfig:
    """Upstream's synthetic empty config, used when a node has no previous config."""
    return MachineConfig(name=name, ignition=IgnitionResult(EMPTY_IGNITION))


def machineconfig_from_object(
    obj: Mapping[str, Any],
    source: str,
    path: JsonPath = (),
    *,
    options: ParseOptions = DEFAULT_PARSE,
    like: MachineConfig | None = None,
) -> MachineConfig:
    """Build a MachineConfig from a decoded object; raises InputError for non-Ignition problems.

    `like`: a config parsed before (the one the node runs, say): the files and units declared
    alike in both are taken over from it (`mcd.config.reuse`) instead of being parsed again.
    """
    findings: list[Finding] = []
    name, annotations = _metadata(obj, path, findings)
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise InputError(source, [Finding((*path, "spec"), "expected an object")])
    read = _SpecReader(spec, (*path, "spec"), findings)
    fips = read.boolean("fips")
    os_image_url = read.string("osImageURL")
    kernel_type = read.string("kernelType")
    base_ext = read.string("baseOSExtensionsContainerImage")
    kargs = read.strings("kernelArguments")
    extensions = read.strings("extensions")
    notes = _spec_notes(obj, path, kernel_type, extensions)
    if findings:
        raise InputError(source, findings)
    raw_ign = spec.get("config")
    # upstream treats a MachineConfig without Ignition (e.g. kernelArguments only) as valid
    earlier = None if like is None else (_ignition_doc(like), like.ignition)
    ignition = (
        IgnitionResult(EMPTY_IGNITION) if raw_ign in (None, {}) else parse_ignition(raw_ign, options, earlier)
    )
    return MachineConfig(
        name=name,
        ignition=ignition,
        os_image_url=os_image_url,
        kernel_arguments=kargs,
        kernel_type=kernel_type,
        extensions=extensions,
        fips=fips,
        base_os_extensions_container_image=base_ext,
        annotations=tuple(sorted(annotations.items())),
        ignition_path=(*path, "spec", "config"),
        spec_findings=tuple(notes),
        raw=obj,
    )


def _metadata(
    obj: Mapping[str, Any], path: JsonPath, findings: list[Finding]
) -> tuple[str, Mapping[str, str]]:
    """The name and annotations of `obj`; what is malformed is added to `findings` (and read empty)."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        findings.append(Finding((*path, "metadata"), "expected an object"))
        meta = {}
    name = meta.get("name", "")
    if not isinstance(name, str):
        findings.append(Finding((*path, "metadata", "name"), "expected a string"))
        name = ""
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping) or not all(isinstance(v, str) for v in annotations.values()):
        findings.append(Finding((*path, "metadata", "annotations"), "expected an object of strings"))
        annotations = {}
    return name, annotations


class _SpecReader:
    """Typed fields of a MachineConfig's spec: null or absent reads as empty, a value of the wrong
    type is added to `findings` (and read empty)."""

    def __init__(self, spec: Mapping[str, Any], path: JsonPath, findings: list[Finding]) -> None:
        self.spec, self.path, self.findings = spec, path, findings

    def boolean(self, key: str) -> bool:
        value = self.spec.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.findings.append(Finding((*self.path, key), "expected a boolean"))
            return False
        return value

    def string(self, key: str) -> str:
        value = self.spec.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.findings.append(Finding((*self.path, key), f"expected a string, got {type(value).__name__}"))
            return ""
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.spec.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.findings.append(Finding((*self.path, key), "expected a list of strings"))
            return ()
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.findings.append(Finding((*self.path, key, i), "expected a string"))
        return tuple(v for v in value if isinstance(v, str))


def _spec_notes(
    obj: Mapping[str, Any], path: JsonPath, kernel_type: str, extensions: tuple[str, ...]
) -> list[Finding]:
    """Errors kept beside the config: upstream's controller refuses an unknown kernelType (the pool
    degrades, the config is never rendered) and the daemon fails on an unknown extension; kept
    so that `plan` can still say what the rest would do."""
    notes = _unknown_fields(obj, path)
    if kernel_type not in VALID_KERNEL_TYPES:
        valid = ", ".join(repr(t) for t in VALID_KERNEL_TYPES)
        notes.append(
            Finding((*path, "spec", "kernelType"), f"kernelType={kernel_type} is invalid (want {valid})")
        )
    known = ostables.SUPPORTED_EXTENSIONS
    notes += [
        Finding(
            (*path, "spec", "extensions", i),
            f"invalid extension {ext!r}: supported are {', '.join(sorted(known))}",
        )
        for i, ext in enumerate(extensions)
        if ext not in known
    ]
    return notes


def _ignition_doc(mc: MachineConfig) -> object:
    """The Ignition document `mc` was parsed from (None when its source object has none)."""
    doc: object = mc.raw
    for key in mc.ignition_path:
        doc = doc.get(key) if isinstance(doc, Mapping) and isinstance(key, str) else None
    return doc


# the fields of a MachineConfig object the API server knows (openshift/api machineconfiguration/v1
# and ObjectMeta); `spec.config` is an embedded Ignition config with its own unknown-key rule
_TOP_FIELDS = frozenset(("apiVersion", "kind", "metadata", "spec"))
_META_FIELDS = frozenset(
    (
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    )
)
_SPEC_FIELDS = frozenset(
    (
        "osImageURL",
        "config",
        "kernelArguments",
        "extensions",
        "fips",
        "kernelType",
        "baseOSExtensionsContainerImage",
    )
)


def _unknown_fields(obj: Mapping[str, Any], path: JsonPath) -> list[Finding]:
    """Fields the API server would refuse, in kubectl's words (its default, strict validation)."""
    out: list[Finding] = []
    for where, value, known in (
        ((), obj, _TOP_FIELDS),
        (("metadata",), obj.get("metadata"), _META_FIELDS),
        (("spec",), obj.get("spec"), _SPEC_FIELDS),
    ):
        if isinstance(value, Mapping):
            for key in value:
                if key not in known:
                    field_path = ".".join((*where, str(key)))
                    out.append(Finding((*path, *where, key), f'unknown field "{shown(field_path)}"'))
    return out


def machineconfig_from_ignition(
    doc: Mapping[str, Any], name: str, path: JsonPath = (), *, options: ParseOptions = DEFAULT_PARSE
) -> MachineConfig:
    """A bare Ignition config seen as a MachineConfig with only `spec.config` set."""
    return MachineConfig(name=name, ignition=parse_ignition(doc, options), ignition_path=path, raw=doc)
