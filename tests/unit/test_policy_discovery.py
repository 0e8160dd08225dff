"""Evictions and budgets in the policy version the server serves, found as `kubectl drain` finds it."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.kube.errors import ApiError
from mcd.kube.resources import Obj, Resources, eviction_version, served_version

CORE_V1_122 = {"resources": [{"name": "pods"}, {"name": "pods/eviction", "group": "policy", "version": "v1"}]}
CORE_V1_120 = {"resources": [{"name": "pods/eviction", "group": "policy", "version": "v1beta1"}]}
POLICY_120 = {"versions": [{"groupVersion": "policy/v1beta1", "version": "v1beta1"}]}
POLICY_121 = {"versions": [{"version": "v1"}, {"version": "v1beta1"}]}


def test_eviction_version_is_the_subresource_s() -> None:
    assert eviction_version(CORE_V1_122) == "v1"
    assert eviction_version(CORE_V1_120) == "v1beta1"
    assert eviction_version({"resources": [{"name": "pods/eviction", "group": "policy"}]}) == "v1"


def test_budgets_in_v1_only_where_the_group_serves_it() -> None:
    assert served_version(POLICY_120, "v1", "v1beta1") == "v1beta1"
    assert served_version(POLICY_121, "v1", "v1beta1") == "v1"


class _Fake(Resources):
    def __init__(self, answers: dict[str, Obj], fail: bool = False) -> None:
        self.answers, self.fail, self.sent = answers, fail, []  # type: ignore[var-annotated]

    def _request(self, method: str, path: str, *, writer: bool = False, **kwargs: Any) -> Obj:
        self.sent.append((method, path, kwargs.get("body")))
        if self.fail and path in ("/api/v1", "/apis/policy"):
            raise ApiError(0, "unreachable")
        return self.answers.get(path, {"items": []})


def test_an_old_server_gets_v1beta1_evictions_and_budgets_and_discovery_runs_once() -> None:
    api = _Fake({"/api/v1": CORE_V1_120, "/apis/policy": POLICY_120})
    api.evict_pod("ns", "web-1")
    api.evict_pod("ns", "web-2")
    api.list_pdbs()
    posts = [body for method, _, body in api.sent if method == "POST"]
    assert [b["apiVersion"] for b in posts] == ["policy/v1beta1", "policy/v1beta1"]
    assert ("GET", "/apis/policy/v1beta1/poddisruptionbudgets", None) in api.sent
    assert [p for _, p, _ in api.sent].count("/api/v1") == 1


@pytest.mark.parametrize("fail", [False, True])
def test_a_current_or_unknown_server_gets_v1(fail: bool) -> None:
    api = _Fake({"/api/v1": CORE_V1_122, "/apis/policy": POLICY_121}, fail=fail)
    api.evict_pod("ns", "web-1")
    assert [b["apiVersion"] for m, _, b in api.sent if m == "POST"] == ["policy/v1"]
