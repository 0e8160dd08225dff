"""A kube-apiserver CA rotation as upstream's certificate writer handles it
(pkg/daemon/certificate_writer.go): the ConfigMap kubeconfig-data's bundle merged into
/etc/kubernetes/kubeconfig, the kubelet restarted with it unless only the signers that rotate
on their own are new, and the rotation then recorded on the node as observed."""

from __future__ import annotations

import base64
import datetime
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcd.agent.certs import CertificateWriter
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.node import NodeWriter
from mcd.host.certs import KUBELET_KUBECONFIG, restart_kubelet_with_ca
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.planner import certs

_KEY = ec.generate_private_key(ec.SECP256R1())


def cert(cn: str) -> str:
    """A self-signed CA certificate of subject CN `cn`, as PEM text."""
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "openshift"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # fmt: skip
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    built = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(_KEY.public_key())
        .serial_number(7).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=365))
        .sign(_KEY, hashes.SHA256())
    )  # fmt: skip
    return built.public_bytes(serialization.Encoding.PEM).decode()


OLD = cert("kube-apiserver-to-kubelet-signer")
NEW = cert("kube-apiserver-service-network-signer")
LB = cert("kube-apiserver-lb-signer")


def kubeconfig(ca: str) -> bytes:
    data = base64.b64encode(ca.encode()).decode()
    cluster = {"server": "https://api-int.example:6443", "certificate-authority-data": data}
    user = {"client-certificate": "/var/lib/kubelet/pki/kubelet-client-current.pem"}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "kubelet", "user": user}],
    }
    return yaml.safe_dump(doc).encode()


def ca_of(text: bytes) -> str:
    doc = yaml.safe_load(text)
    return base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]).decode()


# --- the pure rules ---------------------------------------------------------------------------


def test_the_subject_cn_is_read_from_the_certificate() -> None:
    der = certs._der(NEW)
    assert der is not None and certs.subject_cn(der) == "kube-apiserver-service-network-signer"
    assert certs.subject_cn(b"\x30\x03\x02\x01\x01") is None


def test_a_new_signer_is_merged_and_restarts_the_kubelet() -> None:
    merged = certs.merge_server_ca((OLD + NEW).encode(), kubeconfig(OLD))
    assert merged.added == ("kube-apiserver-service-network-signer",)
    assert merged.restart_kubelet
    assert merged.kubeconfig is not None
    assert ca_of(merged.kubeconfig) == (OLD + NEW).strip()  # every certificate, the old one kept
    doc = yaml.safe_load(merged.kubeconfig)
    assert doc["clusters"][0]["cluster"]["server"] == "https://api-int.example:6443"  # the rest kept
    assert doc["users"][0]["name"] == "kubelet"


def test_only_quiet_signers_new_write_the_kubeconfig_without_a_restart() -> None:
    merged = certs.merge_server_ca((OLD + LB).encode(), kubeconfig(OLD))
    assert merged.added == ("kube-apiserver-lb-signer",)
    assert merged.kubeconfig is not None and not merged.restart_kubelet


def test_a_bundle_the_kubeconfig_already_holds_writes_nothing() -> None:
    merged = certs.merge_server_ca(OLD.encode(), kubeconfig(OLD))
    assert (merged.kubeconfig, merged.added, merged.restart_kubelet) == (None, (), False)


def test_a_malformed_certificate_is_not_carried_over() -> None:
    broken = "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"
    merged = certs.merge_server_ca((OLD + broken + NEW).encode(), kubeconfig(OLD))
    assert merged.kubeconfig is not None
    assert ca_of(merged.kubeconfig) == (OLD + NEW).strip()
    assert merged.restart_kubelet


def test_a_kubeconfig_without_clusters_is_refused() -> None:
    with pytest.raises(certs.BadKubeconfig):
        certs.merge_server_ca(NEW.encode(), b"apiVersion: v1\nkind: Config\n")


@pytest.mark.parametrize(
    ("cm", "want"),
    [
        ({"binaryData": {"ca-bundle.crt": base64.b64encode(b"x").decode()}}, b"x"),
        ({"data": {"ca-bundle.crt": base64.b64encode(b"y").decode()}}, b"y"),
        ({"data": {"ca-bundle.crt": "-----BEGIN"}}, b"-----BEGIN"),
        ({"data": {}}, None),
    ],
)
def test_the_configmap_bundle_is_read_as_upstreams_cm_to_data(cm: dict[str, Any], want: bytes | None) -> None:
    assert certs.configmap_bytes(cm, "ca-bundle.crt") == want


