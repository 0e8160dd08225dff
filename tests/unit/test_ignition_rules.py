"""Ignition's own checks, matched: sources outside storage.files, overwrite, headers, hashes,
and the value rules of the sections the daemon never writes (disks ... LUKS, links, proxies)."""

from __future__ import annotations

import base64
import gzip
from typing import Any

import pytest

from mcd.config.findings import format_path
from mcd.config.ignition import parse_ignition


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def findings(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((format_path(f.path), f.severity, f.message) for f in parse_ignition(doc).findings)


def config_section(**parts: Any) -> dict[str, Any]:
    return ign(ignition={"version": "3.5.0", **parts})


# ---------------------------------------------------------------- item 7: sources outside storage.files


@pytest.mark.parametrize("source", ["http://example.com/c.ign", "https://example.com/c.ign", "s3://b/c.ign"])
@pytest.mark.parametrize(
    ("parts", "where", "owner"),
    [
        ("merge", "ignition.config.merge[0].source", "ignition.config.merge[0]"),
        ("replace", "ignition.config.replace.source", "ignition.config.replace"),
        (
            "ca",
            "ignition.security.tls.certificateAuthorities[0].source",
            "ignition.security.tls.certificateAuthorities[0]",
        ),
    ],
)
def test_remote_sources_are_refused_wherever_they_are(
    source: str, parts: str, where: str, owner: str
) -> None:
    resource = {"source": source}
    section = {
        "merge": {"config": {"merge": [resource]}},
        "replace": {"config": {"replace": resource}},
        "ca": {"security": {"tls": {"certificateAuthorities": [resource]}}},
    }[parts]
    [(path, severity, message)] = findings(config_section(**section))
    scheme = source.split(":", 1)[0]
    assert (path, severity) == (where, "error")
    assert message.startswith(f'unsupported source scheme "{scheme}" for {owner}: the daemon cannot fetch')


def test_inline_sources_outside_storage_files_are_decoded_and_checked() -> None:
    good = "data:;base64," + base64.b64encode(gzip.compress(b"-----BEGIN CERTIFICATE-----\n")).decode()
    ok = config_section(
        security={"tls": {"certificateAuthorities": [{"source": good, "compression": "gzip"}]}}
    )
    assert findings(ok) == []
    bad = config_section(config={"merge": [{"source": "data:;base64,!!"}]})
    [(path, _, message)] = findings(bad)
    assert path == "ignition.config.merge[0].source"
    assert message.startswith("could not decode contents of ignition.config.merge[0]: invalid data URL")


def test_merge_and_ca_entries_need_a_source() -> None:
    doc = config_section(
        config={"merge": [{}]}, security={"tls": {"certificateAuthorities": [{"source": ""}]}}
    )
    assert findings(doc) == [
        ("ignition.config.merge[0]", "error", "source is required"),
        ("ignition.security.tls.certificateAuthorities[0]", "error", "source is required"),
    ]


def test_a_resource_compression_ignition_does_not_know() -> None:
    doc = config_section(config={"merge": [{"source": "data:,x", "compression": "xz"}]})
    assert findings(doc) == [("ignition.config.merge[0].compression", "error", "invalid compression method")]


# ---------------------------------------------------------------- item 11: files and resources


def test_overwrite_without_source() -> None:
    doc = ign(storage={"files": [{"path": "/etc/a", "overwrite": True}]})
    assert findings(doc) == [
        ("storage.files[0].overwrite", "error", "overwrite must be false if source is unspecified")
    ]
    doc = ign(storage={"files": [{"path": "/etc/a", "overwrite": False}]})
    assert findings(doc) == []


def test_verification_without_source() -> None:
    doc = ign(
        storage={"files": [{"path": "/etc/a", "contents": {"verification": {"hash": "sha512-" + "0" * 128}}}]}
    )
    assert findings(doc) == [
        (
            "storage.files[0].contents.verification.hash",
            "error",
            "source must be specified if verification is specified",
        )
    ]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("sha512", "malformed hash specifier"),
        ("md5-abc", "unrecognized hash function"),
        ("sha256-abc", "incorrect size for hash sum"),
    ],
)
def test_hash_specifiers(spec: str, problem: str) -> None:
    doc = ign(
        storage={
            "files": [{"path": "/etc/a", "contents": {"source": "data:,x", "verification": {"hash": spec}}}]
        }
    )
    [(path, _, message)] = findings(doc)
    assert path == "storage.files[0].contents.verification.hash"
    assert problem in message


