"""Label and field selectors."""

from __future__ import annotations

import pytest
from mcd_sim.apiserver import ApiError
from mcd_sim.apiserver.selectors import field_selector, label_selector


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("role=worker", True),
        ("role==worker,zone!=b", True),
        ("role in (master, worker)", True),
        ("role notin (worker)", False),
        ("gpu", False),
        ("!gpu,zone", True),
        ("zone=b", False),
    ],
)
def test_label_selector(selector: str, expected: bool) -> None:
    assert label_selector(selector)({"role": "worker", "zone": "a"}) is expected


def test_field_selector_on_supported_fields() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "n1"}}
    assert field_selector("spec.nodeName=n1", ("spec.nodeName",))(pod)
    assert not field_selector("spec.nodeName=n1,metadata.name!=p", ("spec.nodeName",))(pod)
    with pytest.raises(ApiError) as err:
        field_selector("spec.bogus=x", ("spec.nodeName",))
    assert (err.value.code, err.value.message) == (400, "field label not supported: spec.bogus")