# --- the writer -------------------------------------------------------------------------------


class Api:
    def __init__(self, bundle: str | None) -> None:
        self.node: dict[str, Any] = {"metadata": {"name": "n", "resourceVersion": "1", "annotations": {}}}
        self.bundle = bundle
        self.asked: list[tuple[str, str]] = []

    def get_node(self, name: str) -> dict[str, Any]:
        return self.node

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        meta = self.node["metadata"]
        meta["annotations"].update(patch["metadata"].get("annotations") or {})
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return self.node

    def get_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        self.asked.append((namespace, name))
        return {"data": {"ca-bundle.crt": self.bundle}} if self.bundle is not None else {"data": {}}


def rotating_cc(rv: str) -> dict[str, Any]:
    spec = {"kubeAPIServerServingCAData": base64.b64encode((OLD + NEW).encode()).decode()}
    meta = {"name": "machine-config-controller", "resourceVersion": rv,
            "annotations": {certs.SERVICE_CA_ROTATE: "true"}}  # fmt: skip
    return {"metadata": meta, "spec": spec}


def _writer(root: Path, api: Api, restarts: list[bytes]) -> CertificateWriter:
    node = NodeWriter(api, "n")
    node.refresh()
    return CertificateWriter(api, node, EventRecorder(None, "n"), HostRoot(root), threading.Event(),  # type: ignore[arg-type]
                             restart_kubelet=restarts.append)  # fmt: skip


def test_a_rotation_merges_the_kubeconfig_restarts_the_kubelet_and_is_observed_once(tmp_path: Path) -> None:
    path = tmp_path / "etc/kubernetes/kubeconfig"
    path.parent.mkdir(parents=True)
    path.write_bytes(kubeconfig(OLD))
    path.chmod(0o600)
    api, restarts = Api(OLD + NEW), []
    w = _writer(tmp_path, api, restarts)
    w.sync(rotating_cc("9"))
    assert api.asked == [("openshift-machine-config-operator", "kubeconfig-data")]
    assert ca_of(path.read_bytes()) == (OLD + NEW).strip()
    assert path.stat().st_mode & 0o777 == 0o600  # the file's mode kept
    assert [r.decode() for r in restarts] == [OLD + NEW.rstrip("\n")]
    annotations = api.node["metadata"]["annotations"]
    assert annotations[ann.LAST_OBSERVED_SERVER_CA] == "true"
    assert annotations[ann.LAST_SYNCED_CONTROLLER_CONFIG] == "9"
    w.writer.refresh()
    w.sync(rotating_cc("9"))  # still flagged, already observed: no second merge or restart
    assert len(api.asked) == 1 and len(restarts) == 1


def test_a_rotation_without_the_bundle_writes_the_rest_and_is_observed(tmp_path: Path) -> None:
    api, restarts = Api(None), []
    _writer(tmp_path, api, restarts).sync(rotating_cc("9"))
    assert restarts == []
    assert (tmp_path / "etc/kubernetes/kubelet-ca.crt").exists()
    assert api.node["metadata"]["annotations"][ann.LAST_OBSERVED_SERVER_CA] == "true"


class Manager:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def stop(self, unit: str) -> None:
        self.calls.append(f"stop {unit}")

    def start(self, unit: str) -> None:
        self.calls.append(f"start {unit}")

    def daemon_reload(self) -> None:
        self.calls.append("daemon-reload")


def test_the_kubelet_restart_gives_its_kubeconfig_the_ca(tmp_path: Path) -> None:
    path = tmp_path / KUBELET_KUBECONFIG.lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_bytes(kubeconfig(OLD))
    manager = Manager()
    restart_kubelet_with_ca(HostRoot(tmp_path), manager, (OLD + NEW).encode())  # type: ignore[arg-type]
    assert manager.calls == ["stop kubelet.service", "daemon-reload", "start kubelet.service"]
    assert ca_of(path.read_bytes()) == OLD + NEW


def test_the_kubelet_is_started_again_when_its_kubeconfig_is_missing(tmp_path: Path) -> None:
    manager = Manager()
    with pytest.raises(FileNotFoundError):
        restart_kubelet_with_ca(HostRoot(tmp_path), manager, NEW.encode())  # type: ignore[arg-type]
    assert manager.calls == ["stop kubelet.service", "start kubelet.service"]
