"""mcd.config.schema: structural Ignition validation, memoised per item shape."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcd.config import schema
from mcd.config.findings import Finding
from mcd.config.schema import (
    SUPPORTED_VERSIONS,
    validate_ignition_schema,
)

V3 = [v for v in SUPPORTED_VERSIONS if v.startswith("3.")]


def config(version: str = "3.5.0", **sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": version}, **sections}


def files(*items: dict[str, Any], version: str = "3.5.0") -> dict[str, Any]:
    return config(version, storage={"files": list(items)})


def test_supported_versions() -> None:
    assert SUPPORTED_VERSIONS == ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "2.2.0")


def test_unsupported_version_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"unsupported Ignition spec version '4\.0\.0'"):
        validate_ignition_schema(config(), "4.0.0")


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_minimal_config_is_valid(version: str) -> None:
    assert validate_ignition_schema({"ignition": {"version": version}}, version) == []


@pytest.mark.parametrize("version", V3)
def test_typical_config_is_valid(version: str) -> None:
    doc = config(
        version,
        storage={
            "files": [
                {
                    "path": "/etc/a",
                    "mode": 420,
                    "overwrite": True,
                    "user": {"name": "root"},
                    "contents": {"source": "data:,a", "verification": {}},
                }
            ],
            "directories": [{"path": "/etc/d", "mode": 493}],
            "links": [{"path": "/etc/l", "target": "/etc/a", "hard": False}],
        },
        systemd={"units": [{"name": "a.service", "enabled": True, "dropins": [{"name": "x.conf"}]}]},
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]},
    )
    assert validate_ignition_schema(doc, version) == []


# --- messages and paths -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", 'expected integer or null, got string "abc"'),
        (420.0, "expected integer or null, got number 420.0"),  # Go decodes only integer literals
        (True, "expected integer or null, got boolean true"),
        ([420], "expected integer or null, got array"),
        ({"a": 1}, "expected integer or null, got object"),
        ("x" * 50, 'expected integer or null, got string "' + "x" * 40 + '"...'),
    ],
)
def test_type_mismatch_is_located_and_quotes_the_value(value: object, message: str) -> None:
    doc = files({"path": "/a"}, {"path": "/b", "mode": value})
    assert validate_ignition_schema(doc, "3.5.0") == [Finding(("storage", "files", 1, "mode"), message)]


def test_missing_required_field_is_reported_on_its_object() -> None:
    doc = config(systemd={"units": [{"name": "a.service", "dropins": [{"contents": "x"}]}]})
    assert validate_ignition_schema(doc, "3.5.0") == [
        Finding(("systemd", "units", 0, "dropins", 0), 'missing required field "name"')
    ]


def test_missing_version() -> None:
    assert validate_ignition_schema({"ignition": {}}, "3.5.0") == [
        Finding(("ignition",), 'missing required field "version"')
    ]
    assert validate_ignition_schema({}, "3.5.0") == [Finding((), 'missing required field "ignition"')]


def test_document_must_be_an_object() -> None:
    assert validate_ignition_schema([], "3.5.0") == [Finding((), "expected object, got array")]


def test_unknown_keys_are_warnings_in_ignitions_words() -> None:
    doc = files({"path": "/a", "mdoe": 420})
    doc["extra"] = {"x": 1}
    assert validate_ignition_schema(doc, "3.5.0") == [
        Finding(("extra",), "Unused key extra", "warning"),
        Finding(("storage", "files", 0, "mdoe"), "Unused key mdoe", "warning"),
    ]
    doc22 = config("2.2.0", storage={"files": [{"filesystem": "root", "path": "/a", "mdoe": 1}]})
    assert validate_ignition_schema(doc22, "2.2.0") == [
        Finding(("storage", "files", 0, "mdoe"), "Config has unrecognized key: mdoe", "warning")
    ]


def test_value_of_an_unknown_key_is_not_checked() -> None:
    assert validate_ignition_schema(files({"path": "/a", "foo": {"mode": "x"}}), "3.5.0") == [
        Finding(("storage", "files", 0, "foo"), "Unused key foo", "warning")
    ]


def test_findings_are_sorted_by_path() -> None:
    doc = files(*[{"path": "/a", "mode": "m"} for _ in range(12)])
    paths = [f.path for f in validate_ignition_schema(doc, "3.5.0")]
    assert paths == [("storage", "files", i, "mode") for i in range(12)]


# --- null, as Go's decoder takes it -----------------------------------------------------------------


def test_null_stands_for_absent_optional_values() -> None:
    doc = config(
        storage={
            "files": [{"path": "/a", "mode": None, "overwrite": None, "contents": None, "user": None}],
            "links": None,
            "directories": None,
        },
        systemd=None,
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": None, "passwordHash": None}]},
    )
    assert validate_ignition_schema(doc, "3.5.0") == []


def test_null_is_refused_for_required_strings_and_list_items() -> None:
    doc = config(storage={"files": [{"path": None}]}, passwd={"users": [{"name": "core", "groups": [None]}]})
    assert validate_ignition_schema(doc, "3.5.0") == [
        Finding(("passwd", "users", 0, "groups", 0), "expected string, got null"),
        Finding(("storage", "files", 0, "path"), "expected string, got null"),
    ]


# --- what each spec version knows -------------------------------------------------------------------

KNOWN = {
    "kernelArguments": (
        {"kernelArguments": {"shouldExist": ["a"]}},
        ("kernelArguments",),
        "3.3.0",
    ),
    "luks": ({"storage": {"luks": [{"name": "x", "device": "/dev/a"}]}}, ("storage", "luks"), "3.2.0"),
    "luks discard": (
        {"storage": {"luks": [{"name": "x", "discard": True}]}},
        ("storage", "luks", 0, "discard"),
        "3.4.0",
    ),
    "luks cex": (
        {"storage": {"luks": [{"name": "x", "cex": {"enabled": True}}]}},
        ("storage", "luks", 0, "cex"),
        "3.5.0",
    ),
    "proxy": (
        {"ignition": {"version": "v", "proxy": {"httpProxy": "http://p"}}},
        ("ignition", "proxy"),
        "3.1.0",
    ),
    "httpHeaders": (
        {"storage": {"files": [{"path": "/a", "contents": {"httpHeaders": [{"name": "A"}]}}]}},
        ("storage", "files", 0, "contents", "httpHeaders"),
        "3.1.0",
    ),
    "user shouldExist": (
        {"passwd": {"users": [{"name": "u", "shouldExist": False}]}},
        ("passwd", "users", 0, "shouldExist"),
        "3.2.0",
    ),
}


@pytest.mark.parametrize("version", V3)
@pytest.mark.parametrize("feature", sorted(KNOWN))
def test_fields_are_known_from_their_spec_version_on(feature: str, version: str) -> None:
    sections, path, since = KNOWN[feature]
    doc = {"ignition": {"version": version}, **copy.deepcopy(sections)}
    doc["ignition"]["version"] = version
    findings = validate_ignition_schema(doc, version)
    if version >= since:
        assert findings == []
    elif path[:2] == ("storage", "luks") and version < "3.2.0":
        assert findings == [Finding(("storage", "luks"), "Unused key luks", "warning")]
    else:
        assert findings == [Finding(path, f"Unused key {path[-1]}", "warning")]


@pytest.mark.parametrize("version", V3)
def test_link_target_and_raid_level_became_optional_in_3_3(version: str) -> None:
    doc = config(version, storage={"links": [{"path": "/l"}], "raid": [{"name": "md0"}]})
    findings = validate_ignition_schema(doc, version)
    if version >= "3.3.0":
        assert findings == []
    else:
        assert findings == [
            Finding(("storage", "links", 0), 'missing required field "target"'),
            Finding(("storage", "raid", 0), 'missing required field "devices"'),
            Finding(("storage", "raid", 0), 'missing required field "level"'),
        ]


def test_spec_2_2_fields() -> None:
    doc = config(
        "2.2.0",
        storage={"files": [{"path": "/a", "append": True, "contents": {"source": "data:,x"}}]},
        systemd={"units": [{"name": "a.service", "enable": True}]},
        networkd={"units": [{"name": "10-a.network", "contents": "x"}]},
        passwd={"users": [{"name": "u", "create": {"shell": "/bin/sh"}}]},
    )
    assert validate_ignition_schema(doc, "2.2.0") == [
        Finding(("storage", "files", 0), 'missing required field "filesystem"')
    ]
    # spec 3 knows none of the spec 2 only fields, and its append is a list
    doc["ignition"]["version"] = "3.0.0"
    assert [f.message for f in validate_ignition_schema(doc, "3.0.0")] == [
        "Unused key networkd",
        "Unused key create",
        "expected array or null, got boolean true",
        "Unused key enable",
    ]


# --- memoisation ------------------------------------------------------------------------------------


def test_items_of_one_shape_get_their_own_messages() -> None:
    doc = files(*[{"path": "/a", "mode": m} for m in ("x", "y", "z")], {"path": "/b", "mode": 1})
    assert [f.message for f in validate_ignition_schema(doc, "3.5.0")] == [
        f'expected integer or null, got string "{m}"' for m in "xyz"
    ]


def test_validation_leaves_the_document_untouched() -> None:
    doc = files(*[{"path": f"/{i}", "mode": "x"} for i in range(3)])
    before = copy.deepcopy(doc)
    validate_ignition_schema(doc, "3.5.0")
    assert doc == before


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 500),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.text(max_size=3),
)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a well-typed value, sometimes any scalar."""
    return st.one_of(good, good, good, SCALARS)


