"""Property tests: whatever the input, the config layer answers with located findings or InputError.

Also the regressions these properties (and hand-made extremes) found: deep nesting and YAML aliases.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcd.config.findings import Finding, InputError
from mcd.config.ignition import IgnitionResult, parse_ignition
from mcd.config.load import load_machineconfigs
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.planner.plan import plan

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def maybe_wrong(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, sometimes any JSON value (wrong types)."""
    return st.one_of(good, good, good, json_values)


versions = st.sampled_from(
    ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "2.2.0", "4.0.0", "3.5", "", "x"]
)
modes = st.one_of(
    st.sampled_from([420, 0o644, 0o755, 0o600, 0, 0o777, 0o1777, 0o4755, 1023, 512]),
    st.integers(min_value=-5, max_value=0o100000),
)
paths = st.one_of(
    st.sampled_from(
        [
            "/etc/a",
            "/etc/a",
            "/etc/b",
            "etc/a",
            "/etc/../a",
            "/",
            "//x",
            "/etc/a/",
            "",
            "/run/machine-config-daemon-force",
            "/etc/containers/registries.conf",
            "/etc/containers/policy.json",
        ]
    ),
    st.text(max_size=12).map(lambda s: "/" + s),
)
sources = st.one_of(
    st.sampled_from(
        [
            "data:,x",
            "data:,hello%20world%0A",
            "data:;base64,aGk=",
            "data:;base64,!!",
            "data:;base64,aGk",
            "data:text/plain;charset=utf-8;base64,H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA==",
            "data:text/plain,hi%2",
            "data:",
            "data:,",
            "https://example.com/x",
            "s3://bucket/key",
            "file:///etc/x",
            "",
            "gs://b/o",
            "data:;base64,H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA==",
        ]
    ),
    st.text(max_size=20),
    st.text(max_size=20).map(lambda s: "data:," + s),
)
hashes = st.sampled_from(
    [
        "sha512-" + hashlib.sha512(b"x").hexdigest(),
        "sha256-" + hashlib.sha256(b"hi").hexdigest(),
        "sha512-00",
        "md5-abc",
        "sha512",
        "",
    ]
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "source": maybe_wrong(sources),
        "compression": maybe_wrong(st.sampled_from(["gzip", "", "xz"])),
        "verification": maybe_wrong(st.fixed_dictionaries({}, optional={"hash": maybe_wrong(hashes)})),
    },
)
node_refs = st.fixed_dictionaries(
    {},
    optional={
        "id": maybe_wrong(st.integers(0, 70000)),
        "name": maybe_wrong(st.sampled_from(["root", "core", ""])),
    },
)
files = st.fixed_dictionaries(
    {"path": maybe_wrong(paths)},
    optional={
        "mode": maybe_wrong(modes),
        "contents": maybe_wrong(resources),
        "append": maybe_wrong(st.lists(resources, max_size=2)),
        "overwrite": maybe_wrong(st.booleans()),
        "user": maybe_wrong(node_refs),
        "group": maybe_wrong(node_refs),
        "filesystem": st.just("root"),
    },
)
dropins = st.fixed_dictionaries(
    {"name": maybe_wrong(st.sampled_from(["10-a.conf", "10-a.conf", "x.txt", "a/b.conf"]))},
    optional={"contents": maybe_wrong(st.text(max_size=10))},
)
units = st.fixed_dictionaries(
    {
        "name": maybe_wrong(
            st.sampled_from(
                ["a.service", "a.service", "b.timer", "bad", "x/y.service", "iri-registry.service"]
            )
        )
    },
    optional={
        "enabled": maybe_wrong(st.booleans()),
        "mask": maybe_wrong(st.booleans()),
        "contents": maybe_wrong(st.text(max_size=10)),
        "dropins": maybe_wrong(st.lists(dropins, max_size=3)),
    },
)
users = st.fixed_dictionaries(
    {"name": maybe_wrong(st.sampled_from(["core", "core", "bob"]))},
    optional={
        "sshAuthorizedKeys": maybe_wrong(st.lists(st.text(max_size=10), max_size=3)),
        "passwordHash": maybe_wrong(st.text(max_size=10)),
        "uid": maybe_wrong(st.integers(0, 5000)),
    },
)
ignition_configs = st.fixed_dictionaries(
    {"ignition": maybe_wrong(st.fixed_dictionaries({"version": maybe_wrong(versions)}))},
    optional={
        "storage": maybe_wrong(
            st.fixed_dictionaries(
                {},
                optional={
                    "files": maybe_wrong(st.lists(files, max_size=4)),
                    "directories": maybe_wrong(
                        st.lists(st.fixed_dictionaries({"path": maybe_wrong(paths)}), max_size=2)
                    ),
                    "links": maybe_wrong(
                        st.lists(
                            st.fixed_dictionaries({"path": maybe_wrong(paths), "target": st.just("/x")}),
                            max_size=2,
                        )
                    ),
                    "disks": json_values,
                },
            )
        ),
        "systemd": maybe_wrong(
            st.fixed_dictionaries({}, optional={"units": maybe_wrong(st.lists(units, max_size=4))})
        ),
        "passwd": maybe_wrong(
            st.fixed_dictionaries(
                {},
                optional={
                    "users": maybe_wrong(st.lists(users, max_size=3)),
                    "groups": json_values,
                },
            )
        ),
        "kernelArguments": json_values,
    },
)


def machineconfig(ign: Any, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "random"},
        "spec": {"config": ign, **spec},
    }


# ---------------------------------------------------------------- checks


