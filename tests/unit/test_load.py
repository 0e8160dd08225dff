"""load_machineconfigs and friends: document shapes, syntax errors and MachineConfig fields, all located."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object

from mcd.config.findings import InputError, format_path
from mcd.config.load import load_machineconfig, load_machineconfigs, load_objects, parse_documents
from mcd.config.machineconfig import EMPTY_MC_NAME, empty_machineconfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def as_json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def input_error(data: bytes, source: str = "f.yaml") -> list[tuple[str, str]]:
    with pytest.raises(InputError) as info:
        load_machineconfigs(data, source)
    assert info.value.source == source
    return [(format_path(f.path), f.message) for f in info.value.findings]


# ---------------------------------------------------------------- document shapes


def test_json_machineconfig() -> None:
    [mc] = load_machineconfigs(as_json(mc_object("a", files=[ign_file("/etc/a", "x")])), "a.json")
    assert mc.name == "a"
    assert mc.config is not None
    assert mc.config.files[0].data == b"x"
    assert mc.ignition_path == ("spec", "config")


def test_yaml_machineconfig_fixture() -> None:
    [mc] = load_machineconfigs((FIXTURES / "valid-mc.yaml").read_bytes(), "valid-mc.yaml")
    assert mc.name == "rendered-worker-1"
    assert mc.kernel_arguments == ("nosmt",)
    assert mc.os_image_url.startswith("quay.io/example/rhcos@sha256:")
    assert mc.config is not None
    assert [f.path for f in mc.config.files] == [
        "/etc/motd",
        "/etc/containers/policy.json",
        "/etc/foo",
        "/usr/local/bin/hello.sh",
    ]
    assert mc.config.files[3].mode == 0o755
    assert mc.config.units[0].dropins[0].name == "10-env.conf"
    assert mc.located_findings() == []


def test_utf8_bom_is_accepted() -> None:
    [mc] = load_machineconfigs(b"\xef\xbb\xbf" + as_json(mc_object("bom")), "x")
    assert mc.name == "bom"


def test_bare_ignition_is_named_after_the_file() -> None:
    [mc] = load_machineconfigs((FIXTURES / "ignition-bare.json").read_bytes(), "/some/dir/ignition-bare.json")
    assert mc.name == "ignition-bare.json"
    assert mc.ignition_path == ()
    assert mc.config is not None
    assert mc.config.files[0].data == b"hello world\n"


def test_bare_ignition_from_stdin() -> None:
    [mc] = load_machineconfigs(b'{"ignition": {"version": "3.5.0"}}', "-")
    assert mc.name == "stdin"


def test_list_of_machineconfigs() -> None:
    mcs = load_machineconfigs((FIXTURES / "mc-list.yaml").read_bytes(), "mc-list.yaml")
    assert [m.name for m in mcs] == ["99-worker-motd", "99-worker-kargs"]
    assert [m.ignition_path for m in mcs] == [("items", 0, "spec", "config"), ("items", 1, "spec", "config")]
    # a MachineConfig without Ignition is valid (kernel arguments only)
    assert mcs[1].config is not None
    assert mcs[1].kernel_arguments == ("hugepages=1",)


def test_machineconfiglist_kind_and_nested_lists() -> None:
    inner = {"kind": "List", "items": [mc_object("b")]}
    doc = {"kind": "MachineConfigList", "items": [mc_object("a"), inner]}
    mcs = load_machineconfigs(as_json(doc), "x")
    assert [m.name for m in mcs] == ["a", "b"]
    assert mcs[1].ignition_path == ("items", 1, "items", 0, "spec", "config")


def test_template_objects() -> None:
    mcs = load_machineconfigs((FIXTURES / "template-spec32-unused-key.yaml").read_bytes(), "t.yaml")
    [mc] = mcs
    assert mc.name == "${NAME}"
    assert mc.ignition_path == ("objects", 0, "spec", "config")
    assert mc.config is not None
    # YAML 1.1 reads 0644 as octal
    assert mc.config.files[0].mode == 0o644
    [warning] = mc.located_findings()
    assert warning.severity == "warning"
    assert format_path(warning.path) == "objects[0].spec.config.storage.files[0].filesystem"


def test_multi_document_yaml() -> None:
    mcs = load_machineconfigs((FIXTURES / "multi-doc.yaml").read_bytes(), "m.yaml")
    assert [m.name for m in mcs] == ["99-first", "99-second"]
    assert mcs[1].ignition_path == ("<document 1>", "spec", "config")


def test_empty_yaml_documents_are_skipped() -> None:
    data = b"---\n---\n" + json.dumps(mc_object("only")).encode() + b"\n---\n"
    assert [m.name for m in load_machineconfigs(data, "x")] == ["only"]


def test_spec2_fixture_loads_and_translates() -> None:
    [mc] = load_machineconfigs((FIXTURES / "spec2-test-config.yaml").read_bytes(), "spec2.yaml")
    assert [f for f in mc.located_findings() if f.severity == "error"] == []
    cfg = mc.config
    assert cfg is not None
    assert mc.kernel_arguments == ("foo=bar", "nosmt")
    assert [f.path for f in cfg.files] == ["/etc/coreos/update.conf"]
    assert cfg.files[0].data == b"GROUP=stable\nSERVER=http://localhost:32003/v1/update\n"
    names = [u.name for u in cfg.units]
    assert names[0] == "docker.service"
    assert "locksmith.service" in names
    assert cfg.units[0].dropins[0].name == "10-dockeropts.conf"
    assert next(u for u in cfg.units if u.name == "locksmith.service").mask is True


# ---------------------------------------------------------------- Ignition problems are not input errors


def test_invalid_ignition_is_kept_for_the_reconciler() -> None:
    [mc] = load_machineconfigs(as_json(mc_object("bad", files=[ign_file("rel")])), "x")
    assert mc.config is None
    assert mc.ignition.stage == "validate"
    [finding] = mc.located_findings()
    assert format_path(finding.path) == "spec.config.storage.files[0].path"


def test_unsupported_version_is_kept_for_the_reconciler() -> None:
    [mc] = load_machineconfigs(as_json(mc_object("v4", ignition={"ignition": {"version": "4.0.0"}})), "x")
    assert mc.config is None
    assert mc.ignition.stage == "parse"


@pytest.mark.parametrize("config", [None, {}])
def test_machineconfig_without_ignition_is_empty(config: Any) -> None:
    obj = mc_object("k")
    obj["spec"]["config"] = config
    [mc] = load_machineconfigs(as_json(obj), "x")
    assert mc.config is not None
    assert mc.config.files == ()


# ---------------------------------------------------------------- syntax errors


def test_bad_json() -> None:
    [(path, message)] = input_error(b'{"kind": "MachineConfig", "spec": {', "bad.json")
    assert path == "$"
    assert message.startswith("invalid JSON: ")


def test_bad_yaml_says_where() -> None:
    [(path, message)] = input_error(b"kind: MachineConfig\nspec:\n  config: [unclosed\n  other: 1\n")
    assert path == "$"
    assert message.startswith("invalid YAML: ")
    assert " at line " in message
    assert ", column " in message


@pytest.mark.parametrize("data", [b"", b"   \n\t", b"---\n", b"# only a comment\n"])
def test_empty_input(data: bytes) -> None:
    assert input_error(data) == [("$", "empty document")]


def test_not_utf8() -> None:
    [(path, message)] = input_error(b"kind: \xff\xfe\n")
    assert path == "$"
    assert message.startswith("not UTF-8 text: ")


def test_yaml_values_json_cannot_hold_are_located() -> None:
    data = b"kind: MachineConfig\nmetadata:\n  name: x\n  created: 2024-01-01\n"
    assert input_error(data) == [("metadata.created", "unsupported YAML value of type date")]


def test_yaml_non_string_keys_are_refused() -> None:
    data = b"kind: MachineConfig\nspec:\n  1: one\n"
    assert input_error(data) == [("spec", "object key 1 is not a string")]


def test_yaml_nan_is_refused() -> None:
    data = (
        b"kind: MachineConfig\nspec:\n  config:\n    ignition: {version: 3.5.0}\n"
        b"    storage: {files: [{path: /a, mode: .nan}]}\n"
    )
    assert input_error(data) == [("spec.config.storage.files[0].mode", "NaN is not a valid value")]


# ---------------------------------------------------------------- wrong objects and fields


def test_top_level_array() -> None:
    assert input_error(b"[1, 2]") == [("$", "expected an object, got list")]


def test_unknown_kind() -> None:
    assert input_error(as_json({"kind": "ConfigMap", "data": {}})) == [
        ("$", "expected a MachineConfig or an Ignition config, got kind 'ConfigMap'")
    ]


def test_object_without_kind_or_ignition() -> None:
    assert input_error(as_json({"spec": {}})) == [
        (
            "$",
            "expected a MachineConfig or an Ignition config, got an object without kind or ignition.version",
        )
    ]


def test_wrong_api_version() -> None:
    obj = mc_object("a")
    obj["apiVersion"] = "v1"
    assert input_error(as_json(obj)) == [("apiVersion", "unexpected apiVersion 'v1'")]


def test_list_items_not_a_list() -> None:
    assert input_error(as_json({"kind": "List", "items": {"a": 1}})) == [("items", "expected a list")]


def test_empty_list_has_no_machineconfig() -> None:
    assert input_error(as_json({"kind": "List", "items": []})) == [("$", "no MachineConfig found")]


def test_errors_in_list_items_are_located_under_the_item() -> None:
    obj = mc_object("b", fips="yes")
    assert input_error(as_json({"kind": "List", "items": [mc_object("a"), obj]})) == [
        ("items[1].spec.fips", "expected a boolean")
    ]


def test_spec_not_an_object() -> None:
    obj = mc_object("a")
    obj["spec"] = ["x"]
    assert input_error(as_json(obj)) == [("spec", "expected an object")]


def test_every_spec_field_problem_is_reported() -> None:
    obj = mc_object("a", osImageURL=5, kernelArguments=["a=1", 2], extensions="usbguard", fips="true")
    obj["metadata"]["annotations"] = {"x": 1}
    found = input_error(as_json(obj))
    assert sorted(found) == sorted(
        [
            ("metadata.annotations", "expected an object of strings"),
            ("spec.osImageURL", "expected a string, got int"),
            ("spec.kernelArguments[1]", "expected a string"),
            ("spec.extensions", "expected a list of strings"),
            ("spec.fips", "expected a boolean"),
        ]
    )


def test_metadata_problems() -> None:
    obj = mc_object("a")
    obj["metadata"] = "name"
    assert input_error(as_json(obj)) == [("metadata", "expected an object")]
    obj["metadata"] = {"name": 3}
    assert input_error(as_json(obj)) == [("metadata.name", "expected a string")]


def test_spec_fields() -> None:
    obj = mc_object(
        "a",
        osImageURL="quay.io/x@sha256:abc",
        kernelArguments=["a=1 b", "c"],
        kernelType="realtime",
        extensions=["usbguard"],
        fips=True,
        baseOSExtensionsContainerImage="quay.io/ext",
    )
    obj["metadata"]["annotations"] = {"machineconfiguration.openshift.io/ocl-osimageurl": "quay.io/ocl"}
    mc = load_machineconfig(as_json(obj), "x")
    assert mc.os_image_url == "quay.io/x@sha256:abc"
    assert mc.kernel_arguments == ("a=1 b", "c")
    assert (mc.kernel_type, mc.extensions, mc.fips) == ("realtime", ("usbguard",), True)
    assert mc.base_os_extensions_container_image == "quay.io/ext"
    assert mc.ocl_image == "quay.io/ocl"


def test_null_spec_fields_are_defaults() -> None:
    mc = load_machineconfig(as_json(mc_object("a", osImageURL=None, kernelArguments=None, fips=None)), "x")
    assert (mc.os_image_url, mc.kernel_arguments, mc.fips) == ("", (), False)


# ---------------------------------------------------------------- single config, other objects


def test_load_machineconfig_wants_exactly_one() -> None:
    with pytest.raises(InputError) as info:
        load_machineconfig((FIXTURES / "mc-list.yaml").read_bytes(), "mc-list.yaml")
    assert info.value.lines() == ["mc-list.yaml: expected one MachineConfig, found 2"]


def test_load_objects_keeps_other_kinds() -> None:
    [(path, obj)] = load_objects((FIXTURES / "policy-rebootless-foo.yaml").read_bytes(), "p.yaml")
    assert path == ()
    assert obj["kind"] == "MachineConfiguration"


def test_parse_documents_json_fast_path_and_yaml() -> None:
    assert parse_documents(b'{"a": 1}', "x") == [((), {"a": 1})]
    assert parse_documents(b"a: 1\n---\nb: 2\n", "x") == [
        (("<document 0>",), {"a": 1}),
        (("<document 1>",), {"b": 2}),
    ]


@pytest.mark.parametrize(
    "data",
    [b'{"a": 1,}', b'  \n{"a": 1}  # comment', b"{a: 1}", b'{"a": 1}\n---\n{"b": 2}', b"{'a': 1}"],
)
def test_a_document_starting_with_a_brace_is_strict_json(data: bytes) -> None:
    # as kubectl: YAML would take each of these (a flow mapping), JSON does not
    with pytest.raises(InputError) as info:
        parse_documents(data, "x.json")
    [line] = info.value.lines()
    assert line.startswith("x.json: invalid JSON: ")


def test_a_stream_of_json_objects_is_several_documents() -> None:
    assert parse_documents(b'{"a": 1}\n{"b": 2} ', "x") == [
        (("<document 0>",), {"a": 1}),
        (("<document 1>",), {"b": 2}),
    ]


def test_a_document_starting_with_a_bracket_may_be_yaml() -> None:
    # kubectl looks for a brace only; a YAML flow sequence still loads (and is then refused as no object)
    assert parse_documents(b"[1, 2,]", "x") == [((), [1, 2])]


def test_empty_machineconfig() -> None:
    mc = empty_machineconfig()
    assert mc.name == EMPTY_MC_NAME == "mco-empty-mc"
    assert mc.config is not None
    assert mc.config.files == ()


# ---------------------------------------------------------------- the text kept for the update record


def test_a_json_machineconfig_keeps_its_text_as_read() -> None:
    """The update record is written from the text read (no second encoding of megabytes): only
    for one JSON document that is the MachineConfig itself, the byte-order mark left out."""
    text = json.dumps(mc_object("a", files=[ign_file("/etc/a", "x")]), indent=3).encode()
    mc = load_machineconfig(b"\xef\xbb\xbf  " + text, "a.json")
    assert mc.source_text == b"  " + text
    assert json.loads(mc.source_text) == mc.raw


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(b"kind: MachineConfig\nmetadata: {name: a}\nspec: {}\n", id="yaml"),
        pytest.param(as_json({"kind": "List", "items": [mc_object("a")]}), id="list"),
        pytest.param(as_json({"ignition": {"version": "3.2.0"}}), id="bare-ignition"),
    ],
)
def test_no_text_is_kept_unless_the_document_is_the_json_machineconfig(document: bytes) -> None:
    assert load_machineconfig(document, "a.json").source_text is None


def test_a_config_given_another_raw_object_has_no_text() -> None:
    mc = load_machineconfig(as_json(mc_object("a")), "a.json")
    assert mc.source_text is not None
    assert dataclasses.replace(mc, raw={"kind": "MachineConfig"}).source_text is None
