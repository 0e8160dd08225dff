"""`kubectl apply -k manifests/`: the image named once, and the monitoring objects
(`manifests/monitoring/`) consistent with the Service they scrape and the metrics mcd exports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from shipped import MANIFESTS, NAMESPACE, objects, one

from mcd.agent.report.metrics import Metrics

Obj = dict[str, Any]
IMAGE = "localhost/mcd"

kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def _kustomize(path: Path, home: Path) -> list[Obj]:
    proc = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _key(o: Obj) -> tuple[str, str, str]:
    return o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]


def _images(objs: list[Obj]) -> dict[str, str]:
    out = {}
    for o in objs:
        if o["kind"] in ("DaemonSet", "Deployment"):
            for c in o["spec"]["template"]["spec"]["containers"]:
                out[o["metadata"]["name"]] = c["image"]
    return out


def _pool_controller() -> list[Obj]:
    return [d for p in sorted((MANIFESTS / "pool-controller").glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if d]  # fmt: skip


@pytest.mark.allow_commands
@kubectl
def test_kustomize_builds_the_agent_and_the_pool_controller(tmp_path: Path) -> None:
    built = _kustomize(MANIFESTS, tmp_path)
    assert sorted(map(_key, built)) == sorted(map(_key, objects() + _pool_controller()))
    assert set(_images(built).values()) == {f"{IMAGE}:0.1.0"}


@pytest.mark.allow_commands
@kubectl
def test_one_image_override_renames_every_workload(tmp_path: Path) -> None:
    """An overlay's one `images:` entry moves the agent and the pool controller together."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(MANIFESTS, overlay)],
        "images": [{"name": IMAGE, "newName": "registry.example.com/mcd", "newTag": "9.9"}],
    }))  # fmt: skip
    images = _images(_kustomize(overlay, tmp_path))
    assert set(images) == {"machine-config-daemon", "machine-config-controller"}
    assert set(images.values()) == {"registry.example.com/mcd:9.9"}


def test_the_image_is_named_once_in_the_kustomization() -> None:
    text = (MANIFESTS / "Kustomization").read_text()
    doc = yaml.safe_load(text)
    assert [i["name"] for i in doc["images"]] == [IMAGE]
    # what -f applies (*.yaml) is what -k lists, besides the pool controller's
    listed = {r for r in doc["resources"] if "/" not in r}
    assert listed == {p.name for p in MANIFESTS.glob("*.yaml")}


# -- monitoring


def _monitoring() -> list[Obj]:
    doc = yaml.safe_load((MANIFESTS / "monitoring" / "Kustomization").read_text())
    return [
        d
        for r in doc["resources"]
        for d in yaml.safe_load_all((MANIFESTS / "monitoring" / r).read_text())
        if d
    ]


def test_the_servicemonitor_scrapes_the_agents_tls_port_with_a_token() -> None:
    [sm] = [o for o in _monitoring() if o["kind"] == "ServiceMonitor"]
    svc = one("Service", "machine-config-daemon")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    [endpoint] = sm["spec"]["endpoints"]
    [port] = [p for p in svc["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert port["port"] == 9001 and endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")


def test_prometheus_is_granted_what_the_agent_asks_of_a_scraper() -> None:
    """The permission the endpoint reviews (`mcd.agent.report.scrape`) is the one granted."""
    from mcd.agent.report.scrape import ScrapeAuth

    attrs = ScrapeAuth(api=None, node_name="n").attributes()  # type: ignore[arg-type]
    [role] = [o for o in _monitoring() if o["kind"] == "ClusterRole"]
    wanted = f"{attrs['resource']}/{attrs['subresource']}"
    assert any(wanted in r["resources"] and attrs["verb"] in r["verbs"] for r in role["rules"])


UPSTREAM_ALERTS = {
    # name: (expression, for, severity) as upstream's rules have them
    "MCDDrainError": ("mcd_drain_err > 0", None, "warning"),
    "MCDRebootError": ("mcd_reboots_failed_total > 0", "5m", "critical"),
    "MCDPivotError": ("mcd_pivot_errors_total > 0", "2m", "warning"),
    "KubeletHealthState": ("mcd_kubelet_state > 2", None, "warning"),
    "MCCDrainError": ("mcc_drain_err > 0", None, "warning"),
}


def test_the_alerts_are_upstreams_on_metrics_mcd_exports() -> None:
    [rule] = [o for o in _monitoring() if o["kind"] == "PrometheusRule"]
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == set(UPSTREAM_ALERTS)
    for name, (expr, wait, severity) in UPSTREAM_ALERTS.items():
        a = alerts[name]
        assert (a["expr"].strip(), a.get("for"), a["labels"]["severity"]) == (expr, wait, severity), name
    exported = {m.name for m in Metrics().registry.collect()} | {
        s.name for m in Metrics().registry.collect() for s in m.samples
    }
    for name, a in alerts.items():
        if name.startswith("MCD") or name == "KubeletHealthState":
            [metric] = re.findall(r"[a-z_]+(?= >)", a["expr"])
            assert metric in exported, (name, metric)
