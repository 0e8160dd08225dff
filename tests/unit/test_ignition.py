"""parse_ignition: versions, structure, translation of spec 2.2 and the semantic rules, each located."""

from __future__ import annotations

import base64
import gzip
import hashlib
from typing import Any

import pytest
from builders import data_url, ign_file

from mcd.config.findings import format_path
from mcd.config.ignition import (
    DEFAULT_FILE_MODE,
    File,
    IgnitionResult,
    NodeRef,
    Resource,
    format_mode,
    parse_ignition,
)


def ign(version: str = "3.5.0", files: list[dict[str, Any]] | None = None, **sections: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"ignition": {"version": version}, **sections}
    if files is not None:
        doc.setdefault("storage", {})["files"] = files
    return doc


def errors(result: IgnitionResult) -> list[tuple[str, str]]:
    return [(format_path(f.path), f.message) for f in result.errors]


def only_error(result: IgnitionResult) -> tuple[str, str]:
    found = errors(result)
    assert len(found) == 1, found
    return found[0]


def b64_url(data: bytes) -> str:
    return "data:;base64," + base64.b64encode(data).decode()


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize("version", ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "2.2.0"])
def test_every_supported_version_parses(version: str) -> None:
    result = parse_ignition(ign(version))
    assert result.stage == "ok"
    assert result.findings == ()
    assert result.config is not None
    assert result.config.version == version
    assert result.config.files == ()


@pytest.mark.parametrize("version", ["4.0.0", "3.6.0", "2.3.0", "1.0.0", "3.5", "latest"])
def test_unsupported_version_is_a_parse_error_at_the_version(version: str) -> None:
    result = parse_ignition(ign(version))
    assert result.config is None
    assert result.stage == "parse"
    path, message = only_error(result)
    assert path == "ignition.version"
    assert message.startswith(f'unsupported Ignition config version "{version}" (supported: 2.2.0, 3.0.0')


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"ignition": {}},
        {"ignition": {"version": ""}},
        {"ignition": {"version": 3}},
        {"ignition": "3.5.0"},
    ],
)
def test_missing_version(doc: dict[str, Any]) -> None:
    result = parse_ignition(doc)
    assert result.stage == "parse"
    assert only_error(result) == ("ignition.version", "missing Ignition config version")


@pytest.mark.parametrize(
    ("doc", "name"), [(None, "null"), ([], "array"), ("x", "string"), (3, "integer"), (True, "boolean")]
)
def test_not_an_object(doc: object, name: str) -> None:
    result = parse_ignition(doc)
    assert result.config is None
    assert only_error(result) == ("$", f"expected an object, got {name}")


# ---------------------------------------------------------------- structure (schema layer)


def test_wrong_type_is_located_and_stops_before_semantics() -> None:
    result = parse_ignition(ign(files=[ign_file("/etc/a"), {"path": "/etc/b", "mode": "abc"}]))
    assert result.config is None
    assert result.stage == "parse"
    path, message = only_error(result)
    assert path == "storage.files[1].mode"
    assert '"abc"' in message


def test_files_not_a_list() -> None:
    result = parse_ignition(ign(storage={"files": {"path": "/etc/a"}}))
    assert result.stage == "parse"
    path, _ = only_error(result)
    assert path == "storage.files"


def test_missing_required_path() -> None:
    result = parse_ignition(ign(files=[{"mode": 420}]))
    path, message = only_error(result)
    assert path == "storage.files[0]"
    assert "path" in message


def test_unknown_key_is_a_warning_and_the_config_is_usable() -> None:
    result = parse_ignition(ign(files=[ign_file("/etc/a", "x", filesystem="root")]))
    assert result.config is not None
    assert result.stage == "ok"
    assert result.errors == ()
    [warning] = result.findings
    assert warning.severity == "warning"
    assert format_path(warning.path) == "storage.files[0].filesystem"
    assert "filesystem" in warning.message


