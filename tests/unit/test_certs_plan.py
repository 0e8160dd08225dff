"""What the certificate writer takes from a ControllerConfig (`mcd.planner.certs`): upstream's
fields and paths, and the refusals that keep a bad ControllerConfig from writing anything."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcd.planner import certs
from mcd.planner.managed_paths import CLOUD_CA, INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA


def pem(n: int) -> bytes:
    """A PEM certificate block (a DER sequence: enough for the writer's check)."""
    der = bytes([0x30, 0x03, 0x02, 0x01, n])
    return b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(der) + b"\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def controllerconfig(rv: str = "7", annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    spec.setdefault("kubeAPIServerServingCAData", b64(pem(1)))
    meta = {"name": certs.CONTROLLER_CONFIG, "resourceVersion": rv, "annotations": annotations or {}}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig",
        "metadata": meta,
        "spec": spec,
    }


def test_the_fields_map_to_upstreams_files_and_registry_directories() -> None:
    secret = json.dumps({"auths": {"registry.svc:5000": {"auth": "eA=="}}})
    got = certs.parse(controllerconfig(
        cloudProviderCAData=b64(pem(2)),
        internalRegistryPullSecret=b64(secret.encode()),
        imageRegistryBundleData=[{"file": "registry.svc..5000", "data": b64(pem(3))},
                                 {"file": "quay.example", "data": b64(pem(4))}],
        imageRegistryBundleUserData=[{"file": "quay.example", "data": b64(pem(5))}],
        annotations=None,
    ))  # fmt: skip
    assert got.resource_version == "7" and got.rotate == "" and not got.rotating
    want = {INTERNAL_REGISTRY_PULL_SECRET: secret.encode(), KUBELET_CA: pem(1), CLOUD_CA: pem(2)}
    assert got.bundles() == want
    # `..` is the port's `:`; the user's bundle is written last, so it wins
    assert dict(got.registry_cas) == {"registry.svc:5000": pem(3), "quay.example": pem(5)}
    assert certs.registry_ca_path("quay.example") == "/etc/docker/certs.d/quay.example/ca.crt"


def test_change_detection_is_the_recorded_resource_version_or_a_rotation() -> None:
    plain = certs.parse(controllerconfig(rv="7"))
    assert certs.needs_write(None, plain) and certs.needs_write("6", plain)
    assert not certs.needs_write("7", plain)
    rotating = certs.parse(controllerconfig(rv="7", annotations={certs.SERVICE_CA_ROTATE: "true"}))
    assert rotating.rotating and certs.needs_write("7", rotating)


def test_single_files_end_in_a_newline_as_upstream_writes_them() -> None:
    assert certs.with_newline(b"") == b"\n"
    assert certs.with_newline(b"x") == b"x\n"
    assert certs.with_newline(b"x\n") == b"x\n"


def test_empty_optional_data_is_accepted() -> None:
    got = certs.parse(controllerconfig())
    assert got.cloud_ca == b"" and got.pull_secret == b"" and dict(got.registry_cas) == {}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"kubeAPIServerServingCAData": "not base64!"}, "spec.kubeAPIServerServingCAData: not valid base64"),
        ({"kubeAPIServerServingCAData": ""}, "spec.kubeAPIServerServingCAData: empty"),
        ({"kubeAPIServerServingCAData": b64(b"hello")}, "no PEM certificate in it"),
        ({"kubeAPIServerServingCAData": b64(pem(1) + b"junk\n")}, "text outside the PEM blocks"),
        ({"kubeAPIServerServingCAData": b64(pem(1).replace(b"CERTIFICATE", b"PRIVATE KEY"))},
         "block 1 is not a CERTIFICATE"),
        ({"kubeAPIServerServingCAData": b64(pem(1).replace(b"MAMCAQE", b"M@MCAQE"))}, "not valid base64"),
        ({"kubeAPIServerServingCAData": b64(pem(1) + pem(2).replace(b"MAMCAQI", b"QUJD"))},
         "certificate 2 is not DER"),
        ({"cloudProviderCAData": b64(b"nope")}, "spec.cloudProviderCAData: no PEM certificate"),
        ({"internalRegistryPullSecret": b64(b"{nope")}, "spec.internalRegistryPullSecret: not JSON"),
        ({"internalRegistryPullSecret": b64(b"[]")}, "not a JSON object"),
        ({"imageRegistryBundleData": [{"file": "../../etc", "data": b64(pem(1))}]},
         "spec.imageRegistryBundleData[0].file: registry name ':/:/etc' is not a directory name"),
        ({"imageRegistryBundleUserData": [{"file": "", "data": b64(pem(1))}]}, "an empty registry name"),
        ({"imageRegistryBundleUserData": [{"file": "r", "data": b64(b"x")}]},
         "spec.imageRegistryBundleUserData[0].data (r): no PEM certificate"),
        ({"imageRegistryBundleData": "r"}, "spec.imageRegistryBundleData: not a list"),
    ],
)  # fmt: skip
def test_a_bad_controllerconfig_is_refused_whole(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(certs.BadControllerConfig) as info:
        certs.parse(controllerconfig(**spec))
    assert problem in str(info.value)
