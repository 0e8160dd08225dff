"""`mcd render PATH... --pool NAME` and `mcd plan --pool NAME OLD NEW`: reading files and
directories, selecting the pool's configs, one-line errors naming file and JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import Run

from mcd.config.selector import SELECTING_ALL
from mcd.render import render_pool

ROLE = "machineconfiguration.openshift.io/role"


def mc(name: str, role: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: role}},
        "spec": spec,
    }


def motd(text: str) -> dict[str, Any]:
    files = [{"path": "/etc/motd", "mode": 420, "contents": {"source": f"data:,{text}"}}]
    return {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}


def write_yaml(path: Path, *docs: object) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    """A directory as an admin keeps one: several files, several pools, other kinds of objects."""
    d = tmp_path / "machineconfigs"
    d.mkdir()
    write_yaml(d / "00-worker.yaml", mc("00-worker", "worker", config=motd("hello")))
    write_yaml(d / "99-kargs.yml", mc("99-worker-kargs", "worker", kernelArguments=["nosmt"]),
               mc("99-master-fips", "master", fips=True))  # fmt: skip
    pool = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool", "metadata": {}}
    (d / "pool.json").write_text(json.dumps(pool))
    (d / "README.md").write_text("not a config\n")
    return d


def test_a_directory_renders_the_pool_s_configs_only(run: Run, pool_dir: Path) -> None:
    code, out, err = run("render", str(pool_dir), "--pool", "worker", "-o", "json")
    assert (code, err) == (0, "")
    rendered = json.loads(out)
    configs = [
        mc("00-worker", "worker", config=motd("hello")),
        mc("99-worker-kargs", "worker", kernelArguments=["nosmt"]),
    ]
    assert rendered == render_pool("worker", configs)
    assert rendered["spec"]["kernelArguments"] == ["nosmt"] and rendered["spec"]["fips"] is False


def test_files_give_the_same_config_as_their_directory(
    run: Run, pool_dir: Path
) -> None:
    _, from_dir, _ = run("render", "-o", "yaml", str(pool_dir), "--pool", "worker")
    files = [str(pool_dir / "99-kargs.yml"), str(pool_dir / "00-worker.yaml")]
    code, from_files, _ = run("render", "-o", "yaml", *files, "--pool", "worker")
    assert code == 0 and from_files == from_dir
    assert yaml.safe_load(from_dir)["metadata"]["name"].startswith("rendered-worker-")


def test_the_os_image_comes_from_the_flag_or_a_controllerconfig(run: Run, pool_dir: Path) -> None:
    cc = {"kind": "ControllerConfig", "metadata": {"name": "machine-config-controller"},
          "spec": {"baseOSContainerImage": "quay.io/os@sha256:1"}}  # fmt: skip
    (pool_dir / "controllerconfig.json").write_text(json.dumps(cc))
    _, out, _ = run("render", str(pool_dir), "--pool", "worker", "-o", "json")
    assert json.loads(out)["spec"]["osImageURL"] == "quay.io/os@sha256:1"
    _, out, _ = run(
        "render", str(pool_dir), "--pool", "worker", "-o", "json", "--os-image-url", "quay.io/os:x"
    )
    assert json.loads(out)["spec"]["osImageURL"] == "quay.io/os:x"


def test_bad_input_is_one_line_naming_the_file_and_json_path(run: Run, tmp_path: Path) -> None:
    bad = mc(
        "10-bad",
        "worker",
        config={"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "etc/x"}]}},
    )
    path = write_yaml(tmp_path / "bad.yaml", mc("00-ok", "worker", fips=True), bad)
    code, out, err = run("render", "-o", "yaml", str(path), "--pool", "worker")
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}: <document 1>.spec.config.storage.files[0].path: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_invalid_kernel_type_is_named(run: Run, tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "kt.yaml", mc("00-kt", "worker", kernelType="fast"))
    code, _, err = run("render", "-o", "yaml", str(path), "--pool", "worker")
    assert (code, err) == (1, f"{path}: spec.kernelType: kernelType=fast is invalid\n")


def test_a_pool_without_configs_and_a_name_given_twice_are_refused(
    run: Run, pool_dir: Path, tmp_path: Path
) -> None:
    code, _, err = run("render", "-o", "yaml", str(pool_dir), "--pool", "infra")
    assert (code, err) == (1, f"{pool_dir}: no MachineConfig labelled {ROLE}: infra\n")
    again = write_yaml(tmp_path / "again.yaml", mc("00-worker", "worker", fips=True))
    code, _, err = run("render", "-o", "yaml", str(pool_dir), str(again), "--pool", "worker")
    assert code == 1
    first = pool_dir / "00-worker.yaml"
    assert err == f"{again}: metadata.name: MachineConfig '00-worker' is also defined in {first}\n"


def test_a_directory_without_configs_and_a_bad_pool_name_are_refused(run: Run, tmp_path: Path) -> None:
    code, _, err = run("render", "-o", "yaml", str(tmp_path), "--pool", "worker")
    assert (code, err) == (1, f"{tmp_path}: no *.yaml, *.yml or *.json file in this directory\n")
    with pytest.raises(SystemExit) as exited:
        run("render", "-o", "yaml", str(tmp_path), "--pool", "Worker Pool")
    assert exited.value.code == 1


def test_plan_renders_the_admin_s_configs_before_planning(run: Run, pool_dir: Path, tmp_path: Path) -> None:
    after = tmp_path / "after"
    after.mkdir()
    for f in pool_dir.iterdir():
        (after / f.name).write_bytes(f.read_bytes())
    write_yaml(after / "00-worker.yaml", mc("00-worker", "worker", config=motd("bye")))
    code, out, err = run("plan", "-o", "json", "--pool", "worker", str(pool_dir), str(after))
    assert (code, err) == (0, "")
    doc = json.loads(out)
    _, before_yaml, _ = run("render", "-o", "yaml", str(pool_dir), "--pool", "worker")
    _, after_yaml, _ = run("render", "-o", "yaml", str(after), "--pool", "worker")
    names = [yaml.safe_load(text)["metadata"]["name"] for text in (before_yaml, after_yaml)]
    assert [doc["old"], doc["new"]] == names
    assert [(c["kind"], c["name"], c["change"]) for c in doc["changes"]] == [
        ("file", "/etc/motd", "modified")
    ]


def test_plan_from_nothing_to_a_pool(run: Run, pool_dir: Path) -> None:
    code, out, _ = run("plan", "-o", "json", "--pool", "worker", "-", str(pool_dir))
    assert code == 0
    assert json.loads(out)["old"] == "mco-empty-mc"


def test_a_custom_pool_selects_its_roles_and_its_own_configs_win(run: Run, pool_dir: Path) -> None:
    write_yaml(pool_dir / "00-infra.yaml", mc("00-aaa-infra", "infra", config=motd("infra")))
    code, out, _ = run(
        "render", str(pool_dir), "--pool", "infra", "--role", "worker", "--role", "infra", "-o", "json"
    )
    assert code == 0
    rendered = json.loads(out)
    assert rendered["metadata"]["name"].startswith("rendered-infra-")
    # 00-aaa-infra sorts before 00-worker by name, yet the worker configs come first: infra wins
    (motd_file,) = rendered["spec"]["config"]["storage"]["files"]
    assert motd_file["contents"]["source"] == "data:,infra"
    _, only_infra, _ = run("render", str(pool_dir), "--pool", "infra", "-o", "json")
    assert json.loads(only_infra)["spec"]["kernelArguments"] == []


def test_plan_on_a_root_does_not_render(run: Run, pool_dir: Path, tmp_path: Path) -> None:
    code, out, err = run("plan", "--root-mount", str(tmp_path), "--pool", "worker", str(pool_dir))
    assert (code, out) == (1, "")
    assert err == "mcd plan: --pool renders OLD and NEW from MachineConfigs: not with --root-mount\n"


# what upstream's own code names these configs (see tests/unit/test_render_names.py)
EXAMPLE_NAMES = {
    "worker": "rendered-worker-e36f457de82eda29bea4f4c8750bc8fe",
    "master": "rendered-master-6f795e979b665b4685c7fb9fb60c568a",
}


@pytest.mark.parametrize("pool", sorted(EXAMPLE_NAMES))
def test_the_example_pool_renders_to_upstream_s_name(run: Run, pool: str) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "pool"
    code, out, _ = run("render", str(examples), "--pool", pool, "-o", "json")
    assert code == 0
    assert json.loads(out)["metadata"]["name"] == EXAMPLE_NAMES[pool]
    usage = (examples.parents[1] / "docs" / "usage.md").read_text()
    assert EXAMPLE_NAMES["worker"] in usage


def test_a_cluster_export_renders_what_the_pool_targets(run: Run, tmp_path: Path) -> None:
    template = mc("00-worker", "worker", config=motd("template"), osImageURL="quay.io/os@sha256:old")
    template["metadata"]["annotations"] = {
        "machineconfiguration.openshift.io/generated-by-controller-version": "abc"
    }
    user = mc("99-worker-kargs", "worker", kernelArguments=["nosmt"])
    rendered = render_pool("worker", [template, user], os_image_url="quay.io/os@sha256:cluster")
    cc = {"kind": "ControllerConfig", "metadata": {"name": "machine-config-controller"},
          "spec": {"baseOSContainerImage": "quay.io/os@sha256:cluster"}}  # fmt: skip
    export = {"apiVersion": "v1", "kind": "List", "items": [template, user, rendered, cc]}
    path = write_yaml(tmp_path / "cluster.yaml", export)
    code, out, _ = run("render", str(path), "--pool", "worker", "-o", "json")
    assert code == 0
    again = json.loads(out)
    assert again == rendered
    assert again["spec"]["osImageURL"] == "quay.io/os@sha256:cluster"


def test_a_machineconfigpool_among_the_inputs_selects_its_configs(run: Run, pool_dir: Path) -> None:
    write_yaml(pool_dir / "00-infra.yaml", mc("00-aaa-infra", "infra", config=motd("infra")))
    selector = {"matchExpressions": [{"key": ROLE, "operator": "In", "values": ["worker", "infra"]}]}
    infra: dict[str, Any] = {
        "kind": "MachineConfigPool",
        "metadata": {"name": "infra"},
        "spec": {"machineConfigSelector": selector},
    }
    (pool_dir / "infra-pool.json").write_text(json.dumps(infra))
    _, by_pool, _ = run("render", str(pool_dir), "--pool", "infra", "-o", "json")
    _, by_roles, _ = run(
        "render", str(pool_dir), "--pool", "infra", "--role", "worker", "--role", "infra", "-o", "json"
    )
    assert json.loads(by_pool) == json.loads(by_roles)
    infra["spec"]["machineConfigSelector"] = {}
    (pool_dir / "infra-pool.json").write_text(json.dumps(infra))
    code, _, err = run("render", "-o", "yaml", str(pool_dir), "--pool", "infra")
    assert code == 1
    where = f"{pool_dir / 'infra-pool.json'}: spec.machineConfigSelector"
    assert err == f"{where}: {SELECTING_ALL}\n"