def test_http_headers() -> None:
    contents = {"source": "data:,x", "httpHeaders": [{"name": "", "value": ""}]}
    doc = ign(storage={"files": [{"path": "/etc/a", "contents": contents}]})
    assert findings(doc) == [
        ("storage.files[0].contents.httpHeaders", "error", "cannot use HTTP headers with this source scheme"),
        ("storage.files[0].contents.httpHeaders[0].name", "error", "HTTP header name can't be empty"),
        ("storage.files[0].contents.httpHeaders[0].value", "error", "unable to parse HTTP header"),
    ]


# ---------------------------------------------------------------- item 11: sections the daemon never writes

RULES = [
    (
        {"storage": {"directories": [{"path": "/d", "mode": 0o10000}]}},
        [("storage.directories[0].mode", "error", "illegal file mode")],
    ),
    (
        {"storage": {"directories": [{"path": "/d", "mode": 0o1755}]}},
        [
            (
                "storage.directories[0].mode",
                "warning",
                "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0",
            )
        ],
    ),
    (
        {"storage": {"links": [{"path": "/l"}]}},
        [("storage.links[0].target", "error", "link target is required")],
    ),
    (
        {
            "storage": {
                "links": [{"path": "/l", "target": "/d", "hard": True, "user": {"id": 0}}],
                "directories": [{"path": "/d"}],
            }
        },
        [
            ("storage.links[0]", "error", "hard link target is a directory"),
            ("storage.links[0].user.id", "warning", "user/group ignored for hard link"),
        ],
    ),
    (
        {"storage": {"disks": [{"device": "dev/sda"}]}},
        [("storage.disks[0].device", "error", "path not absolute")],
    ),
    (
        {"storage": {"disks": [{"device": "/dev/sda", "partitions": [{"number": 1}, {"number": 1}]}]}},
        [
            ("storage.disks[0].partitions[1]", "error", "duplicate entry defined"),
            ("storage.disks[0].partitions[1]", "error", "partition numbers collide"),
        ],
    ),
    (
        {
            "storage": {
                "disks": [
                    {
                        "device": "/dev/sda",
                        "partitions": [
                            {"number": 1, "startMiB": 1, "sizeMiB": 10},
                            {"number": 2, "startMiB": 5, "sizeMiB": 10},
                        ],
                    }
                ]
            }
        },
        [("storage.disks[0].partitions[1]", "error", "partitions overlap")],
    ),
    (
        {
            "storage": {
                "disks": [{"device": "/dev/sda", "partitions": [{"label": "a:b", "guid": "nope"}, {}]}]
            }
        },
        [
            (
                "storage.disks[0].partitions[0].guid",
                "error",
                'doesn\'t match the form "01234567-89AB-CDEF-EDCB-A98765432101"',
            ),
            (
                "storage.disks[0].partitions[0].label",
                "error",
                "partition label will be truncated to text before the colon",
            ),
            (
                "storage.disks[0].partitions[1]",
                "error",
                "a partition number >= 1 or a label must be specified",
            ),
        ],
    ),
    (
        {
            "storage": {
                "filesystems": [
                    {"device": "/dev/sda1", "format": "ntfs"},
                    {"device": "/dev/sdb1", "path": "/var"},
                ]
            }
        },
        [
            ("storage.filesystems[0].format", "error", "invalid filesystem format"),
            (
                "storage.filesystems[1].format",
                "error",
                "format cannot be empty when path, label, uuid, wipeFilesystem, options, or mountOptions "
                "is specified",
            ),
        ],
    ),
    (
        {"storage": {"filesystems": [{"device": "/dev/sda1", "format": "xfs", "label": "a-label-too-long"}]}},
        [
            (
                "storage.filesystems[0].label",
                "error",
                "filesystem labels cannot be longer than 12 characters when using xfs",
            )
        ],
    ),
    (
        {
            "storage": {
                "raid": [
                    {"name": "md0", "level": "raid0", "spares": 1, "devices": ["/dev/a"]},
                    {"name": "md1", "level": "raid7"},
                ]
            }
        },
        [
            ("storage.raid[0].level", "error", "spares unsupported for linear and raid0 arrays"),
            ("storage.raid[1].devices", "error", "raid devices required"),
            ("storage.raid[1].level", "error", "unrecognized raid level"),
        ],
    ),
    (
        {
            "storage": {
                "luks": [{"name": "a/b", "clevis": {"tpm2": True, "custom": {"pin": "tpm2", "config": "{}"}}}]
            }
        },
        [
            (
                "storage.luks[0].clevis",
                "error",
                "cannot use custom clevis config with tpm2, tang, or threshold",
            ),
            ("storage.luks[0].device", "error", "disk device is required"),
            ("storage.luks[0].name", "error", "device names cannot contain slashes"),
        ],
    ),
    (
        {"storage": {"luks": [{"name": "r", "device": "/dev/a", "clevis": {"tang": [{"url": "ftp://t"}]}}]}},
        [
            ("storage.luks[0].clevis.tang[0].thumbprint", "error", "thumbprint is required"),
            ("storage.luks[0].clevis.tang[0].url", "error", "invalid url scheme"),
        ],
    ),
    (
        {"ignition": {"version": "3.5.0", "proxy": {"httpProxy": "socks5://p", "httpsProxy": "http://p"}}},
        [
            ("ignition.proxy.httpProxy", "error", "proxies must be http(s)"),
            (
                "ignition.proxy.httpsProxy",
                "warning",
                "insecure plaintext HTTP proxy specified for HTTPS resources",
            ),
        ],
    ),
    (
        {"kernelArguments": {"shouldExist": ["a"], "shouldNotExist": ["a"]}},
        [("kernelArguments.shouldNotExist[0]", "error", "duplicate entry defined")],
    ),
    (
        {
            "passwd": {
                "users": [{"name": "core", "sshAuthorizedKeys": ["k", "k"]}],
                "groups": [{"name": "g"}, {"name": "g"}],
            }
        },
        [
            ("passwd.groups[1]", "error", "duplicate entry defined"),
            ("passwd.users[0].sshAuthorizedKeys[1]", "error", "duplicate entry defined"),
        ],
    ),
]


@pytest.mark.parametrize(("sections", "expected"), RULES, ids=[f"rule{i}" for i in range(len(RULES))])
def test_ignition_value_rules(sections: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    assert findings(ign(**sections)) == sorted(expected)


def test_a_valid_storage_layout_has_no_findings() -> None:
    storage = {
        "disks": [{"device": "/dev/sdb", "wipeTable": True, "partitions": [{"label": "data", "number": 1}]}],
        "filesystems": [
            {"device": "/dev/disk/by-partlabel/data", "format": "xfs", "path": "/var/data", "label": "data"}
        ],
        "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/vda", "/dev/vdb"]}],
        "luks": [{"name": "root", "device": "/dev/vdc", "clevis": {"tpm2": True}}],
    }
    assert findings(ign(storage=storage)) == []


def test_spec2_append_sources_are_located_in_the_spec2_document() -> None:
    doc = {"ignition": {"version": "2.2.0", "config": {"append": [{"source": "https://x/y"}]}}}
    [(path, _, message)] = findings(doc)
    assert path == "ignition.config.append[0].source"
    assert message.startswith('unsupported source scheme "https" for ignition.config.merge[0]')