def test_nulls_are_accepted_where_optional() -> None:
    doc = ign(
        storage={"files": [{"path": "/etc/a", "mode": None, "contents": None, "user": None}], "links": None},
        systemd={"units": [{"name": "a.service", "enabled": None, "dropins": None}]},
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": None}]},
    )
    result = parse_ignition(doc)
    assert result.errors == ()
    assert result.config is not None
    [f] = result.config.files
    assert f.mode is None
    assert f.effective_mode == DEFAULT_FILE_MODE
    assert f.data == b""
    assert result.config.users[0].ssh_authorized_keys == ()


# ---------------------------------------------------------------- spec 2.2 translation


def test_spec2_is_translated_to_spec3_semantics() -> None:
    doc = {
        "ignition": {"version": "2.2.0"},
        "storage": {
            "files": [
                {
                    "filesystem": "root",
                    "path": "/etc/coreos/update.conf",
                    "mode": 420,
                    "contents": {"source": "data:,GROUP%3Dstable%0A", "verification": {}},
                }
            ]
        },
        "systemd": {
            "units": [
                {
                    "name": "docker.service",
                    "enabled": True,
                    "dropins": [{"name": "10-opts.conf", "contents": "x"}],
                },
                {"name": "locksmith.service", "mask": True},
            ]
        },
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-rsa AAA"]}]},
    }
    result = parse_ignition(doc)
    assert result.errors == (), result.findings
    cfg = result.config
    assert cfg is not None
    [f] = cfg.files
    assert f.path == "/etc/coreos/update.conf"
    assert f.data == b"GROUP=stable\n"
    assert f.mode == 420
    docker, locksmith = cfg.units
    assert docker.enabled is True
    assert [d.name for d in docker.dropins] == ["10-opts.conf"]
    assert locksmith.mask is True
    assert cfg.users[0].ssh_authorized_keys == ("ssh-rsa AAA",)


def test_spec2_semantic_errors_are_reported_too() -> None:
    doc = {
        "ignition": {"version": "2.2.0"},
        "storage": {"files": [{"filesystem": "root", "path": "/etc/x", "mode": 1023}]},
    }
    result = parse_ignition(doc)
    assert result.config is None
    assert ("storage.files[0].mode", "invalid mode 01777 for /etc/x, cannot exceed 0777") in errors(result)


# ---------------------------------------------------------------- modes


@pytest.mark.parametrize(
    ("mode", "shown"), [(1023, "01777"), (0o4755, "04755"), (0o2644, "02644"), (512, "01000")]
)
def test_mode_beyond_0777_is_refused_with_upstreams_text(mode: int, shown: str) -> None:
    result = parse_ignition(ign(files=[ign_file("/etc/a"), ign_file("/etc/b", mode=mode)]))
    assert result.stage == "validate"
    assert only_error(result) == (
        "storage.files[1].mode",
        f"invalid mode {shown} for /etc/b, cannot exceed 0777",
    )


@pytest.mark.parametrize("mode", [0, 0o600, 0o644, 0o755, 0o777])
def test_modes_within_0777_are_fine(mode: int) -> None:
    result = parse_ignition(ign(files=[ign_file("/etc/a", mode=mode)]))
    assert result.errors == ()
    assert result.config is not None
    assert result.config.files[0].effective_mode == mode


@pytest.mark.parametrize(("mode", "text"), [(0, "0"), (0o644, "0644"), (0o1777, "01777"), (0o7, "07")])
def test_format_mode_is_gos_alternate_octal(mode: int, text: str) -> None:
    assert format_mode(mode) == text


# ---------------------------------------------------------------- paths


def test_relative_path() -> None:
    result = parse_ignition(ign(files=[ign_file("etc/a")]))
    assert result.stage == "validate"
    assert only_error(result) == ("storage.files[0].path", 'path "etc/a" is not absolute')


