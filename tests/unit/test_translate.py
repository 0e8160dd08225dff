"""mcd.config.translate: Ignition spec 2.2 to spec 3 as the MCO does (ign-converter v23tov30)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from casefiles import CASES_DIR

from mcd.config.dataurl import decode_data_url
from mcd.config.findings import Finding
from mcd.config.schema import validate_ignition_schema
from mcd.config.translate import translate_2_2

FIXTURE = CASES_DIR.parent / "reference" / "fixtures" / "test-config.yaml"


def v22(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "2.2.0"}, **sections}


def root_file(path: str = "/etc/a", **fields: Any) -> dict[str, Any]:
    return {"filesystem": "root", "path": path, **fields}


def translated(doc: dict[str, Any]) -> dict[str, Any]:
    """The translation of a config that must translate cleanly; also checks it is a valid 3.5 shape."""
    out, findings = translate_2_2(doc)
    assert findings == []
    assert validate_ignition_schema(out, "3.5.0") == []
    return out


def errors(doc: dict[str, Any]) -> list[Finding]:
    return [f for f in translate_2_2(doc)[1] if f.severity == "error"]


# --- the upstream fixture ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_config() -> dict[str, Any]:
    if not FIXTURE.is_file():
        pytest.skip(f"fixture {FIXTURE} not present")
    config: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())["spec"]["config"]
    return config


def test_fixture_is_a_valid_2_2_config(fixture_config: dict[str, Any]) -> None:
    assert validate_ignition_schema(fixture_config, "2.2.0") == []


def test_fixture_translates(fixture_config: dict[str, Any]) -> None:
    out = translated(fixture_config)
    assert out["ignition"] == {"version": "3.5.0"}
    [file] = out["storage"]["files"]
    assert file == {
        "path": "/etc/coreos/update.conf",
        "overwrite": True,  # spec 2 default
        "mode": 420,
        "contents": {"source": fixture_config["storage"]["files"][0]["contents"]["source"]},
    }
    assert decode_data_url(file["contents"]["source"]) == (
        b"GROUP=stable\nSERVER=http://localhost:32003/v1/update\n"
    )
    units = {u["name"]: u for u in out["systemd"]["units"]}
    assert list(units) == [
        "docker.service",
        "etcd-member-tls.service",
        "etcd-member.service",
        "kubelet-workaround.service",
        "kubelet.service",
        "locksmith.service",
    ]
    assert {name for name, u in units.items() if u.get("enabled") is True} == {
        "docker.service",
        "etcd-member-tls.service",
        "etcd-member.service",
        "kubelet.service",
    }
    assert "enabled" not in units["kubelet-workaround.service"]
    assert units["locksmith.service"] == {"name": "locksmith.service", "mask": True}
    assert units["docker.service"]["dropins"] == [
        {
            "name": "10-dockeropts.conf",
            "contents": fixture_config["systemd"]["units"][0]["dropins"][0]["contents"],
        }
    ]
    assert "contents" not in units["docker.service"]
    assert units["kubelet.service"]["contents"].startswith("[Unit]\nDescription=Kubernetes Kubelet\n")
    assert "passwd" not in out


# --- files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {"overwrite": True, "contents": {"source": ""}}),
        ({"overwrite": False}, {"overwrite": False, "contents": {"source": ""}}),
        (
            {"append": True, "contents": {"source": "data:,x"}},
            {"overwrite": False, "append": [{"source": "data:,x"}]},
        ),
        (
            {"append": True, "overwrite": False, "contents": {"source": "data:,x"}},
            {"overwrite": False, "append": [{"source": "data:,x"}]},
        ),
        (
            {
                "mode": 384,
                "contents": {"source": "data:,x", "compression": "", "verification": {"hash": "sha512-0"}},
            },
            {
                "overwrite": True,
                "mode": 384,
                "contents": {"source": "data:,x", "verification": {"hash": "sha512-0"}},
            },
        ),
        (
            {"contents": {"source": "data:,x", "compression": "gzip", "verification": {}}},
            {"overwrite": True, "contents": {"source": "data:,x", "compression": "gzip"}},
        ),
        (
            {"user": {"id": 0}, "group": {"name": "wheel"}},
            {"overwrite": True, "user": {"id": 0}, "group": {"name": "wheel"}, "contents": {"source": ""}},
        ),
        ({"user": {"name": ""}, "group": {}}, {"overwrite": True, "contents": {"source": ""}}),
    ],
)
def test_file(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    out = translated(v22(storage={"files": [root_file(**fields)]}))
    assert out["storage"]["files"] == [{"path": "/etc/a", **expected}]


def test_append_and_overwrite_both_true_is_an_error() -> None:
    doc = v22(storage={"files": [root_file(append=True, overwrite=True)]})
    assert errors(doc) == [Finding(("storage", "files", 0), "cannot set both append and overwrite to true")]


def test_paths_are_cleaned() -> None:
    out = translated(v22(storage={"files": [root_file("/etc//a/./b/../c")]}))
    assert out["storage"]["files"][0]["path"] == "/etc/a/c"


def test_relative_path_is_an_error() -> None:
    assert errors(v22(storage={"directories": [{"filesystem": "root", "path": "etc/a"}]})) == [
        Finding(("storage", "directories", 0, "path"), "path not absolute")
    ]


# --- filesystems ------------------------------------------------------------------------------------


def test_node_without_filesystem_is_an_error() -> None:
    assert errors(v22(storage={"files": [{"path": "/etc/a"}]})) == [
        Finding(("storage", "files", 0, "filesystem"), "no filesystem specified")
    ]


def test_node_on_another_filesystem_is_an_error() -> None:
    doc = v22(
        storage={
            "filesystems": [{"name": "var", "mount": {"device": "/dev/sdb1", "format": "xfs"}}],
            "links": [{"filesystem": "var", "path": "/l", "target": "/t"}],
        }
    )
    assert errors(doc) == [
        Finding(
            ("storage", "filesystems", 0),
            'Config defined filesystem "var" but no mapping was defined.'
            "Please specify a path to be used as the filesystem mountpoint.",
        ),
        Finding(
            ("storage", "links", 0, "filesystem"),
            'filesystem "var" cannot be translated to Ignition spec 3: '
            'only the "root" filesystem is supported',
        ),
    ]


def test_declared_root_filesystem_is_implied() -> None:
    doc = v22(storage={"filesystems": [{"name": "root", "path": "/sysroot"}], "files": [root_file()]})
    out = translated(doc)
    assert "filesystems" not in out["storage"]


def test_root_filesystem_create_must_force() -> None:
    doc = v22(
        storage={
            "filesystems": [{"name": "root", "mount": {"device": "/dev/sda4", "format": "xfs", "create": {}}}]
        }
    )
    assert errors(doc) == [
        Finding(
            ("storage", "filesystems", 0, "mount", "create"),
            "Config must force filesystem creation in case `mount.create` object is defined.",
        )
    ]


# --- directories and links --------------------------------------------------------------------------


def test_directories_and_links() -> None:
    doc = v22(
        storage={
            "directories": [{"filesystem": "root", "path": "/etc/d", "mode": 493, "overwrite": False}],
            "links": [
                {"filesystem": "root", "path": "/etc/s", "target": "/etc/d"},
                {"filesystem": "root", "path": "/etc/h", "target": "/etc/x", "hard": True},
            ],
        }
    )
    storage = translated(doc)["storage"]
    assert storage["directories"] == [{"path": "/etc/d", "overwrite": False, "mode": 493}]
    assert storage["links"] == [
        {"path": "/etc/s", "target": "/etc/d"},
        {"path": "/etc/h", "target": "/etc/x", "hard": True},
    ]


def test_duplicate_paths_are_an_error() -> None:
    doc = v22(
        storage={
            "files": [root_file("/etc/a"), root_file("/etc//a")],
            "directories": [{"filesystem": "root", "path": "/etc/a"}],
        }
    )
    suffix = ".  All files, directories and links must specify a unique `path`."
    assert errors(doc) == [
        Finding(
            ("storage", "files", 1, "path"),
            'Config has conflicting inodes: "File: /etc/a" and "File: /etc/a"' + suffix,
        ),
        Finding(
            ("storage", "directories", 0, "path"),
            'Config has conflicting inodes: "File: /etc/a" and "Directory: /etc/a"' + suffix,
        ),
    ]


@pytest.mark.parametrize("path", ["/etc/l/x", "/etc/lx"])  # upstream compares plain string prefixes
def test_node_below_a_link_of_the_config_is_an_error(path: str) -> None:
    doc = v22(
        storage={
            "links": [{"filesystem": "root", "path": "/etc/l", "target": "/t"}],
            "files": [root_file(path)],
        }
    )
    assert errors(doc) == [
        Finding(
            ("storage", "files", 0, "path"),
            f'File: {path} uses link defined in config "/etc/l". '
            "Please use a link not defined in Storage:Links",
        )
    ]


# --- systemd ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {}),
        ({"enabled": True}, {"enabled": True}),
        ({"enabled": False}, {"enabled": False}),
        ({"enable": True}, {"enabled": True}),  # the deprecated spelling
        ({"enable": True, "enabled": False}, {"enabled": False}),  # the explicit disable wins
        ({"enable": False}, {}),
        ({"mask": True}, {"mask": True}),
        ({"mask": False, "contents": ""}, {}),
        ({"contents": "[Unit]\n"}, {"contents": "[Unit]\n"}),
    ],
)
def test_unit(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    out = translated(v22(systemd={"units": [{"name": "a.service", **fields}]}))
    assert out["systemd"]["units"] == [{"name": "a.service", **expected}]


def test_dropins() -> None:
    unit = {
        "name": "a.service",
        "dropins": [{"name": "10-a.conf", "contents": "[Service]\n"}, {"name": "20-b.conf"}],
    }
    out = translated(v22(systemd={"units": [unit]}))
    assert out["systemd"]["units"][0]["dropins"] == [
        {"name": "10-a.conf", "contents": "[Service]\n"},
        {"name": "20-b.conf"},
    ]


def test_duplicate_units_and_dropins_are_errors() -> None:
    doc = v22(
        systemd={
            "units": [
                {"name": "a.service", "dropins": [{"name": "x.conf"}, {"name": "x.conf"}]},
                {"name": "a.service"},
            ]
        }
    )
    assert errors(doc) == [
        Finding(
            ("systemd", "units", 0, "dropins", 1, "name"),
            'Config has duplicate dropin name "x.conf" in unit "a.service".  '
            "All dropins must specify a unique `name`.",
        ),
        Finding(
            ("systemd", "units", 1, "name"),
            'Config has duplicate unit name "a.service".  All units must specify a unique `name`.',
        ),
    ]


def test_networkd_units_are_an_error() -> None:
    doc = v22(networkd={"units": [{"name": "10-eth0.network", "contents": "[Match]\n"}]})
    assert errors(doc) == [
        Finding(("networkd", "units"), "config includes deprecated networkd section - use Files instead")
    ]
    assert "networkd" not in translate_2_2(doc)[0]


def test_empty_networkd_section_is_fine() -> None:
    translated(v22(networkd={"units": []}))


# --- passwd -----------------------------------------------------------------------------------------


def test_users_and_groups() -> None:
    doc = v22(
        passwd={
            "users": [
                {
                    "name": "core",
                    "passwordHash": "$6$x",
                    "sshAuthorizedKeys": ["ssh-ed25519 AAAA"],
                    "uid": 1000,
                    "gecos": "",
                    "homeDir": "/var/home/core",
                    "noCreateHome": False,
                    "groups": ["wheel"],
                    "shell": "/bin/bash",
                    "system": False,
                }
            ],
            "groups": [{"name": "ops", "gid": 0, "passwordHash": "", "system": True}],
        }
    )
    assert translated(doc)["passwd"] == {
        "users": [
            {
                "name": "core",
                "passwordHash": "$6$x",
                "sshAuthorizedKeys": ["ssh-ed25519 AAAA"],
                "uid": 1000,
                "homeDir": "/var/home/core",
                "groups": ["wheel"],
                "shell": "/bin/bash",
            }
        ],
        "groups": [{"name": "ops", "gid": 0, "system": True}],
    }


def test_deprecated_create_object_is_dropped_with_a_warning() -> None:
    doc = v22(passwd={"users": [{"name": "u", "create": {"uid": 1001, "shell": "/bin/sh"}}]})
    out, findings = translate_2_2(doc)
    assert findings == [
        Finding(
            ("passwd", "users", 0, "create"),
            "the create object has been deprecated in favor of user-level options",
            "warning",
        )
    ]
    assert out["passwd"] == {"users": [{"name": "u"}]}


def test_create_object_next_to_user_level_fields_is_an_error() -> None:
    doc = v22(passwd={"users": [{"name": "u", "create": {}, "shell": "/bin/sh", "uid": 0, "system": False}]})
    assert errors(doc) == [
        Finding(
            ("passwd", "users", 0, "shell"),
            "cannot use both the create object and the user-level shell field",
        ),
        Finding(
            ("passwd", "users", 0, "uid"), "cannot use both the create object and the user-level uid field"
        ),
    ]


# --- ignition section and disks ---------------------------------------------------------------------


def test_ignition_section() -> None:
    doc = {
        "ignition": {
            "version": "2.2.0",
            "config": {
                "append": [{"source": "https://a/x.ign", "verification": {"hash": "sha512-1"}}],
                "replace": {"source": "https://a/y.ign"},
            },
            "timeouts": {"httpTotal": 0, "httpResponseHeaders": 5},
            "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca"}]}},
        }
    }
    assert translated(doc)["ignition"] == {
        "version": "3.5.0",
        "config": {
            "merge": [{"source": "https://a/x.ign", "verification": {"hash": "sha512-1"}}],
            "replace": {"source": "https://a/y.ign"},
        },
        "timeouts": {"httpResponseHeaders": 5, "httpTotal": 0},
        "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca"}]}},
    }


def test_disks_and_raid() -> None:
    doc = v22(
        storage={
            "disks": [
                {"device": "/dev/sdb", "wipeTable": True, "partitions": [{"number": 1, "typeGuid": ""}]}
            ],
            "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdb1", "/dev/sdc1"], "spares": 0}],
        }
    )
    storage = translated(doc)["storage"]
    # the 2.2 -> 2.3 step always sets the partition label, even when empty
    assert storage["disks"] == [
        {"device": "/dev/sdb", "wipeTable": True, "partitions": [{"label": "", "number": 1}]}
    ]
    assert storage["raid"] == [{"name": "md0", "level": "raid1", "devices": ["/dev/sdb1", "/dev/sdc1"]}]


def test_partition_sizes_in_sectors_are_an_error() -> None:
    doc = v22(
        storage={"disks": [{"device": "/dev/sdb", "partitions": [{"number": 1, "size": 2048, "start": 0}]}]}
    )
    assert errors(doc) == [
        Finding(("storage", "disks", 0, "partitions", 0, "size"), "size is deprecated; use sizeMB instead")
    ]


def test_input_is_not_modified() -> None:
    doc = v22(storage={"files": [root_file(append=True, contents={"source": "data:,x"})]})
    before = repr(doc)
    translate_2_2(doc)
    assert repr(doc) == before
