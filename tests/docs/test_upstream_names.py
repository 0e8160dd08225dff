"""Every Event reason and metric name mcd emits is upstream's, or has its row in
docs/upstream-differences.md: a new one cannot slip in unexplained."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIFFERENCES = (REPO / "docs" / "upstream-differences.md").read_text()

# upstream's daemon (pkg/daemon; the behavioural spec, §12 and §11)
UPSTREAM_REASONS = {
    "AddSigtermProtection", "RemoveSigtermProtection", "BootResync", "ConfigDriftMonitorStarted",
    "ConfigDriftMonitorStopped", "Cordon", "Drain", "InClusterUpgrade", "NodeDone", "OSUpdateStarted",
    "OSUpgradeApplied", "OSUpgradeSkipped", "Reboot", "ServiceReload", "ServiceRestart", "SkipReboot",
    "Uncordon", "OSUpdateStaged", "ConfigDriftDetected", "FailedFinalization", "FailedServiceReload",
    "FailedServiceRestart", "FailedToDrain", "FailedToReconcile", "FailedToUncordon",
    "GotSigtermDuringUpdate", "OnDiskStateValidationFailed", "PreflightConfigDriftCheckFailed",
    # upstream's render and node controllers (pkg/controller), for `mcd pool-controller`
    "RenderedConfigGenerated", "SetDesiredConfig", "Updating", "Completed",
}  # fmt: skip
UPSTREAM_METRICS = {
    "mcd_host_os_and_version", "mcd_pivot_errors_total", "mcd_state", "mcd_kubelet_state",
    "mcd_reboots_failed_total", "mcd_update_state", "mcd_config_drift", "mcd_local_unsupported_packages",
}  # fmt: skip
# the recorder's calls, and the certificate writer's say-it-once wrapper of them
EVENT_CALLS = {"normal", "warning", "post_now", "_tell_once"}
METRIC_TYPES = {"Gauge", "Counter", "Histogram", "Summary", "GaugeMetricFamily", "CounterMetricFamily"}


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _emitted() -> tuple[dict[str, str], dict[str, str]]:
    """(reason -> where, metric -> where) over mcd/."""
    trees = {p: ast.parse(p.read_text()) for p in sorted((REPO / "mcd").rglob("*.py"))}
    every_constant: dict[str, str] = {}
    for tree in trees.values():
        every_constant.update(_constants(tree))
    reasons: dict[str, str] = {}
    metrics: dict[str, str] = {}
    for path, tree in trees.items():
        where = str(path.relative_to(REPO))
        local = {**every_constant, **_constants(tree)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func, first = node.func, node.args[0]
            name = ""
            if isinstance(func, ast.Attribute):
                name = func.attr
            elif isinstance(func, ast.Name):
                name = func.id
            value = None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                value = first.value
            elif isinstance(first, ast.Name):
                value = local.get(first.id)
            elif isinstance(first, ast.Attribute):
                value = every_constant.get(first.attr)
            if value is None:
                continue
            if name in EVENT_CALLS and re.fullmatch(r"[A-Z][A-Za-z]+", value):
                reasons.setdefault(value, where)
            elif name in METRIC_TYPES and value.startswith("mcd_"):
                # prometheus_client exposes a Counter under its name with `_total`
                if name in {"Counter", "CounterMetricFamily"} and not value.endswith("_total"):
                    value += "_total"
                metrics.setdefault(value, where)
    return reasons, metrics


REASONS, METRICS = _emitted()


def _explained(name: str) -> bool:
    return f"`{name}`" in DIFFERENCES


def test_the_scan_finds_upstreams_names() -> None:
    assert {"NodeDone", "ConfigDriftDetected", "OSUpdateStaged", "Reboot"} <= set(REASONS)
    assert {"mcd_state", "mcd_update_state", "mcd_config_drift"} <= set(METRICS)


@pytest.mark.parametrize("reason", sorted(set(REASONS) - UPSTREAM_REASONS))
def test_a_reason_of_mcds_own_has_a_row(reason: str) -> None:
    assert _explained(reason), f"{reason} ({REASONS[reason]}) is not upstream's and has no row"


@pytest.mark.parametrize("metric", sorted(set(METRICS) - UPSTREAM_METRICS))
def test_a_metric_of_mcds_own_has_a_row(metric: str) -> None:
    assert _explained(metric), f"{metric} ({METRICS[metric]}) is not upstream's and has no row"