@pytest.mark.parametrize(
    ("path", "clean"), [("/etc/../x", "/x"), ("/etc//x", "/etc/x"), ("/etc/x/", "/etc/x")]
)
def test_unclean_path(path: str, clean: str) -> None:
    result = parse_ignition(ign(files=[ign_file(path)]))
    assert only_error(result) == ("storage.files[0].path", f'path "{path}" is not clean (want "{clean}")')


def test_duplicate_file_path_names_the_first_declaration() -> None:
    result = parse_ignition(ign(files=[ign_file("/etc/a"), ign_file("/etc/b"), ign_file("/etc/a", "other")]))
    assert only_error(result) == (
        "storage.files[2].path",
        'duplicate path "/etc/a", already declared at storage.files[0].path',
    )


def test_files_directories_and_links_share_one_namespace() -> None:
    doc = ign(
        storage={
            "files": [ign_file("/etc/a")],
            "directories": [{"path": "/etc/a"}],
            "links": [{"path": "/etc/a", "target": "/etc/b"}],
        }
    )
    found = errors(parse_ignition(doc))
    assert found == [
        ("storage.directories[0].path", 'duplicate path "/etc/a", already declared at storage.files[0].path'),
        ("storage.links[0].path", 'duplicate path "/etc/a", already declared at storage.files[0].path'),
    ]


# ---------------------------------------------------------------- contents


def test_plain_and_base64_data_urls_decode() -> None:
    files = [
        ign_file("/etc/plain", "hello world\n"),
        {"path": "/etc/b64", "contents": {"source": b64_url(b"\x00\x01binary")}},
        {"path": "/etc/empty"},
    ]
    result = parse_ignition(ign(files=files))
    assert result.config is not None
    assert [f.data for f in result.config.files] == [b"hello world\n", b"\x00\x01binary", b""]


def test_bad_base64_is_located_at_the_source() -> None:
    result = parse_ignition(
        ign(files=[{"path": "/etc/a", "contents": {"source": "data:;base64,!!!notbase64"}}])
    )
    assert result.stage == "validate"
    path, message = only_error(result)
    assert path == "storage.files[0].contents.source"
    assert message.startswith("could not decode contents of /etc/a: invalid data URL: invalid base64 data")


def test_gzip_contents_are_decompressed() -> None:
    entry = {
        "path": "/etc/a",
        "contents": {"source": b64_url(gzip.compress(b"zipped\n")), "compression": "gzip"},
    }
    result = parse_ignition(ign(files=[entry]))
    assert result.config is not None
    assert result.config.files[0].data == b"zipped\n"


def test_gzip_over_non_gzip_data_is_refused() -> None:
    entry = {"path": "/etc/a", "contents": {"source": data_url("not gzip"), "compression": "gzip"}}
    result = parse_ignition(ign(files=[entry]))
    path, message = only_error(result)
    assert path == "storage.files[0].contents.compression"
    assert message.startswith("could not decompress gzip contents of /etc/a: ")


def test_unknown_compression_is_refused() -> None:
    entry = {"path": "/etc/a", "contents": {"source": data_url("x"), "compression": "xz"}}
    assert only_error(parse_ignition(ign(files=[entry]))) == (
        "storage.files[0].contents.compression",
        'could not decode file "/etc/a": unsupported compression type "xz"',
    )


def test_empty_compression_means_none() -> None:
    entry = {"path": "/etc/a", "contents": {"source": data_url("x"), "compression": ""}}
    result = parse_ignition(ign(files=[entry]))
    assert result.config is not None
    assert result.config.files[0].data == b"x"


@pytest.mark.parametrize("kind", ["sha512", "sha256"])
def test_matching_hash_verifies(kind: str) -> None:
    digest = hashlib.new(kind, b"payload").hexdigest()
    entry = {
        "path": "/etc/a",
        "contents": {"source": data_url("payload"), "verification": {"hash": f"{kind}-{digest}"}},
    }
    assert parse_ignition(ign(files=[entry])).errors == ()


