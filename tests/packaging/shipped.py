"""The shipped Kubernetes manifests (`manifests/*.yaml`), read for the packaging tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
NAMESPACE = "openshift-machine-config-operator"
SERVICE_ACCOUNT = "machine-config-daemon"

Obj = dict[str, Any]


# applied apart, only where nodes have no kubelet kubeconfig (`kubectl apply -f manifests/`
# does not descend into it)
WITHOUT_KUBELET_KUBECONFIG = MANIFESTS / "without-kubelet-kubeconfig"


def manifest_files() -> list[Path]:
    return sorted(MANIFESTS.glob("*.yaml"))


def optional_files() -> list[Path]:
    return sorted(WITHOUT_KUBELET_KUBECONFIG.glob("*.yaml"))


def objects(*, without_kubelet_kubeconfig: bool = False) -> list[Obj]:
    """The shipped objects (and the optional ones for nodes without a kubelet kubeconfig)."""
    out: list[Obj] = []
    for path in manifest_files() + (optional_files() if without_kubelet_kubeconfig else []):
        out.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return out


def one(kind: str, name: str) -> Obj:
    [obj] = [o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def agent_container() -> Obj:
    ds = one("DaemonSet", "machine-config-daemon")
    containers = ds["spec"]["template"]["spec"]["containers"]
    [container] = [c for c in containers if c["name"] == "machine-config-daemon"]
    return container


def expand(arg: str, env: dict[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion of a container argument."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)