RESOURCE = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "source": mostly(st.just("data:,x")),
            "compression": mostly(st.just("gzip")),
            "verification": st.fixed_dictionaries({}, optional={"hash": mostly(st.just("sha512-x"))}),
            "bogus": SCALARS,
        },
    ),
    SCALARS,
)
OWNER = st.fixed_dictionaries({}, optional={"id": mostly(st.integers(0, 9)), "name": mostly(st.just("root"))})
NODE = {
    "path": mostly(st.just("/a")),
    "overwrite": mostly(st.booleans()),
    "user": OWNER,
    "group": st.one_of(OWNER, SCALARS),
}
FILE = st.fixed_dictionaries(
    {},
    optional={
        **NODE,
        "mode": mostly(st.just(420)),
        "contents": RESOURCE,
        "append": st.one_of(st.lists(RESOURCE, max_size=2), SCALARS),
        "x": SCALARS,
    },
)
DIRECTORY = st.fixed_dictionaries({}, optional={**NODE, "mode": mostly(st.just(493))})
LINK = st.fixed_dictionaries(
    {}, optional={**NODE, "target": mostly(st.just("/t")), "hard": mostly(st.booleans())}
)
DROPIN = st.fixed_dictionaries(
    {}, optional={"name": mostly(st.just("a.conf")), "contents": mostly(st.just("x"))}
)
UNIT = st.fixed_dictionaries(
    {},
    optional={
        "name": mostly(st.just("a.service")),
        "enabled": mostly(st.booleans()),
        "mask": mostly(st.booleans()),
        "contents": mostly(st.just("[Unit]")),
        "dropins": st.one_of(st.lists(DROPIN, max_size=2), SCALARS),
        "enable": SCALARS,
    },
)
USER = st.fixed_dictionaries(
    {},
    optional={
        "name": mostly(st.just("core")),
        "sshAuthorizedKeys": st.one_of(st.lists(mostly(st.just("ssh-rsa A")), max_size=3), SCALARS),
        "uid": mostly(st.integers(0, 9)),
        "create": st.fixed_dictionaries({}, optional={"shell": SCALARS}),
    },
)