def test_hash_is_checked_on_the_decompressed_data() -> None:
    digest = hashlib.sha512(b"inner").hexdigest()
    entry = {
        "path": "/etc/a",
        "contents": {
            "source": b64_url(gzip.compress(b"inner")),
            "compression": "gzip",
            "verification": {"hash": f"sha512-{digest}"},
        },
    }
    assert parse_ignition(ign(files=[entry])).errors == ()


def test_sha512_mismatch() -> None:
    wrong = hashlib.sha512(b"other").hexdigest()
    got = hashlib.sha512(b"payload").hexdigest()
    entry = {
        "path": "/etc/a",
        "contents": {"source": data_url("payload"), "verification": {"hash": f"sha512-{wrong}"}},
    }
    assert only_error(parse_ignition(ign(files=[entry]))) == (
        "storage.files[0].contents.verification.hash",
        f"sha512 verification failed for /etc/a: contents hash to {got}, config expects {wrong}",
    )


@pytest.mark.parametrize("spec", ["md5-abc", "sha512", "nohash"])
def test_malformed_hash(spec: str) -> None:
    entry = {"path": "/etc/a", "contents": {"source": data_url("x"), "verification": {"hash": spec}}}
    path, message = only_error(parse_ignition(ign(files=[entry])))
    assert path == "storage.files[0].contents.verification.hash"
    assert message.startswith(f'invalid hash "{spec}" for /etc/a')


@pytest.mark.parametrize(
    "source",
    [
        "https://example.com/f",
        "http://example.com/f",
        "s3://bucket/key",
        "tftp://h/f",
        "gs://b/o",
        "HTTPS://x/y",
    ],
)
def test_remote_sources_are_refused(source: str) -> None:
    entry = {"path": "/etc/a", "contents": {"source": source}}
    path, message = only_error(parse_ignition(ign(files=[entry])))
    assert path == "storage.files[0].contents.source"
    scheme = source.split(":", maxsplit=1)[0].lower()
    assert message.startswith(f'unsupported source scheme "{scheme}" for /etc/a: ')
    assert "data: URL" in message


@pytest.mark.parametrize("source", ["file:///etc/x", "/etc/x", "relative"])
def test_non_data_local_sources_are_refused(source: str) -> None:
    entry = {"path": "/etc/a", "contents": {"source": source}}
    path, message = only_error(parse_ignition(ign(files=[entry])))
    assert path == "storage.files[0].contents.source"
    assert message == f'invalid source "{source}" for /etc/a: expected a data: URL'


def test_append_fragments_are_decoded_and_located() -> None:
    entry = {"path": "/etc/a", "append": [{"source": data_url("ok")}, {"source": "data:;base64,%%%"}]}
    path, _ = only_error(parse_ignition(ign(files=[entry])))
    assert path == "storage.files[0].append[1].source"


def test_all_semantic_errors_are_collected() -> None:
    files = [
        ign_file("rel"),
        ign_file("/etc/m", mode=0o4777),
        {"path": "/etc/s", "contents": {"source": "s3://b/k"}},
    ]
    found = [p for p, _ in errors(parse_ignition(ign(files=files)))]
    assert sorted(found) == [
        "storage.files[0].path",
        "storage.files[1].mode",
        "storage.files[2].contents.source",
    ]


# ---------------------------------------------------------------- the model


def test_file_fields() -> None:
    entry = ign_file("/etc/a", "x", mode=0o600, overwrite=True, user={"id": 0}, group={"name": "wheel"})
    result = parse_ignition(ign(files=[entry]))
    assert result.config is not None
    [f] = result.config.files
    assert f == File(
        path="/etc/a",
        mode=0o600,
        overwrite=True,
        user=NodeRef(id=0),
        group=NodeRef(name="wheel"),
        contents=Resource(source=data_url("x")),
    )
    assert f.data == b"x"


