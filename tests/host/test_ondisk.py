"""mcd.host.ondisk: on-disk verification with upstream's messages, Go FileMode rendering included."""

from __future__ import annotations

import base64
import gzip
import logging
import os
import stat
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from casefiles import case_params, load_cases
from trees import put

from mcd.config.ignition import Dropin, File, IgnitionConfig, Resource, Unit, parse_ignition
from mcd.host import ondisk
from mcd.host.accounts import Accounts
from mcd.host.files import FileWriter
from mcd.host.ondisk import check_config, first_error, format_go_mode, go_file_mode
from mcd.host.root import HostRoot
from mcd.host.units import UnitFiles


def link(base: Path, path: str, target: str) -> None:
    host = base / path.lstrip("/")
    host.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, host)


def cfg(files: tuple[File, ...] = (), units: tuple[Unit, ...] = ()) -> IgnitionConfig:
    return IgnitionConfig(version="3.5.0", files=files, units=units)


def f(path: str, text: str = "", mode: int | None = None) -> File:
    return File(path=path, mode=mode, data=text.encode())


# --- Go FileMode rendering ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("st_mode", "rendered"),
    [
        (stat.S_IFREG | 0o644, "-rw-r--r--/420/0644"),
        (stat.S_IFREG | 0o755, "-rwxr-xr-x/493/0755"),
        (stat.S_IFREG | 0o000, "----------/0/0"),
        (stat.S_IFLNK | 0o777, "Lrwxrwxrwx/134218239/01000000777"),
        (stat.S_IFDIR | 0o755, "drwxr-xr-x/2147484141/020000000755"),
        (stat.S_IFREG | stat.S_ISUID | 0o755, "urwxr-xr-x/8389101/040000755"),
        (stat.S_IFDIR | stat.S_ISVTX | 0o777, "dtrwxrwxrwx/2148532735/020004000777"),
        (stat.S_IFCHR | 0o666, "Dcrw-rw-rw-/69206454/0410000666"),
        (stat.S_IFIFO | 0o600, "prw-------/33554816/0200000600"),
    ],
)
def test_go_file_mode_rendering(st_mode: int, rendered: str) -> None:
    assert format_go_mode(go_file_mode(st_mode)) == rendered


# --- one file: the misc.json validate_file cases ----------------------------------------------------


@pytest.mark.parametrize("case", case_params(load_cases("misc.json", kind="validate_file")))
def test_validate_file_cases(tmp_path: Path, case: dict[str, Any]) -> None:
    spec = case["input"]
    path = spec["path"]
    mode = spec.get("expectedMode", 0o644)
    on_disk = spec["onDisk"]
    if on_disk == "symlink":
        put(tmp_path, "/etc/target", spec.get("expected", ""))
        link(tmp_path, path, "target")
    elif on_disk is not None:
        put(tmp_path, path, on_disk, mode)
    (tmp_path / "etc").mkdir(exist_ok=True)
    got = check_file(HostRoot(tmp_path), f(path, spec.get("expected", ""), mode))
    assert got == case["expected"]["error"]


def test_mode_mismatch_message(tmp_path: Path) -> None:
    put(tmp_path, "/etc/x", "a", 0o755)
    assert check_file(HostRoot(tmp_path), f("/etc/x", "a")) == (
        'mode mismatch for file: "/etc/x"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755'
    )


def test_matching_file_passes_and_owner_is_not_compared(tmp_path: Path) -> None:
    target = put(tmp_path, "/etc/x", "same", 0o600)
    os.chown(target, 1234, 4321)
    assert check_file(HostRoot(tmp_path), f("/etc/x", "same", 0o600)) is None


def test_directory_in_place_of_a_file(tmp_path: Path) -> None:
    (tmp_path / "etc/x").mkdir(parents=True)
    assert check_file(HostRoot(tmp_path), f("/etc/x")) == (
        'mode mismatch for file: "/etc/x"; expected: -rw-r--r--/420/0644; '
        "received: drwxr-xr-x/2147484141/020000000755"
    )