def check_finding(f: Finding) -> None:
    assert isinstance(f.path, tuple)
    assert all(isinstance(p, str | int) for p in f.path)
    assert isinstance(f.message, str)
    assert f.message
    assert f.severity in ("error", "warning")


def check_result(result: IgnitionResult) -> None:
    assert isinstance(result, IgnitionResult)
    assert result.stage in ("parse", "validate", "ok")
    assert (result.config is None) == bool(result.errors) == (result.stage != "ok")
    for f in result.findings:
        check_finding(f)


def load_or_input_error(data: bytes) -> list[MachineConfig] | None:
    """Configs, or None after checking the InputError is well formed; any other exception fails the test."""
    try:
        configs = load_machineconfigs(data, "x")
    except InputError as exc:
        assert exc.findings
        for f in exc.findings:
            check_finding(f)
        assert all(line.startswith("x: ") for line in exc.lines())
        return None
    assert configs
    for mc in configs:
        check_result(mc.ignition)
        for f in mc.located_findings():
            check_finding(f)
        # the Ignition findings sit under the config's place in the document; the others (spec
        # fields such as kernelType) beside it
        for f in mc.ignition.findings:
            located = f.located(mc.ignition_path)
            assert located.path[: len(mc.ignition_path)] == mc.ignition_path
    return configs


# ---------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    load_or_input_error(data)


YAML_TOKENS = [
    *"{}[]:-,#&*!|>'\"%@`? \n\tab01.",
    "kind",
    "ignition",
    "version",
    "MachineConfig",
    "spec",
    "&a",
    "*b",
]
yamlish = st.lists(st.sampled_from(YAML_TOKENS), max_size=40).map("".join)


@PROPERTY_SETTINGS
@given(yamlish)
def test_random_yaml_like_text(text: str) -> None:
    load_or_input_error(text.encode())


@PROPERTY_SETTINGS
@given(json_values)
def test_random_json_values(value: Any) -> None:
    load_or_input_error(json.dumps(value).encode())
    load_or_input_error(json.dumps(machineconfig(value)).encode())


@PROPERTY_SETTINGS
@given(json_values)
def test_parse_ignition_on_random_values(value: Any) -> None:
    check_result(parse_ignition(value))
    check_result(parse_ignition({"ignition": {"version": "3.5.0"}, "storage": value}))


@PROPERTY_SETTINGS
@given(ignition_configs)
def test_parse_ignition_on_plausible_configs(doc: dict[str, Any]) -> None:
    check_result(parse_ignition(doc))


@PROPERTY_SETTINGS
@given(ignition_configs, st.booleans())
def test_plausible_configs_load_and_plan(doc: dict[str, Any], as_yaml: bool) -> None:
    obj = machineconfig(doc)
    data = yaml.safe_dump(obj).encode() if as_yaml else json.dumps(obj).encode()
    configs = load_or_input_error(data)
    bare = load_or_input_error(json.dumps(doc).encode())
    for mc in (configs or []) + (bare or []):
        # the rest of the pure stack copes with whatever the loader accepted
        for p in (plan(empty_machineconfig(), mc), plan(mc, mc), plan(mc, empty_machineconfig())):
            json.dumps(p.to_json())
            assert p.reconcilable == (not p.errors)


@PROPERTY_SETTINGS
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "osImageURL": maybe_wrong(st.text(max_size=10)),
            "kernelArguments": maybe_wrong(st.lists(st.text(max_size=10), max_size=3)),
            "kernelType": maybe_wrong(st.sampled_from(["", "default", "realtime"])),
            "fips": maybe_wrong(st.booleans()),
        },
    ),
    st.fixed_dictionaries({}, optional={"name": json_values, "annotations": json_values}),
)
@example(spec={"kernelType": "0"}, metadata={})  # a spec finding, located beside the config
def test_random_machineconfig_fields(spec: dict[str, Any], metadata: dict[str, Any]) -> None:
    obj = machineconfig({"ignition": {"version": "3.5.0"}}, **spec)
    obj["metadata"] = metadata
    for mc in load_or_input_error(json.dumps(obj).encode()) or []:
        json.dumps(plan(empty_machineconfig(), mc).to_json())


# ---------------------------------------------------------------- extremes (regressions)


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM interrupts a runaway loop (main thread, POSIX only)."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


DEEP = 3000


def test_deeply_nested_json_is_an_input_error() -> None:
    with pytest.raises(InputError):
        load_machineconfigs(b"[" * DEEP + b"]" * DEEP, "x")


def test_deeply_nested_value_inside_a_file_entry() -> None:
    deep = "[" * DEEP + "]" * DEEP
    text = (
        f"kind: MachineConfig\nspec:\n  config:\n    ignition: {{version: 3.5.0}}\n"
        f"    storage: {{files: [{{path: /a, x: {deep}}}]}}\n"
    )
    load_or_input_error(text.encode())


def test_recursive_yaml_alias_is_refused() -> None:
    with time_limit(2), pytest.raises(InputError):
        load_machineconfigs(b"kind: MachineConfig\nspec: &x {config: *x}\n", "x")


def test_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ["kind: MachineConfig", "metadata:", "  l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with time_limit(2):
        load_or_input_error(("\n".join(lines) + "\n").encode())


@pytest.mark.allow_commands
def test_very_deep_yaml_does_not_crash_the_interpreter() -> None:
    code = (
        "from mcd.config.load import load_machineconfigs\n"
        "from mcd.config.findings import InputError\n"
        "try:\n"
        "    load_machineconfigs(b'- ' * 100000, 'x')\n"
        "except InputError:\n"
        "    print('InputError')\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert (child.returncode, child.stdout) == (0, "InputError\n"), child.stderr[-500:]
