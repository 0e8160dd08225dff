"""The pool controller's manifests (`manifests/pool-controller/`): kubectl takes them, they match
the API's schema, the CRDs are structural and agree with the resources the stand-in serves, and
the Deployment runs two leader-elected replicas of `mcd pool-controller`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from mcd_sim.apiserver.resources import RESOURCES
from shipped import NAMESPACE, REPO
from test_manifests import _group, _schema_errors, assert_kubectl_dry_run_creates, stub_kubeconfig  # noqa: F401 (a fixture)

Obj = dict[str, Any]
DIR = REPO / "manifests" / "pool-controller"


def controller_objects() -> list[Obj]:
    out: list[Obj] = []
    for path in sorted(DIR.glob("*.yaml")):
        out.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return out


@pytest.mark.allow_commands
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_client_dry_run_applies_them(stub_kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    assert_kubectl_dry_run_creates(stub_kubeconfig, tmp_path, DIR, controller_objects())


@pytest.mark.parametrize("obj", controller_objects(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_every_object_matches_the_api_schema(obj: Obj) -> None:
    model = "V1" + obj["kind"]
    assert list(_schema_errors(obj, model, obj["kind"])) == []
    getattr(kubernetes.client, model).from_dict(obj)


def _structural_errors(schema: Obj, path: str) -> list[str]:
    """What makes a CRD schema non-structural: a node with no type (but int-or-string), and
    properties or items under an open node."""
    errors = []
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        errors.append(f"{path}: no type")
    for name, sub in (schema.get("properties") or {}).items():
        errors += _structural_errors(sub, f"{path}.{name}")
    if "items" in schema:
        errors += _structural_errors(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        errors += _structural_errors(schema["additionalProperties"], f"{path}{{}}")
    return errors


def crds() -> list[Obj]:
    """The pool controller's CRD and the agent's (manifests/00-crds.yaml, which it uses too)."""
    agent = [d for d in yaml.safe_load_all((REPO / "manifests" / "00-crds.yaml").read_text()) if d]
    return [o for o in [*controller_objects(), *agent] if o["kind"] == "CustomResourceDefinition"]


@pytest.mark.parametrize("crd", crds(), ids=lambda o: o["metadata"]["name"])
def test_the_crds_are_structural_and_are_what_the_simulator_serves(crd: Obj) -> None:
    spec = crd["spec"]
    [version] = spec["versions"]
    assert _structural_errors(version["schema"]["openAPIV3Schema"], "") == []
    [rt] = [r for r in RESOURCES if r.group == spec["group"] and r.plural == spec["names"]["plural"]]
    assert crd["metadata"]["name"] == f"{rt.plural}.{rt.group}"
    assert (spec["names"]["kind"], spec["scope"], version["name"]) == (rt.kind, "Cluster", rt.version)
    # `mcn` is the simulator's own short name (upstream's CRD has none)
    sim_only = ("mcn",) if rt.kind == "MachineConfigNode" else ()
    assert tuple(spec["names"].get("shortNames", ())) == tuple(s for s in rt.short_names if s not in sim_only)
    assert ("status" in (version.get("subresources") or {})) == rt.status


def test_the_deployment_runs_two_leader_elected_replicas() -> None:
    [deploy] = [o for o in controller_objects() if o["kind"] == "Deployment"]
    assert deploy["metadata"]["namespace"] == NAMESPACE and deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert c["command"] == ["mcd"] and c["args"][0] == "pool-controller"
    assert pod["serviceAccountName"] == "machine-config-controller"
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]} == {
        "POD_NAMESPACE": "metadata.namespace"
    }
    from mcd.cli.parser import build_parser

    args = build_parser().parse_args(c["args"])  # the arguments are the CLI's
    assert args.command == "pool-controller"