def test_file_equality_is_on_declarations_not_decoded_data() -> None:
    plain = parse_ignition(ign(files=[ign_file("/etc/a", "hi")])).config
    encoded = parse_ignition(
        ign(files=[{"path": "/etc/a", "mode": 420, "contents": {"source": b64_url(b"hi")}}])
    ).config
    assert plain is not None
    assert encoded is not None
    assert plain.files[0].data == encoded.files[0].data
    assert plain.files != encoded.files


def test_sections_the_daemon_does_not_write_are_kept_canonically() -> None:
    a = parse_ignition(ign(storage={"disks": [{"device": "/dev/sda", "wipeTable": False}]})).config
    b = parse_ignition(ign(storage={"disks": [{"wipeTable": False, "device": "/dev/sda"}]})).config
    empty = parse_ignition(ign(storage={"disks": []})).config
    assert a is not None
    assert b is not None
    assert empty is not None
    assert a.disks == b.disks
    assert a.disks is not None
    assert empty.disks is None


# ---------------------------------------------------------------- units and users


def test_units_and_dropins() -> None:
    doc = ign(
        systemd={
            "units": [
                {
                    "name": "a.service",
                    "enabled": True,
                    "contents": "[Unit]\n",
                    "dropins": [{"name": "10-x.conf"}],
                },
                {"name": "b.timer", "mask": True},
            ]
        }
    )
    result = parse_ignition(doc)
    assert result.config is not None
    a, b = result.config.units
    assert (a.name, a.enabled, a.contents, [d.name for d in a.dropins]) == (
        "a.service",
        True,
        "[Unit]\n",
        ["10-x.conf"],
    )
    assert (b.name, b.mask, b.enabled) == ("b.timer", True, None)


@pytest.mark.parametrize("name", ["noext", "a.conf", "dir/a.service", "a.servic"])
def test_bad_unit_name(name: str) -> None:
    result = parse_ignition(ign(systemd={"units": [{"name": name}]}))
    assert only_error(result) == ("systemd.units[0].name", f'invalid systemd unit name "{name}"')


@pytest.mark.parametrize(
    ("name", "why"),
    [("10-x.txt", "must end in .conf"), ("../../../x.conf", 'must be a file name, without "/"')],
)
def test_bad_dropin_name(name: str, why: str) -> None:
    result = parse_ignition(ign(systemd={"units": [{"name": "a.service", "dropins": [{"name": name}]}]}))
    assert only_error(result) == (
        "systemd.units[0].dropins[0].name",
        f'invalid systemd unit dropin name "{name}": {why}',
    )


def test_duplicate_unit_and_dropin() -> None:
    units = [
        {"name": "a.service", "dropins": [{"name": "x.conf"}, {"name": "x.conf"}]},
        {"name": "a.service"},
    ]
    assert errors(parse_ignition(ign(systemd={"units": units}))) == [
        ("systemd.units[0].dropins[1].name", 'duplicate dropin "x.conf", already declared at index 0'),
        ("systemd.units[1].name", 'duplicate unit "a.service", already declared at index 0'),
    ]


def test_users() -> None:
    users = [
        {"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "passwordHash": "$6$x"},
        {"name": "other", "uid": 1001, "groups": ["wheel"]},
    ]
    result = parse_ignition(ign(passwd={"users": users, "groups": [{"name": "g"}]}))
    assert result.config is not None
    core, other = result.config.users
    assert core.ssh_authorized_keys == ("k1", "k2")
    assert core.password_hash == "$6$x"
    assert core.extra is None
    assert other.extra is not None
    assert result.config.groups is not None


def test_negative_mode_message_is_readable() -> None:
    path, message = only_error(parse_ignition(ign(files=[ign_file("/etc/a", mode=-1)])))
    assert path == "storage.files[0].mode"
    assert "0-1" not in message
