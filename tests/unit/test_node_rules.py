"""What a node cannot take, refused by the parse itself (so `validate`, `plan` and `start` agree):
owner ids, paths the kernel refuses, paths below other declared paths, the daemon's own state."""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file

from mcd.config import paths
from mcd.config.findings import format_path
from mcd.config.ignition import IgnitionResult, parse_ignition
from mcd.host import files as host_files
from mcd.host import state as host_state


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def errors(result: IgnitionResult) -> list[tuple[str, str]]:
    return [(format_path(f.path), f.message) for f in result.errors]


def files(*entries: dict[str, Any]) -> dict[str, Any]:
    return ign(storage={"files": list(entries)})


# ---------------------------------------------------------------- owner ids (item 6)


@pytest.mark.parametrize("who", ["user", "group"])
@pytest.mark.parametrize("value", [-1, 2**32 - 1, 2**32, 2**63])
def test_owner_ids_out_of_range_are_refused(who: str, value: int) -> None:
    result = parse_ignition(files(ign_file("/etc/a", **{who: {"id": value}})))
    assert errors(result) == [
        (f"storage.files[0].{who}.id", f"invalid {who} id {value}: must be between 0 and 4294967294")
    ]


@pytest.mark.parametrize("value", [0, 1000, 2**32 - 2])
def test_owner_ids_in_range_are_fine(value: int) -> None:
    result = parse_ignition(files(ign_file("/etc/a", user={"id": value}, group={"id": value})))
    assert result.errors == ()
    assert result.config is not None
    assert result.config.files[0].user.id == value


@pytest.mark.parametrize("who", ["user", "group"])
def test_id_and_name_together_are_refused_as_ignition_does(who: str) -> None:
    result = parse_ignition(files(ign_file("/etc/a", **{who: {"id": 0, "name": "core"}})))
    assert errors(result) == [(f"storage.files[0].{who}", "cannot set both id and name")]


def test_an_empty_name_with_an_id_is_no_name() -> None:
    # Ignition's test is "name not empty"
    assert parse_ignition(files(ign_file("/etc/a", user={"id": 5, "name": ""}))).errors == ()


def test_passwd_uids_and_gids_are_range_checked() -> None:
    doc = ign(
        passwd={
            "users": [{"name": "core", "sshAuthorizedKeys": ["k"]}, {"name": "x", "uid": -5}],
            "groups": [{"name": "g", "gid": 2**32}],
        }
    )
    assert sorted(errors(parse_ignition(doc))) == [
        ("passwd.groups[0].gid", "invalid group id 4294967296: must be between 0 and 4294967294"),
        ("passwd.users[1].uid", "invalid user id -5: must be between 0 and 4294967294"),
    ]


# ---------------------------------------------------------------- paths a node cannot hold (item 8)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/", 'path "/" is the root directory itself'),
        ("/etc/a\0b", 'path "/etc/a\\x00b" contains a NUL byte'),
        ("/etc/" + "x" * 256, f'path component "{"x" * 60}…" is longer than 255 bytes'),
        ("/etc/" + "é" * 128, f'path component "{"é" * 60}…" is longer than 255 bytes'),
        ("/" + "/".join(["d" * 200] * 21), f'path "/{"d" * 59}…" is longer than 4095 bytes'),
    ],
    ids=["root", "nul", "long-component", "long-utf8-component", "long-path"],
)
@pytest.mark.parametrize("section", ["files", "directories", "links"])
def test_paths_the_kernel_refuses(section: str, path: str, message: str) -> None:
    entry: dict[str, Any] = {"path": path}
    if section == "links":
        entry["target"] = "/x"
    result = parse_ignition(ign(storage={section: [entry]}))
    assert errors(result) == [(f"storage.{section}[0].path", message)]


def test_a_component_of_exactly_255_bytes_is_fine() -> None:
    assert parse_ignition(files(ign_file("/etc/" + "x" * 255))).errors == ()


def test_a_file_below_another_file_is_refused() -> None:
    result = parse_ignition(files(ign_file("/etc/a"), ign_file("/etc/a/b/c")))
    assert errors(result) == [
        ("storage.files[1].path", 'path "/etc/a/b/c" is below file "/etc/a" (storage.files[0].path)')
    ]


def test_a_directory_below_a_file_is_refused() -> None:
    result = parse_ignition(
        ign(storage={"files": [ign_file("/etc/a")], "directories": [{"path": "/etc/a/d"}]})
    )
    assert errors(result) == [
        ("storage.directories[0].path", 'path "/etc/a/d" is below file "/etc/a" (storage.files[0].path)')
    ]


def test_a_file_below_a_declared_link_is_refused_as_ignition_does() -> None:
    storage = {"files": [ign_file("/etc/l/x")], "links": [{"path": "/etc/l", "target": "/tmp"}]}
    assert errors(parse_ignition(ign(storage=storage))) == [
        ("storage.files[0]", "file path includes link in config")
    ]


def test_files_below_declared_directories_are_fine() -> None:
    storage = {"files": [ign_file("/etc/d/x")], "directories": [{"path": "/etc/d"}]}
    assert parse_ignition(ign(storage=storage)).errors == ()