def test_size_mismatch_is_found_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put(tmp_path, "/etc/x", "longer contents")

    def no_read(path: Path) -> bytes:
        raise AssertionError("contents read although the size already differs")

    monkeypatch.setattr(ondisk, "read_bytes_nofollow", no_read)
    assert check_file(HostRoot(tmp_path), f("/etc/x", "short")) == 'content mismatch for file "/etc/x"'


def test_contents_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcd.host.ondisk")
    put(tmp_path, "/etc/secret", "hunter2-on-disk")
    assert check_file(HostRoot(tmp_path), f("/etc/secret", "hunter3-wanted!")) is not None
    assert "hunter" not in caplog.text
    assert "15 bytes" in caplog.text


def test_messages_show_config_paths_not_host_paths(tmp_path: Path) -> None:
    errors = check_config(HostRoot(tmp_path), cfg((f("/etc/a"), f("/etc/b"))))
    assert errors == [
        'could not stat file "/etc/a": lstat /etc/a: no such file or directory',
        'could not stat file "/etc/b": lstat /etc/b: no such file or directory',
    ]
    assert all(str(tmp_path) not in e for e in errors)


def test_missing_parent_directory_is_not_a_directory_error(tmp_path: Path) -> None:
    put(tmp_path, "/etc/plain", "x")
    assert check_file(HostRoot(tmp_path), f("/etc/plain/sub")) == (
        'could not stat file "/etc/plain/sub": lstat /etc/plain/sub: not a directory'
    )


def test_file_behind_a_symlinked_parent_is_checked_inside_the_root(tmp_path: Path) -> None:
    put(tmp_path, "/var/real/conf", "v")
    link(tmp_path, "/etc/conf.d", "/var/real")
    assert check_file(HostRoot(tmp_path), f("/etc/conf.d/conf", "v")) is None


def test_ignored_files_never_drift(tmp_path: Path) -> None:
    config = cfg(
        tuple(
            f(p, "anything")
            for p in [
                "/etc/kubernetes/kubelet-ca.crt",
                "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
                "/etc/mco/internal-registry-pull-secret.json",
            ]
        )
    )
    assert check_config(HostRoot(tmp_path), config) == []


def test_append_is_refused(tmp_path: Path) -> None:
    appended = File(path="/etc/a", append=(Resource("data:,x"),))
    assert check_file(HostRoot(tmp_path), appended) == (
        "found an append section when checking files. Append is not supported"
    )


# --- units and dropins --------------------------------------------------------------------------------

SYSD = "/etc/systemd/system"


