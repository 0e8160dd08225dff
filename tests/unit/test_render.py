"""`mcd render`'s merge: upstream's MergeMachineConfigs and render controller tables, in our own
fixtures (helpers_test.go TestMergeMachineConfigs, TestSetDefaultFileOverwrite,
TestIgnitionMergeCompressed; render_controller_test.go). Pure: no I/O."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcd.render import (
    GENERATED_BY_ANNOTATION,
    OS_IMAGE_URL_OVERRIDDEN_ANNOTATION,
    RenderError,
    render_pool,
    source_refs,
)
from mcd.render.merge import merge, normalize

ROLE = "machineconfiguration.openshift.io/role"


def mc(
    name: str, role: str = "worker", ignition: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    if ignition is not None:
        spec["config"] = {"ignition": {"version": "3.5.0"}, **ignition}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: role}},
        "spec": spec,
    }


def file(path: str, source: str, **extra: Any) -> dict[str, Any]:
    return {"path": path, "contents": {"source": source, **extra.pop("contents", {})}, "mode": 420, **extra}


def files(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"storage": {"files": list(entries)}}


def spec_of(pool: str, *configs: dict[str, Any], os_image_url: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = render_pool(pool, configs, os_image_url=os_image_url)["spec"]
    return spec


def test_one_config_setting_fips_gets_every_default() -> None:
    assert spec_of("worker", mc("fips", fips=True), os_image_url="base") == {
        "osImageURL": "base",
        "baseOSExtensionsContainerImage": "",
        "config": {"ignition": {"version": "3.5.0"}},
        "kernelArguments": [],
        "extensions": [],
        "fips": True,
        "kernelType": "default",
    }


def test_every_field_merges_as_upstream() -> None:
    ssh_5678 = mc("ssh", ignition={"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678"]}]}})
    ssh_1234 = mc("ssh", ignition={"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["1234"]}]}})
    configs = [
        mc("osimageurl", osImageURL="overriddenURL"),
        mc("kargs", kernelArguments=["testKarg", "kargFromIgnitionDowngrade"]),
        mc("kerneltype", kernelType="realtime"),
        mc("extension", extensions=["usbguard"]),
        ssh_5678,
        mc("fips", fips=True),
        mc("passwd", ignition={"passwd": {"users": [{"name": "core", "passwordHash": "testpass"}]}}),
        ssh_1234,
        mc("v2", config={"ignition": {"version": "2.2.0"}}),
    ]
    spec = spec_of("worker", *configs, os_image_url="testURL")
    assert spec["osImageURL"] == "overriddenURL"
    assert spec["kernelArguments"] == ["testKarg", "kargFromIgnitionDowngrade"]
    assert spec["kernelType"] == "realtime"
    assert spec["fips"] is True
    assert spec["extensions"] == ["usbguard"]
    # two configs of one name keep their input order; the keys are merged, the hash kept
    assert spec["config"] == {
        "ignition": {"version": "3.5.0"},
        "passwd": {
            "users": [{"name": "core", "passwordHash": "testpass", "sshAuthorizedKeys": ["5678", "1234"]}]
        },
    }


def test_a_custom_pool_overrides_the_worker_configs_it_inherits() -> None:
    old, new = "data:,old", "data:,new"
    gzipped_old = "data:;base64,H4sIAAAAAAACA8vPSQEA5dRdPwMAAAA="
    configs = [
        mc("ccc", "infra", files(file("/etc/test2", new, user={"name": "root"}))),
        mc("aaa", "worker", files(file("/etc/test1", old, user={"name": "root"}))),
        mc("bbb", "worker", files(file("/etc/test1", new, user={"name": "root"}))),
        mc(
            "ddd",
            "worker",
            files(file("/etc/test2", gzipped_old, user={"name": "root"}, contents={"compression": "gzip"})),
        ),
    ]
    spec = spec_of("infra", *configs)
    assert spec["config"]["storage"]["files"] == [
        {
            "overwrite": True,
            "path": "/etc/test1",
            "user": {"name": "root"},
            "contents": {"source": new},
            "mode": 420,
        },
        {
            "overwrite": True,
            "path": "/etc/test2",
            "user": {"name": "root"},
            "contents": {"source": new},
            "mode": 420,
        },
    ]
    assert spec["osImageURL"] == ""


def test_a_file_without_overwrite_gets_true_and_false_is_kept() -> None:
    configs = [
        mc("overwrite", ignition=files(file("/etc/a", "data:,x"), file("/etc/b", "data:,x", overwrite=False)))
    ]
    merged = spec_of("worker", *configs)["config"]["storage"]["files"]
    assert [(f["path"], f["overwrite"]) for f in merged] == [("/etc/a", True), ("/etc/b", False)]


def test_a_later_plain_file_drops_the_earlier_compression() -> None:
    gzipped = file(
        "/etc/f", "data:;base64,H4sIAAAAAAACA8vPSQEA5dRdPwMAAAA=", contents={"compression": "gzip"}
    )
    configs = [
        mc("00-a", ignition=files(gzipped)),
        mc("01-b", ignition=files(file("/etc/f", "data:,hello%20world"))),
    ]
    (merged,) = spec_of("worker", *configs)["config"]["storage"]["files"]
    assert merged["contents"] == {"source": "data:,hello%20world"}


def test_the_last_os_image_url_of_a_user_config_wins_and_is_marked_overridden() -> None:
    configs = [
        mc("00-m", "master", osImageURL="dummy-test-1"),
        mc("00-m-0", "master", osImageURL="dummy-change"),
    ]
    rendered = render_pool("master", configs, os_image_url="base")
    assert rendered["spec"]["osImageURL"] == "dummy-change"
    assert rendered["metadata"]["annotations"][OS_IMAGE_URL_OVERRIDDEN_ANNOTATION] == "true"


def test_a_generated_config_does_not_override_the_os_image() -> None:
    generated = mc("00-gen", osImageURL="from-a-template")
    generated["metadata"]["annotations"] = {GENERATED_BY_ANNOTATION: "abc"}
    rendered = render_pool("worker", [generated], os_image_url="base")
    assert rendered["spec"]["osImageURL"] == "base"
    assert OS_IMAGE_URL_OVERRIDDEN_ANNOTATION not in rendered["metadata"]["annotations"]


def test_an_invalid_ignition_config_is_refused_with_its_config_and_path() -> None:
    bad = mc("05-extra", config={"ignition": {"version": ""}, "storage": {"files": [{"path": "/dummy/1"}]}})
    with pytest.raises(RenderError) as caught:
        render_pool("master", [mc("00-ok", ignition=files(file("/dummy/0", "data:,"))), bad])
    assert (caught.value.index, caught.value.name) == (1, "05-extra")
    assert caught.value.path[:2] == ("spec", "config")


def test_kernel_devel_needs_the_default_kernel() -> None:
    configs = [mc("00-rt", kernelType="realtime"), mc("10-devel", extensions=["kernel-devel"])]
    with pytest.raises(
        RenderError, match="kernel-devel extension is not supported with kernelType: realtime"
    ):
        render_pool("worker", configs)


def spec2(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "2.2.0"}, **sections}


def test_spec2_files_and_units_come_reversed_the_last_of_a_name_kept_with_the_others_dropins() -> None:
    files = [
        {"filesystem": "root", "path": p, "contents": {"source": f"data:,{n}"}}
        for n, p in enumerate(["/a", "/b", "/a"])
    ]
    config = spec2(
        storage={"files": files},
        systemd={"units": [
            {"name": "u.service", "dropins": [{"name": "1.conf", "contents": "[Unit]\n"}]},
            {"name": "v.service", "mask": True},
            {"name": "u.service", "dropins": [{"name": "2.conf", "contents": "[Service]\n"}]},
        ]},
    )  # fmt: skip
    ign = spec_of("worker", mc("00-v2", config=config))["config"]
    assert [(f["path"], f["contents"]["source"]) for f in ign["storage"]["files"]] == [
        ("/a", "data:,2"),
        ("/b", "data:,1"),
    ]
    assert [(u["name"], [d["name"] for d in u.get("dropins", ())]) for u in ign["systemd"]["units"]] == [
        ("u.service", ["2.conf", "1.conf"]),
        ("v.service", []),
    ]


def test_spec2_users_become_one_core_user_with_every_key_once() -> None:
    users = [
        {"name": "core", "sshAuthorizedKeys": ["k1", "k2"]},
        {"name": "core", "sshAuthorizedKeys": ["k3", "k1"]},
    ]
    ign = spec_of("worker", mc("00-v2", config=spec2(passwd={"users": users})))["config"]
    assert ign["passwd"] == {"users": [{"name": "core", "sshAuthorizedKeys": ["k3", "k1", "k2"]}]}
    other = [{"name": "core"}, {"name": "admin"}]
    with pytest.raises(RenderError) as caught:
        render_pool("worker", [mc("00-v2", config=spec2(passwd={"users": other}))])
    assert caught.value.path == ("spec", "config", "passwd", "users", 1, "name")
    assert caught.value.message == "unexpected user with name: admin. Only core user is supported"


def test_the_pool_s_source_lists_the_configs_in_merge_order() -> None:
    configs = [mc("00-infra", "infra"), mc("99-worker"), mc("10-worker")]
    assert [ref["name"] for ref in source_refs(configs)] == ["10-worker", "99-worker", "00-infra"]
    assert source_refs(configs)[0] == {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "name": "10-worker",
    }


def test_the_input_configs_are_left_as_they_were() -> None:
    gzipped = file(
        "/etc/f", "data:;base64,H4sIAAAAAAACA8vPSQEA5dRdPwMAAAA=", contents={"compression": "gzip"}
    )
    units = [{"name": "u.service", "dropins": [{"name": "1.conf", "contents": "[Unit]\n"}]}] * 2
    configs = [
        mc("00-a", ignition=files(gzipped)),
        mc("01-b", ignition=files(file("/etc/f", "data:,x"))),
        mc("02-c", config=spec2(systemd={"units": units}, passwd={"users": [{"name": "core"}] * 2})),
    ]
    before = copy.deepcopy(configs)
    render_pool("worker", configs)
    assert configs == before


# Ignition's merge rules, one by one (config/merge in coreos/ignition, on the spec 3.5 types)
def ign(**sections: Any) -> dict[str, Any]:
    return normalize({"ignition": {"version": "3.5.0"}, **sections})


def test_a_later_directory_replaces_an_earlier_file_of_its_path() -> None:
    parent = ign(storage={"files": [{"path": "/etc/d", "mode": 420}, {"path": "/etc/keep"}]})
    child = ign(storage={"directories": [{"path": "/etc/d", "mode": 493}]})
    assert merge(parent, child)["storage"] == {
        "directories": [{"path": "/etc/d", "mode": 493}],
        "files": [{"path": "/etc/keep"}],
    }


def test_fields_a_later_entry_leaves_unset_are_kept() -> None:
    hashed = {"source": "data:,a", "verification": {"hash": "sha512-x"}}
    parent = ign(storage={"files": [{"path": "/f", "mode": 384, "contents": hashed}]})
    child = ign(storage={"files": [{"path": "/f", "contents": {"source": "data:,b"}}]})
    (merged,) = merge(parent, child)["storage"]["files"]
    kept = {"source": "data:,b", "verification": {"hash": "sha512-x"}}
    assert merged == {"path": "/f", "contents": kept, "mode": 384}


def test_appends_are_concatenated_and_a_header_without_value_removes_one() -> None:
    headers = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    one = [{"source": "data:,1"}]
    parent = ign(storage={"files": [{"path": "/f", "append": one, "contents": {"httpHeaders": headers}}]})
    child = ign(
        storage={"files": [{"path": "/f", "append": one, "contents": {"httpHeaders": [{"name": "A"}]}}]}
    )
    (merged,) = merge(parent, child)["storage"]["files"]
    assert merged["append"] == one + one
    assert merged["contents"]["httpHeaders"] == [{"name": "B", "value": "2"}]


def test_kernel_arguments_move_between_should_and_should_not_exist() -> None:
    parent = ign(kernelArguments={"shouldExist": ["a", "b"], "shouldNotExist": ["c"]})
    child = ign(kernelArguments={"shouldExist": ["c"], "shouldNotExist": ["a"]})
    assert merge(parent, child)["kernelArguments"] == {"shouldExist": ["b", "c"], "shouldNotExist": ["a"]}


def test_units_and_dropins_merge_by_name_and_keys_by_value() -> None:
    unit = {"name": "u.service", "enabled": True, "dropins": [{"name": "1.conf", "contents": "x"}]}
    dropins = [{"name": "2.conf", "contents": "y"}, {"name": "1.conf", "contents": "z"}]
    parent = ign(
        systemd={"units": [unit]}, passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}]}
    )
    child = ign(
        systemd={"units": [{"name": "u.service", "dropins": dropins}]},
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k2", "k3"]}]},
    )
    merged = merge(parent, child)
    merged_dropins = [{"contents": "z", "name": "1.conf"}, {"contents": "y", "name": "2.conf"}]
    assert merged["systemd"]["units"] == [{"dropins": merged_dropins, "enabled": True, "name": "u.service"}]
    assert merged["passwd"]["users"][0]["sshAuthorizedKeys"] == ["k1", "k2", "k3"]