def test_a_file_where_a_unit_or_dropin_goes_is_refused() -> None:
    units = [
        {"name": "a.service", "contents": "[Unit]\n"},
        {"name": "b.service", "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}]},
    ]
    doc = ign(
        storage={
            "files": [
                ign_file("/etc/systemd/system/a.service"),
                ign_file("/etc/systemd/system/b.service.d/x.conf"),
            ]
        },
        systemd={"units": units},
    )
    assert sorted(errors(parse_ignition(doc))) == [
        ("storage.files[0].path", "path conflicts with systemd unit or dropin"),
        ("storage.files[1].path", "path conflicts with systemd unit or dropin"),
    ]


def test_a_file_where_a_dropin_directory_goes_is_refused() -> None:
    unit = {"name": "b.service", "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}]}
    doc = ign(storage={"files": [ign_file("/etc/systemd/system/b.service.d")]}, systemd={"units": [unit]})
    assert errors(parse_ignition(doc)) == [
        (
            "storage.files[0].path",
            'path "/etc/systemd/system/b.service.d" is a directory of systemd unit "b.service"',
        )
    ]


@pytest.mark.parametrize(
    ("unit", "message"),
    [
        ({"name": "x" * 248 + ".service"}, f'systemd unit name "{"x" * 60}…" is longer than 255 bytes'),
        (
            {"name": "x" * 246 + ".service", "dropins": [{"name": "a.conf"}]},
            f'systemd unit name "{"x" * 60}…" is longer than 255 bytes',
        ),
        ({"name": "a\0.service"}, 'invalid systemd unit name "a\\x00.service"'),
    ],
)
def test_unit_names_that_cannot_be_file_names(unit: dict[str, Any], message: str) -> None:
    [(where, found)] = errors(parse_ignition(ign(systemd={"units": [unit]})))
    assert (where, found) == ("systemd.units[0].name", message) or "NUL" in found


def test_a_dropin_name_too_long() -> None:
    unit = {"name": "a.service", "dropins": [{"name": "d" * 252 + ".conf"}]}
    assert errors(parse_ignition(ign(systemd={"units": [unit]}))) == [
        (
            "systemd.units[0].dropins[0].name",
            f'systemd unit dropin name "{"d" * 60}…" is longer than 255 bytes',
        )
    ]


# ---------------------------------------------------------------- the daemon's own state (item 4)


@pytest.mark.parametrize(
    "path",
    [
        "/etc/machine-config-daemon/currentconfig",
        "/etc/machine-config-daemon/currentimage",
        "/etc/machine-config-daemon/pendingconfig",
        "/etc/machine-config-daemon/txn.json",
        "/etc/machine-config-daemon/reboot-pending",
        "/etc/machine-config-daemon/orig/etc/hosts.mcdorig",
        "/etc/machine-config-daemon/noorig/etc/x.mcdnoorig",
        "/etc/machine-config-daemon/orig",
        "/etc/machine-config-daemon",
    ],
)
@pytest.mark.parametrize("section", ["files", "directories", "links"])
def test_the_daemons_state_cannot_be_written_by_a_config(section: str, path: str) -> None:
    entry: dict[str, Any] = {"path": path}
    if section == "links":
        entry["target"] = "/x"
    [(where, message)] = errors(parse_ignition(ign(storage={section: [entry]})))
    assert where == f"storage.{section}[0].path"
    assert (
        message == f"{path} is the daemon's own state (/etc/machine-config-daemon): a config cannot write it"
    )


@pytest.mark.parametrize("section", ["files", "links"])
def test_a_file_or_link_cannot_replace_a_directory_of_the_state(section: str) -> None:
    entry: dict[str, Any] = {"path": "/etc"}
    if section == "links":
        entry["target"] = "/x"
    [(_, message)] = errors(parse_ignition(ign(storage={section: [entry]})))
    assert message.startswith("/etc holds the daemon's own state (/etc/machine-config-daemon)")


@pytest.mark.parametrize("section", ["files", "directories", "links"])
def test_the_root_lock_cannot_be_written_by_a_config(section: str) -> None:
    entry: dict[str, Any] = {"path": "/run/mcd.lock"}
    if section == "links":
        entry["target"] = "/x"
    [(where, message)] = errors(parse_ignition(ign(storage={section: [entry]})))
    assert where == f"storage.{section}[0].path"
    assert (
        message == "/run/mcd.lock is the daemon's lock on the root (/run/mcd.lock): a config cannot write it"
    )


@pytest.mark.parametrize("section", ["files", "links"])
def test_a_file_or_link_cannot_replace_the_directory_of_the_lock(section: str) -> None:
    entry: dict[str, Any] = {"path": "/run"}
    if section == "links":
        entry["target"] = "/x"
    [(_, message)] = errors(parse_ignition(ign(storage={section: [entry]})))
    assert (
        message
        == f"/run holds the daemon's lock (/run/mcd.lock): a config cannot replace it by a {section[:-1]}"
    )
    assert parse_ignition(files(ign_file("/run/other.lock"))).errors == ()


def test_other_files_of_the_state_directory_are_config_contents() -> None:
    # the MCO ships this one in every rendered config
    doc = files(ign_file("/etc/machine-config-daemon/no-reboot/containers-gpg.pub"))
    assert parse_ignition(doc).errors == ()
    assert parse_ignition(ign(storage={"directories": [{"path": "/etc"}]})).errors == ()


def _state_paths() -> set[str]:
    found = set()
    for module in (host_state, host_files):
        for value in vars(module).values():
            if isinstance(value, str) and value.startswith(paths.STATE_DIR + "/"):
                found.add(value)
    return found


def test_every_record_the_host_layer_keeps_is_reserved() -> None:
    # a record added to the host layer without adding it to mcd.config.paths fails here
    assert _state_paths()
    for path in _state_paths():
        assert paths.state_problem(path, "file") is not None, path


def test_messages_never_carry_a_whole_long_path() -> None:
    long_path = "/etc/" + "x" * 5000
    doc = files(ign_file(long_path, mode=0o4777), ign_file(long_path))
    messages = [f.message for f in parse_ignition(doc).findings]
    assert messages
    assert all(len(m) < 400 for m in messages), [len(m) for m in messages]
