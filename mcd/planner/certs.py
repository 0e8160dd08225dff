"""What the certificate writer puts on the node from the ControllerConfig. Pure: no I/O.

Upstream's certificate writer (`pkg/daemon/certificate_writer.go`) copies four kinds of data
from the ControllerConfig `machine-config-controller` to the node, outside any MachineConfig:
the kube-apiserver serving CA (the kubelet's CA bundle), the cloud provider's CA, the merged
internal-registry pull secret and one `ca.crt` per image registry under
`/etc/docker/certs.d/<registry>/`. It does so whenever the ControllerConfig's resourceVersion
differs from the one recorded on the node (or a service-CA rotation is flagged).

`parse` turns the object into what to write, refusing the whole object when any part of it is
unusable (data that is not base64, a bundle holding no or a broken certificate, a registry name
that is not a single directory name, a pull secret that is not JSON), so a bad ControllerConfig
writes nothing at all instead of half of it. Upstream writes whatever it is given.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcd.planner.managed_paths import CLOUD_CA, IMAGE_CA_DIR, INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA

CONTROLLER_CONFIG = "machine-config-controller"
# the ControllerConfig annotation the operator sets to "true" while the kube-apiserver CA rotates
SERVICE_CA_ROTATE = "machineconfiguration.openshift.io/service-ca-rotate"
ROTATE_TRUE = "true"
# each registry's CA, in its directory under IMAGE_CA_DIR
REGISTRY_CA_NAME = "ca.crt"

_PEM_BLOCK = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END ([A-Z0-9 ]+)-----", re.DOTALL
)


class BadControllerConfig(ValueError):
    """The ControllerConfig holds data the writer refuses; `problems` says what, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Certificates:
    """Everything one ControllerConfig asks the node to hold."""

    resource_version: str
    rotate: str  # the service-ca-rotate annotation ("" when absent)
    kubelet_ca: bytes
    cloud_ca: bytes
    pull_secret: bytes
    # directory name under IMAGE_CA_DIR -> CA data; the user's bundle wins over the cluster's
    registry_cas: Mapping[str, bytes]

    def bundles(self) -> dict[str, bytes]:
        """The single files, in upstream's order: the pull secret first, then the CA bundles."""
        return {
            INTERNAL_REGISTRY_PULL_SECRET: self.pull_secret,
            KUBELET_CA: self.kubelet_ca,
            CLOUD_CA: self.cloud_ca,
        }

    @property
    def rotating(self) -> bool:
        return self.rotate == ROTATE_TRUE


def registry_dir(file: str) -> str:
    """The directory a registry's CA goes to: upstream's `..` for the port's `:` undone."""
    return file.replace("..", ":")


def registry_ca_path(directory: str) -> str:
    return f"{IMAGE_CA_DIR}/{directory}/{REGISTRY_CA_NAME}"


def needs_write(synced_resource_version: str | None, certs: Certificates) -> bool:
    """Upstream's change detection: a resourceVersion the node has not recorded, or a rotation."""
    return synced_resource_version != certs.resource_version or certs.rotating


def with_newline(data: bytes) -> bytes:
    """Upstream ends the single files with a newline (an empty one becomes just that newline)."""
    return data if data.endswith(b"\n") else data + b"\n"


def _bytes(value: Any, where: str, problems: list[str]) -> bytes:
    """A Go []byte field: base64 in JSON; absent or null is empty."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        problems.append(f"{where}: expected base64 data, got {type(value).__name__}")
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        problems.append(f"{where}: not valid base64")
        return b""


def pem_problem(data: bytes) -> str | None:
    """Why `data` is not a bundle of PEM certificates, or None when it is one.

    Every block must be a CERTIFICATE whose body is base64 of a DER sequence, and nothing but
    blank lines and comments may sit between blocks.
    """
    blocks = list(_PEM_BLOCK.finditer(data))
    if not blocks:
        return "no PEM certificate in it"
    rest = _PEM_BLOCK.sub(b"", data)
    if rest.strip():
        return "text outside the PEM blocks"
    for n, m in enumerate(blocks, 1):
        if m.group(1) != m.group(3) or m.group(1) != b"CERTIFICATE":
            return f"block {n} is not a CERTIFICATE"
        try:
            der = base64.b64decode(b"".join(m.group(2).split()), validate=True)
        except (binascii.Error, ValueError):
            return f"certificate {n} is not valid base64"
        if len(der) < 2 or der[0] != 0x30:
            return f"certificate {n} is not DER"
    return None


def _dir_problem(name: str) -> str | None:
    if not name:
        return "an empty registry name"
    if "/" in name or "\0" in name or name in (".", ":"):
        return f"registry name {name!r} is not a directory name"
    return None


def parse(obj: Mapping[str, Any]) -> Certificates:
    """What the ControllerConfig `obj` asks for; BadControllerConfig listing every refusal."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    problems: list[str] = []
    if not isinstance(spec, Mapping):
        raise BadControllerConfig(["spec is not an object"])
    kubelet_ca = _bytes(spec.get("kubeAPIServerServingCAData"), "spec.kubeAPIServerServingCAData", problems)
    if not problems:
        why = pem_problem(kubelet_ca) if kubelet_ca else "empty: the kubelet would trust no API server"
        if why:
            problems.append(f"spec.kubeAPIServerServingCAData: {why}")
    cloud_ca = _bytes(spec.get("cloudProviderCAData"), "spec.cloudProviderCAData", problems)
    if cloud_ca and (why := pem_problem(cloud_ca)):
        problems.append(f"spec.cloudProviderCAData: {why}")
    pull_secret = _bytes(spec.get("internalRegistryPullSecret"), "spec.internalRegistryPullSecret", problems)
    if pull_secret:
        try:
            if not isinstance(json.loads(pull_secret), dict):
                problems.append("spec.internalRegistryPullSecret: not a JSON object")
        except ValueError:
            problems.append("spec.internalRegistryPullSecret: not JSON")
    cas: dict[str, bytes] = {}
    for field in ("imageRegistryBundleData", "imageRegistryBundleUserData"):
        entries = spec.get(field) or []
        if not isinstance(entries, list):
            problems.append(f"spec.{field}: not a list")
            continue
        for i, entry in enumerate(entries):
            where = f"spec.{field}[{i}]"
            if not isinstance(entry, Mapping):
                problems.append(f"{where}: not an object")
                continue
            name = registry_dir(str(entry.get("file") or ""))
            if why := _dir_problem(name):
                problems.append(f"{where}.file: {why}")
                continue
            data = _bytes(entry.get("data"), f"{where}.data", problems)
            if data and (why := pem_problem(data)):
                problems.append(f"{where}.data ({name}): {why}")
            cas[name] = data
    if problems:
        raise BadControllerConfig(problems)
    annotations = meta.get("annotations") or {}
    return Certificates(
        resource_version=str(meta.get("resourceVersion", "")),
        rotate=str(annotations.get(SERVICE_CA_ROTATE, "")),
        kubelet_ca=kubelet_ca,
        cloud_ca=cloud_ca,
        pull_secret=pull_secret,
        registry_cas=cas,
    )
