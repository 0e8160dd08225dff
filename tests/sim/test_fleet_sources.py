"""The pool's MachineConfigs before and after a simulated change (`--new`, or `--pool NAME PATH...`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mcd_sim.poolcontrollers import ROLE_LABEL
from mcd_sim.sources import changes

from mcd.config.findings import InputError

OLD = {"metadata": {"name": "rendered-worker-old"}, "spec": {"kernelArguments": ["a=1"]}}
NEW = {"metadata": {"name": "rendered-worker-new"}, "spec": {"kernelArguments": ["a=2"]}}


def mc(name: str, role: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {ROLE_LABEL: role}}, "spec": spec}  # fmt: skip


def test_without_admin_configs_new_replaces_the_base() -> None:
    before, after = changes("worker", OLD, NEW, ())
    [base] = before.sources
    assert base["metadata"] == {"name": "00-worker", "labels": {ROLE_LABEL: "worker"}}
    assert base["spec"] == OLD["spec"]
    assert before.rendered["metadata"]["name"].startswith("rendered-worker-")
    assert before.rendered["spec"]["kernelArguments"] == ["a=1"]
    [changed] = after.sources
    assert changed["metadata"]["name"] == "00-worker" and changed["spec"] == NEW["spec"]
    assert after.rendered["spec"]["kernelArguments"] == ["a=2"]
    assert after.rendered["metadata"]["name"] != before.rendered["metadata"]["name"]


def test_admin_configs_of_the_pool_join_the_base(tmp_path: Path) -> None:
    (tmp_path / "99-worker-a.yaml").write_text(yaml.safe_dump(mc("99-worker-a", "worker", fips=True)))
    both = [mc("99-master-b", "master"), mc("98-worker-c", "worker")]
    (tmp_path / "more.yaml").write_text(yaml.safe_dump_all(both))
    (tmp_path / "notes.txt").write_text("not a config")
    _, after = changes("worker", OLD, NEW, (str(tmp_path),))
    assert [s["metadata"]["name"] for s in after.sources] == ["00-worker", "99-worker-a", "98-worker-c"]
    # rendered as the pool controller renders them: OLD's base, then the admin's in name order
    assert after.rendered["spec"]["fips"] is True and after.rendered["spec"]["kernelArguments"] == ["a=1"]


def test_an_admin_config_of_the_base_name_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "00-worker.yaml"
    path.write_text(yaml.safe_dump(mc("00-worker", "worker", kernelArguments=["b=1"])))
    _, after = changes("worker", OLD, NEW, (str(path),))
    [only] = after.sources
    assert only["spec"] == {"kernelArguments": ["b=1"]}
    assert after.rendered["spec"]["kernelArguments"] == ["b=1"]


def test_a_config_render_refuses_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    refused_config = mc("99-worker-k", "worker", kernelType="realtime", extensions=["kernel-devel"])
    path.write_text(yaml.safe_dump(refused_config))
    with pytest.raises(InputError) as refused:
        changes("worker", OLD, NEW, (str(path),))
    assert str(refused.value).startswith(f"{path}: MachineConfig '99-worker-k': ")


def test_no_config_for_the_pool_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(mc("99-master-b", "master")))
    with pytest.raises(InputError) as refused:
        changes("worker", OLD, NEW, (str(path),))
    assert str(refused.value) == f"{path}: no MachineConfig labelled {ROLE_LABEL}: worker"
