"""The shipped manifests (`manifests/`): kubectl takes them, they match the API's schema, and the
DaemonSet has upstream's shape.

`kubectl apply --dry-run=client` needs an API server even so: it maps each kind to a resource
through discovery and reads the live object to choose between create and patch (with no
kubeconfig it dials localhost:8080 and fails; `--validate=false` skips only the schema download).
Here it talks to a stub that serves kube-apiserver's discovery documents for the kinds the
manifests use and answers 404 to every object read. The schema check kubectl would make against
the server's OpenAPI document is made instead against the models of the official Python client:
every field must be one the API knows, of its type, and no required field may be missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from shipped import (
    NAMESPACE,
    REPO,
    SERVICE_ACCOUNT,
    agent_container,
    manifest_files,
    objects,
    one,
    optional_files,
)

Obj = dict[str, Any]

# kube-apiserver's discovery entries for the kinds the manifests use (name, kind, namespaced)
RESOURCES: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [("namespaces", "Namespace", False), ("serviceaccounts", "ServiceAccount", True),
           ("services", "Service", True)],
    "apps/v1": [("daemonsets", "DaemonSet", True), ("deployments", "Deployment", True)],
    "apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition", False)],
    "rbac.authorization.k8s.io/v1": [("clusterroles", "ClusterRole", False),
                                     ("clusterrolebindings", "ClusterRoleBinding", False),
                                     ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
}  # fmt: skip
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _discovery(path: str) -> Obj | None:
    if path == "/api":
        address = {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [address]}
    if path == "/apis":
        groups = [gv.split("/")[0] for gv in RESOURCES if "/" in gv]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in groups]}  # fmt: skip
    gv = path.removeprefix("/api/").removeprefix("/apis/")
    if gv in RESOURCES:
        resources = [
            {"name": name, "singularName": kind.lower(), "namespaced": ns, "kind": kind, "verbs": VERBS}
            for name, kind, ns in RESOURCES[gv]
        ]
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
    return None


class _Stub(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        body = _discovery(path)
        code = 200
        if body is None:  # an object read (or anything else): nothing exists here
            code = 404
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                    "code": 404, "message": f"{path} not found"}  # fmt: skip
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stub",
        "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "stub", "user": {}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
    }))  # fmt: skip
    yield kubeconfig
    server.shutdown()
    server.server_close()


@pytest.mark.allow_commands
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_client_dry_run_applies_every_manifest(stub_kubeconfig: Path, tmp_path: Path) -> None:
    assert_kubectl_dry_run_creates(stub_kubeconfig, tmp_path, REPO / "manifests", objects())


def assert_kubectl_dry_run_creates(kubeconfig: Path, home: Path, manifests: Path, objs: list[Obj]) -> None:
    """`kubectl apply --dry-run=client -f manifests` succeeds, silently, creating `objs` in order."""
    proc = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "--dry-run=client", "--validate=false",
         "-f", str(manifests)],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    expected = [
        f"{o['kind'].lower()}.{_group(o)}/{o['metadata']['name']} created (dry run)".replace("./", "/")
        for o in objs
    ]
    assert proc.stdout.splitlines() == expected


def _group(obj: Obj) -> str:
    api_version: str = obj["apiVersion"]
    return api_version.split("/", 1)[0] if "/" in api_version else ""


# -- the schema, from the official client's models

_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "bool": (bool,), "float": (int, float), "datetime": (str,), "date": (str,),
}  # fmt: skip


def _schema_errors(value: Any, type_name: str, path: str) -> Iterator[str]:
    if type_name == "object":
        return
    if m := _LIST.match(type_name):
        if not isinstance(value, list):
            yield f"{path}: expected a list, got {value!r}"
            return
        for i, item in enumerate(value):
            yield from _schema_errors(item, m[1], f"{path}[{i}]")
        return
    if m := _DICT.match(type_name):
        if not isinstance(value, dict):
            yield f"{path}: expected a map, got {value!r}"
            return
        for k, v in value.items():
            yield from _schema_errors(v, m[1], f"{path}.{k}")
        return
    if type_name in _PRIMITIVES:
        is_bool = isinstance(value, bool)
        if not isinstance(value, _PRIMITIVES[type_name]) or (is_bool and type_name != "bool"):
            yield f"{path}: expected {type_name}, got {value!r}"
        return
    model = getattr(kubernetes.client, type_name)
    if not isinstance(value, dict):
        yield f"{path}: expected a {type_name} object, got {value!r}"
        return
    by_key = {key: attr for attr, key in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_key:
            yield f"{path}.{key}: no such field in {type_name}"
            continue
        yield from _schema_errors(item, model.openapi_types[by_key[key]], f"{path}.{key}")


API_VERSIONS = ("v1", "apps/v1", "rbac.authorization.k8s.io/v1", "apiextensions.k8s.io/v1")


@pytest.mark.parametrize("path", manifest_files() + optional_files(), ids=lambda p: p.name)
def test_every_object_matches_the_api_schema(path: Path) -> None:
    import yaml

    for obj in yaml.safe_load_all(path.read_text()):
        model = "V1" + obj["kind"]
        assert obj["apiVersion"] in API_VERSIONS
        assert list(_schema_errors(obj, model, obj["kind"])) == []
        # the client's own (pydantic) checks: required fields, strict types
        getattr(kubernetes.client, model).from_dict(obj)


# -- the DaemonSet and its neighbours


def test_the_daemonset_has_upstreams_shape() -> None:
    ds = one("DaemonSet", "machine-config-daemon")
    pod = ds["spec"]["template"]["spec"]
    c = agent_container()
    assert ds["metadata"]["namespace"] == NAMESPACE
    assert pod["hostPID"] is True and pod["hostNetwork"] is True
    assert c["securityContext"] == {"privileged": True}
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["terminationGracePeriodSeconds"] == 600
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert volumes[mounts["/rootfs"]["name"]]["hostPath"] == {"path": "/"}
    assert mounts["/rootfs"]["mountPropagation"] == "HostToContainer"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env["NODE_NAME"] == "spec.nodeName"
    args = c["args"]
    assert args[:5] == ["start", "--root-mount", "/rootfs", "--node-name", "$(NODE_NAME)"]
    # every $(VAR) in the arguments is one the container's env defines (the kubelet leaves others as is)
    assert set(re.findall(r"\$\((\w+)\)", " ".join(args))) <= set(env)
    # plain metrics and the probes on the node's loopback (upstream's address); the probes
    # reach it there (hostNetwork)
    assert args[args.index("--metrics-url") + 1] == "127.0.0.1:8797"
    assert c["livenessProbe"]["httpGet"] == {"host": "127.0.0.1", "path": "/healthz", "port": 8797}
    assert c["readinessProbe"]["httpGet"] == {"host": "127.0.0.1", "path": "/readyz", "port": 8797}
    # the scrape endpoint: TLS on upstream's 9001, the named port the Service targets, with the
    # serving pair from the optional Secret proxy-tls that the Service's annotation asks for
    secure = args[args.index("--secure-metrics-url") + 1]
    [port] = [p for p in c["ports"] if p["name"] == "https"]
    assert secure == f"0.0.0.0:{port['containerPort']}" == "0.0.0.0:9001"
    tls_dir = str(Path(args[args.index("--tls-cert-file") + 1]).parent)
    assert str(Path(args[args.index("--tls-private-key-file") + 1]).parent) == tls_dir
    secret = volumes[mounts[tls_dir]["name"]]["secret"]
    assert secret["optional"] is True and mounts[tls_dir]["readOnly"] is True
    svc = one("Service", "machine-config-daemon")
    assert svc["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"] == (
        secret["secretName"]
    )
    # the image tag is the version being packaged (make image builds that tag)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert c["image"].endswith(f"/mcd:{version}")


def test_namespaced_objects_live_in_the_shipped_namespace_and_the_service_finds_the_pods() -> None:
    objs = objects()
    [ns] = [o for o in objs if o["kind"] == "Namespace"]
    assert ns["metadata"]["name"] == NAMESPACE
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for o in objs:
        if o["kind"] in ("ServiceAccount", "DaemonSet", "Service"):
            assert o["metadata"]["namespace"] == NAMESPACE, o["metadata"]["name"]
    svc = one("Service", "machine-config-daemon")
    labels = one("DaemonSet", "machine-config-daemon")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    [port] = svc["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in agent_container()["ports"]}