def test_dropin_with_empty_contents(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    unit = Unit("a.service", dropins=(Dropin("10-empty.conf"), Dropin("20-empty.conf", "")))
    assert check_config(root, cfg(units=(unit,))) == []  # absent: the expected state
    put(tmp_path, f"{SYSD}/a.service.d/10-empty.conf", "")
    assert check_config(root, cfg(units=(unit,))) == []  # zero-length file: tolerated
    put(tmp_path, f"{SYSD}/a.service.d/20-empty.conf", "leftover")
    assert check_config(root, cfg(units=(unit,))) == [
        f'content mismatch for file "{SYSD}/a.service.d/20-empty.conf"'
    ]


def test_dropin_and_unit_contents_and_mode(tmp_path: Path) -> None:
    put(tmp_path, f"{SYSD}/a.service.d/10-x.conf", "[Service]\n", 0o600)
    put(tmp_path, f"{SYSD}/a.service", "[Unit]\nold\n")
    unit = Unit("a.service", contents="[Unit]\n", dropins=(Dropin("10-x.conf", "[Service]\n"),))
    assert check_config(HostRoot(tmp_path), cfg(units=(unit,))) == [
        f'mode mismatch for file: "{SYSD}/a.service.d/10-x.conf"; expected: -rw-r--r--/420/0644; '
        "received: -rw-------/384/0600",
        f'content mismatch for file "{SYSD}/a.service"',
    ]


def test_unit_without_contents_is_not_checked(tmp_path: Path) -> None:
    def never(names: Sequence[str]) -> Mapping[str, str]:
        assert list(names) == [], names
        return {}

    unit = Unit("sshd.service", enabled=True)
    assert check_config(HostRoot(tmp_path), cfg(units=(unit,)), never) == []


@pytest.mark.parametrize("contents", ["[Unit]\n", None], ids=["with-contents", "mask-only"])
def test_masked_unit(tmp_path: Path, contents: str | None) -> None:
    """Checked with or without contents (upstream skips a mask-only unit; mcd does not)."""
    root = HostRoot(tmp_path)
    unit = Unit("m.service", mask=True, contents=contents)
    path = f"{SYSD}/m.service"
    assert check_config(root, cfg(units=(unit,))) == [
        f'state validation: error while evaluation symlink for path "{path}": '
        f"lstat {path}: no such file or directory"
    ]
    put(tmp_path, path, "[Unit]\n")
    assert check_config(root, cfg(units=(unit,))) == [
        f'state validation: invalid unit masked setting. path: "{path}"; '
        f"expected: /dev/null; received: {path}"
    ]
    os.unlink(tmp_path / path.lstrip("/"))
    link(tmp_path, path, "/etc/elsewhere")
    assert check_config(root, cfg(units=(unit,))) == [
        f'state validation: invalid unit masked setting. path: "{path}"; '
        "expected: /dev/null; received: /etc/elsewhere"
    ]
    os.unlink(tmp_path / path.lstrip("/"))
    link(tmp_path, path, "/dev/null")
    assert check_config(root, cfg(units=(unit,))) == []


class States:
    """An injected is_enabled that records what it was asked."""

    def __init__(self, states: Mapping[str, str]) -> None:
        self.states = states
        self.asked: list[list[str]] = []

    def __call__(self, names: Sequence[str]) -> Mapping[str, str]:
        self.asked.append(list(names))
        return {n: self.states[n] for n in names if n in self.states}


@pytest.mark.parametrize(
    ("enabled", "state", "error"),
    [
        (True, "enabled", None),
        (True, "static", None),
        (True, "disabled", 'unit "u.service" expected enabled=true, but systemd reports "disabled"'),
        (True, "masked", 'unit "u.service" expected enabled=true, but systemd reports "masked"'),
        (
            True,
            "masked-runtime",
            'unit "u.service" expected enabled=true, but systemd reports "masked-runtime"',
        ),
        (True, None, 'unit "u.service" expected enabled=true, but systemd reports "not-found"'),
        (False, "disabled", None),
        (False, "enabled", 'unit "u.service" expected enabled=false, but systemd reports "enabled"'),
        (
            False,
            "enabled-runtime",
            'unit "u.service" expected enabled=false, but systemd reports "enabled-runtime"',
        ),
    ],
)
def test_enablement(tmp_path: Path, enabled: bool, state: str | None, error: str | None) -> None:
    put(tmp_path, f"{SYSD}/u.service", "[Unit]\n")
    states = States({"u.service": state} if state else {})
    config = cfg(units=(Unit("u.service", enabled=enabled, contents="[Unit]\n"),))
    assert check_config(HostRoot(tmp_path), config, states) == ([error] if error else [])
    assert states.asked == [["u.service"]]
    assert check_config(HostRoot(tmp_path), config, None) == []  # no checker: not checked


def test_first_error_stops_before_asking_systemd(tmp_path: Path) -> None:
    def boom(names: Sequence[str]) -> Mapping[str, str]:
        raise AssertionError("systemd asked although a file already drifted")

    config = cfg((f("/etc/missing"),), (Unit("u.service", enabled=True, contents="x"),))
    assert first_error(HostRoot(tmp_path), config, boom) == (
        'could not stat file "/etc/missing": lstat /etc/missing: no such file or directory'
    )


def test_enablement_is_asked_once_for_all_units(tmp_path: Path) -> None:
    units = tuple(Unit(f"u{i}.service", enabled=True, contents="x") for i in range(3))
    for u in units:
        put(tmp_path, f"{SYSD}/{u.name}", "x")
    states = States({u.name: "enabled" for u in units})
    assert check_config(HostRoot(tmp_path), cfg(units=units), states) == []
    assert states.asked == [["u0.service", "u1.service", "u2.service"]]


# --- the misc.json config_drift cases ----------------------------------------------------------------


def _drift_config(raw: dict[str, Any]) -> IgnitionConfig:
    files = []
    for entry in raw["files"]:
        text = entry["contents"].encode()
        if entry.get("compression") == "gzip":
            source = "data:;base64," + base64.b64encode(gzip.compress(text)).decode()
        else:
            source = "data:," + urllib.parse.quote(text)
        contents = {"source": source, **({"compression": "gzip"} if entry.get("compression") else {})}
        files.append({"path": entry["path"], "mode": entry["mode"], "contents": contents})
    doc = {"ignition": {"version": "3.5.0"}, "storage": {"files": files}, "systemd": {"units": raw["units"]}}
    result = parse_ignition(doc)
    assert result.config is not None, result.findings
    return result.config


def _write_state(base: Path, config: IgnitionConfig) -> None:
    """Lay the config down as the writers would: files, unit files, dropins, mask symlinks."""
    put(base, "/etc/passwd", "root:x:0:0::/root:/bin/sh\n")
    put(base, "/etc/group", "root:x:0:\n")
    root = HostRoot(base)
    w = FileWriter(root, Accounts.load(root), coreos=False)
    w.write_files(config.files)
    for u in config.units:
        for d in u.dropins:
            if d.contents:
                write_unit_file(w, f"{SYSD}/{u.name}.d/{d.name}", d.contents)
        if u.mask:
            link(base, f"{SYSD}/{u.name}", "/dev/null")
        elif u.contents:
            write_unit_file(w, f"{SYSD}/{u.name}", u.contents)


def _mutate(base: Path, path: str, action: str) -> None:
    host = base / path.lstrip("/")
    if action.startswith("update atime/mtime"):
        os.utime(host, (1, 1))
    elif action.startswith("rename path"):
        os.rename(host, host.with_name(host.name + ".old"))
    elif action.startswith("write different bytes"):
        tmp = host.with_name(".sibling.tmp")
        tmp.write_bytes(b"different bytes")
        os.chmod(tmp, 0o644)
        os.rename(tmp, host)
    elif action.startswith("chmod"):
        os.chmod(host, int(action.split()[1], 8))
    else:  # pragma: no cover - a new case kind
        raise AssertionError(f"unknown mutation {action!r}")


EXPECTED_FORM = {
    "rename": 'could not stat file "{p}": lstat {p}: no such file or directory',
    "write": 'content mismatch for file "{p}"',
    "chmod": 'mode mismatch for file: "{p}"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755',
}


@pytest.mark.parametrize("case", case_params(load_cases("misc.json", kind="config_drift")))
def test_config_drift_cases(tmp_path: Path, case: dict[str, Any]) -> None:
    config = _drift_config(case["input"]["machineConfig"])
    _write_state(tmp_path, config)
    root = HostRoot(tmp_path)
    assert check_config(root, config) == []
    path, action = case["input"]["mutate"]["path"], case["input"]["mutate"]["action"]
    _mutate(tmp_path, path, action)
    error = first_error(root, config)
    expected = case["expected"]
    if not expected["onDriftCalled"]:
        assert error is None
        return
    assert error == EXPECTED_FORM[action.split()[0]].format(p=path)
    # fileConfigDriftErr comes from storage.files, unitConfigDriftErr from units and dropins
    is_file = any(fl.path == path for fl in config.files)
    assert is_file == (expected["errorType"] == "fileConfigDriftErr")


def write_unit_file(w: FileWriter, path: str, contents: str | bytes, mode: int = 0o644) -> bool:
    """One unit file through the batch writer; False when it already held exactly this."""
    return UnitFiles(w.originals).write_unit_files([(path, contents, mode)])[0]


def check_file(root: HostRoot, f: File) -> str | None:
    """The drift of one file: the on-disk check of a config that declares only it."""
    return first_error(root, IgnitionConfig(version="3.5.0", files=(f,)))
