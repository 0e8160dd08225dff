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

from mcd.config.record import record
from mcd.planner.managed_paths import CLOUD_CA, IMAGE_CA_DIR, INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

CONTROLLER_CONFIG = "machine-config-controller"
# the ControllerConfig annotation the operator sets to "true" while the kube-apiserver CA rotates
SERVICE_CA_ROTATE = "machineconfiguration.openshift.io/service-ca-rotate"
ROTATE_TRUE = "true"
# each registry's CA, in its directory under IMAGE_CA_DIR
REGISTRY_CA_NAME = "ca.crt"

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END ([A-Z0-9 ]+)-----", re.DOTALL)


class BadControllerConfig(ValueError):
    """The ControllerConfig holds data the writer refuses; `problems` says what, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@record
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


# --- kube-apiserver CA rotation ---------------------------------------------------------------
#
# While the operator flags a rotation (SERVICE_CA_ROTATE "true") and the node has not observed it
# yet, upstream merges the CA bundle of the ConfigMap KUBECONFIG_DATA into the cluster CA of
# /etc/kubernetes/kubeconfig and, when a certificate new to it is not one of the signers that
# rotate on their own during upgrades, restarts the kubelet with that CA in its own kubeconfig.

KUBECONFIG_DATA = "kubeconfig-data"  # the ConfigMap, in the MCO's namespace
KUBECONFIG_DATA_KEY = "ca-bundle.crt"
CA_DATA = "certificate-authority-data"
_END = "-----END CERTIFICATE-----"
# new certificates of these signers (a substring of the subject's CN) restart nothing
QUIET_SIGNERS = (
    "kube-apiserver-localhost-signer",
    "openshift-kube-apiserver-operator_localhost-recovery-serving-signer",
    "kube-apiserver-lb-signer",
)
_CN_OID = b"\x55\x04\x03"  # 2.5.4.3
_PEM_ONE = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


class BadKubeconfig(ValueError):
    """The kubeconfig whose CA is to be merged cannot be read as one."""


@record
class CaMerge:
    """What a rotation does: the kubeconfig to write (None: it holds every CA already), the CA
    bundle it now names, the subjects new to it, and whether the kubelet must restart."""

    kubeconfig: bytes | None
    ca: bytes
    added: tuple[str, ...]
    restart_kubelet: bool


def configmap_bytes(cm: Mapping[str, Any], key: str) -> bytes | None:
    """Upstream's cmToData: `binaryData[key]`, else `data[key]` base64-decoded when it is base64
    and as it is otherwise; None when neither holds the key."""
    binary = (cm.get("binaryData") or {}).get(key)
    if isinstance(binary, str):
        try:
            return base64.b64decode(binary, validate=True)
        except (binascii.Error, ValueError):
            return None
    text = (cm.get("data") or {}).get(key)
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode()


def _split_after(text: str) -> list[str]:
    """Go's strings.SplitAfter(text, END): each piece ends with the separator, the last one is
    what follows the last separator (often "")."""
    parts = text.split(_END)
    return [p + _END for p in parts[:-1]] + [parts[-1]]


def _der(piece: str) -> bytes | None:
    """Go's pem.Decode of the first block in `piece`; None when there is none."""
    m = _PEM_ONE.search(piece)
    if m is None:
        return None
    try:
        return base64.b64decode("".join(m.group(2).split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def _tlv(der: bytes, i: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `i`."""
    tag, length = der[i], der[i + 1]
    start = i + 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(der[start : start + n], "big")
        start += n
    end = start + length
    if end > len(der):
        raise ValueError("DER element past the end")
    return tag, start, end


def subject_cn(der: bytes) -> str | None:
    """The subject's common name of an X.509 certificate (the last one, as Go's pkix.Name; ""
    when it has none); None when `der` is not a certificate this can read."""
    try:
        tag, start, _ = _tlv(der, 0)
        tag2, i, _ = _tlv(der, start)  # tbsCertificate
        if (tag, tag2) != (0x30, 0x30):
            return None
        if der[i] == 0xA0:  # explicit version
            i = _tlv(der, i)[2]
        for _ in range(4):  # serial number, signature algorithm, issuer, validity
            i = _tlv(der, i)[2]
        tag, i, end = _tlv(der, i)
        if tag != 0x30:
            return None
        cn = ""
        while i < end:  # the subject: a SET of attributes per RDN
            _, j, set_end = _tlv(der, i)
            while j < set_end:
                _, k, attr_end = _tlv(der, j)
                _, oid_start, oid_end = _tlv(der, k)
                if der[oid_start:oid_end] == _CN_OID:
                    _, v_start, v_end = _tlv(der, oid_end)
                    cn = der[v_start:v_end].decode("utf-8", "replace")
                j = attr_end
            i = set_end
        return cn
    except (IndexError, ValueError):
        return None


def merge_server_ca(bundle: bytes, kubeconfig: bytes) -> CaMerge:
    """Upstream's merge of the rotated CA `bundle` into `kubeconfig` (the first cluster's CA).

    The kubeconfig is written again only when its CA differs and some certificate of the bundle
    is not in it; it then names every readable certificate of the bundle. The kubelet restarts
    when one of the new certificates is not of QUIET_SIGNERS.
    """
    # PyYAML only for a CA rotation: a plan without one does not pay its import (~15 ms)
    from mcd.config.yamllib import yaml  # noqa: PLC0415

    try:
        doc = yaml.safe_load(kubeconfig)
        cluster = doc["clusters"][0]["cluster"]
        on_disk = base64.b64decode(cluster.get(CA_DATA) or "", validate=True)
    except (
        yaml.YAMLError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        binascii.Error,
        ValueError,
    ) as exc:
        raise BadKubeconfig(f"no cluster CA to merge into ({type(exc).__name__}: {exc})") from None
    new_text = bundle.decode("utf-8", "replace").strip()
    disk_pieces = _split_after(on_disk.decode("utf-8", "replace").strip())
    differs = bundle.strip() != on_disk.strip()
    added: list[str] = []
    full: list[str] = []
    for piece in _split_after(new_text):
        if piece not in disk_pieces:
            added.append(piece)
        der = _der(piece)
        if der is None:
            break  # upstream stops at the first piece that holds no PEM block
        if subject_cn(der) is None:
            continue  # malformed: not carried over
        full.append(piece)
    names: list[str] = []
    restart = False
    for piece in added:
        der = _der(piece)
        if der is None:
            break
        cn = subject_cn(der)
        if cn is None:
            continue
        names.append(cn)
        restart = restart or not any(signer in cn for signer in QUIET_SIGNERS)
    ca = "".join(full).encode()
    if not (differs and added):
        return CaMerge(None, ca, tuple(names), False)
    cluster[CA_DATA] = base64.b64encode(ca).decode()
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).encode()
    return CaMerge(text, ca, tuple(names), restart and bool(ca))


def with_cluster_ca(kubeconfig: bytes, ca: bytes) -> bytes:
    """`kubeconfig` with its first cluster's CA set to `ca`, the rest kept (the kubelet's own,
    at a restart for a rotation)."""
    from mcd.config.yamllib import yaml  # noqa: PLC0415 (as merge_server_ca)

    try:
        doc = yaml.safe_load(kubeconfig)
        doc["clusters"][0]["cluster"][CA_DATA] = base64.b64encode(ca).decode()
    except (yaml.YAMLError, TypeError, KeyError, IndexError) as exc:
        raise BadKubeconfig(f"no cluster to set the CA of ({type(exc).__name__}: {exc})") from None
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).encode()