def same_shape(value: Any) -> st.SearchStrategy[Any]:
    """Values with `value`'s keys and JSON types all the way down, but fresh scalars."""
    if isinstance(value, dict):
        return st.fixed_dictionaries({k: same_shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return st.tuples(*[same_shape(v) for v in value]).map(list)
    if value is None:
        return st.none()
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-3, 500)
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False, width=16)
    return st.text(max_size=3)


@st.composite
def repetitive_list(draw: st.DrawFn, item: st.SearchStrategy[Any]) -> list[Any]:
    """A list whose items share a few shapes, as in a rendered config, with varied values."""
    templates = draw(st.lists(item, min_size=1, max_size=3))
    picks = draw(st.lists(st.sampled_from(templates), max_size=25))
    return [draw(same_shape(t)) for t in picks]


@st.composite
def configs(draw: st.DrawFn) -> tuple[str, Any]:
    version = draw(st.sampled_from(SUPPORTED_VERSIONS))
    storage = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "files": st.one_of(repetitive_list(FILE), SCALARS),
                "directories": repetitive_list(DIRECTORY),
                "links": repetitive_list(LINK),
                "unknown": SCALARS,
            },
        )
    )
    doc = draw(
        st.fixed_dictionaries(
            {"ignition": st.one_of(st.just({"version": version}), SCALARS, st.just({}))},
            optional={
                "storage": st.one_of(st.just(storage), SCALARS),
                "systemd": st.fixed_dictionaries({}, optional={"units": repetitive_list(UNIT)}),
                "passwd": st.fixed_dictionaries(
                    {}, optional={"users": repetitive_list(USER), "groups": repetitive_list(USER)}
                ),
                "extra": SCALARS,
            },
        )
    )
    return version, draw(st.one_of(st.just(doc), st.just(doc), SCALARS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_memoised_validation_equals_plain_validation(case: tuple[str, Any]) -> None:
    version, doc = case
    assert validate_ignition_schema(doc, version) == plain_validation(doc, version)
    walker = schema._walker(version)
    assert walker is not None and walker.clean(doc) == (plain_validation(doc, version) == [])


def plain_validation(doc: object, version: str) -> list[Any]:
    """The findings without memoisation: the whole document through the compiled schema at once."""
    spec = schema._compile(version)
    return schema._sorted(schema._findings(spec, spec.root, doc, ()))


def bench_config(n_files: int = 2000, n_units: int = 300) -> dict[str, Any]:
    """The shape of /work/shared/bench's rendered config: many files and units with one drop-in."""
    return config(
        storage={
            "files": [
                {
                    "path": f"/etc/bench/file-{i:05d}.conf",
                    "mode": 420,
                    "overwrite": True,
                    "contents": {"source": "data:," + "x" * 1024},
                }
                for i in range(n_files)
            ]
        },
        systemd={
            "units": [
                {
                    "name": f"bench-{u:04d}.service",
                    "enabled": u % 3 == 0,
                    "contents": "[Unit]\n",
                    "dropins": [{"name": "10-bench.conf", "contents": "[Service]\n"}],
                }
                for u in range(n_units)
            ]
        },
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]},
    )


def test_large_config_validates_fast() -> None:
    """2,000 files and 300 units: the budget is 15 ms; allow slack for a loaded machine."""
    doc = bench_config()
    validate_ignition_schema(doc, "3.5.0")  # compile the validator outside the measurement
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        findings = validate_ignition_schema(doc, "3.5.0")
        best = min(best, time.perf_counter() - start)
    assert findings == []
    assert best < 0.05
