"""Hostile MachineConfigs and roots: nothing may be written outside the root, and a refusal writes nothing.

Everything runs through `mcd start --once-from` in-process on sandbox roots. Refusals by the
parser run no command at all (these tests do not allow any); the rest use the real
`systemctl --root`.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import make_sandbox_root
from trees import Tree, walk

from mcd.cli.main import main

commands = pytest.mark.allow_commands

TXN = "/etc/machine-config-daemon/txn.json"
UNIT = "[Unit]\nDescription=u\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """inode and mtime_ns of every path, directories and the root included: any write changes one."""
    out = {"/": (os.lstat(root).st_ino, os.lstat(root).st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out["/" + os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_ino, st.st_mtime_ns)
    return out


class Sandbox:
    """A sandbox root, a directory beside it that plays "outside the root", and the CLI."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp_path
        self.capsys = capsys
        self.root = make_sandbox_root(tmp_path / "root")
        self.outside = tmp_path / "outside"
        self.outside.mkdir()

    def config(self, obj: dict[str, Any]) -> str:
        path = self.tmp / f"{obj['metadata']['name']}.json"
        path.write_text(json.dumps(obj))
        return str(path)

    def start(self, obj: dict[str, Any]) -> tuple[int, str, str]:
        code = main(
            ["start", "--once-from", self.config(obj), "--root-mount", str(self.root), "--skip-reboot"]
        )
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    def check_disk(self) -> int:
        code = main(["check-disk", "--root-mount", str(self.root)])
        self.capsys.readouterr()
        return code


@pytest.fixture
def box(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Sandbox:
    return Sandbox(tmp_path, capsys)


def file_mc(name: str, *files: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return mc_object(name, files=list(files), **extra)


def entry(path: str, text: str = "x\n", **extra: Any) -> dict[str, Any]:
    return {"path": path, "contents": {"source": data_url(text)}, **extra}


# --- refused by the parser: exit 1, located message, nothing run, nothing written -----------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/../../tmp/x", 'path "/etc/../../tmp/x" is not clean (want "/tmp/x")'),
        ("/etc/./x", 'path "/etc/./x" is not clean (want "/etc/x")'),
        ("/etc/x/", 'path "/etc/x/" is not clean (want "/etc/x")'),
        ("etc/x", 'path "etc/x" is not absolute'),
    ],
)
def test_unclean_paths_are_refused_before_anything_runs(box: Sandbox, path: str, message: str) -> None:
    before = stamps(box.root)
    code, out, err = box.start(file_mc("trav", entry("/etc/ok"), entry(path)))
    assert (code, out) == (1, "")
    assert err == f"{box.tmp / 'trav.json'}: spec.config.storage.files[1].path: {message}\n"
    assert stamps(box.root) == before
    assert list(box.outside.iterdir()) == []


def test_double_slash_message_names_the_clean_path(box: Sandbox) -> None:
    code, _, err = box.start(file_mc("slashes", entry("//etc/x")))
    assert code == 1
    assert err.endswith(': path "//etc/x" is not clean (want "/etc/x")\n')


@pytest.mark.parametrize("mode", [0o4755, 0o2755, 0o1777, 0o6755])
def test_special_mode_bits_are_refused(box: Sandbox, mode: int) -> None:
    before = stamps(box.root)
    code, _, err = box.start(file_mc("modes", entry("/usr/local/bin/tool", mode=mode)))
    assert code == 1
    assert err == (
        f"{box.tmp / 'modes.json'}: spec.config.storage.files[0].mode: "
        f"invalid mode 0{mode:o} for /usr/local/bin/tool, cannot exceed 0777\n"
    )
    assert stamps(box.root) == before


def test_writing_the_forcefile_is_unreconcilable(box: Sandbox) -> None:
    before = stamps(box.root)
    code, out, err = box.start(
        file_mc("force", entry("/etc/ok"), entry("/run/machine-config-daemon-force", ""))
    )
    assert (code, out) == (2, "")
    assert err == (
        "mcd: unreconcilable: can't reconcile config mco-empty-mc with force: "
        "configs mco-empty-mc, force are not reconcilable: "
        'new machineconfig "mco-empty-mc" is not reconcilable against "force": '
        "cannot create /run/machine-config-daemon-force via Ignition\n"
    )
    assert stamps(box.root) == before


# --- refused on the host: exit 1, clear message, nothing outside the root, the root as it was ------


def _escaping_parent(box: Sandbox) -> None:
    (box.root / "etc" / "evil").symlink_to("../../outside")  # root/etc/../../outside == tmp/outside


def _escaping_unit_dir(box: Sandbox) -> None:
    (box.root / "etc" / "systemd").mkdir()
    (box.root / "etc" / "systemd" / "system").symlink_to("../../../outside")


def _nothing(box: Sandbox) -> None:
    pass


HOST_REFUSALS = {
    "unknown-user": (
        _nothing,
        file_mc("nouser", entry("/etc/a"), entry("/etc/b", user={"name": "nobody2"})),
        "mcd: update to nouser refused, nothing was changed: "
        'failed to retrieve file ownership for file "/etc/b": '
        "failed to retrieve UserID for username: nobody2\n",
    ),
    "unknown-group": (
        _nothing,
        file_mc("nogroup", entry("/etc/a"), entry("/etc/b", group={"name": "wheel2"})),
        "mcd: update to nogroup refused, nothing was changed: "
        'failed to retrieve file ownership for file "/etc/b": '
        "failed to retrieve GroupID for group: wheel2\n",
    ),
    "escaping-parent-link": (
        _escaping_parent,
        file_mc("esc", entry("/etc/a"), entry("/etc/evil/x")),
        'mcd: update to esc refused, nothing was changed: cannot use path "/etc/evil/x": '
        "refusing /etc/evil*: symlink /etc/evil -> ../../outside leaves the root {root}\n",
    ),
    "escaping-unit-dir": (
        _escaping_unit_dir,
        mc_object(
            "unitesc",
            files=[entry("/etc/a")],
            units=[{"name": "u.service", "enabled": True, "contents": UNIT}],
        ),
        "*symlink /etc/systemd/system -> ../../../outside leaves the root {root}\n",
    ),
    "directory-at-path": (
        _nothing,
        # ("/" itself is refused by the parse already: tests/cli/test_cli_input.py)
        file_mc("slash", entry("/etc/a"), entry("/home")),
        'mcd: update to slash refused, nothing was changed: cannot write file "/home": it is a directory\n',
    ),
}


def _host_refusal_params(strict: bool) -> list[Any]:
    # every host refusal is found before anything is recorded (update() checks first)
    del strict
    return list(HOST_REFUSALS)


@commands
@pytest.mark.parametrize("case", _host_refusal_params(strict=False))
def test_host_refusal_leaves_the_root_as_it_was(box: Sandbox, case: str) -> None:
    prepare, config, message = HOST_REFUSALS[case]
    prepare(box)
    before = walk_files(box.root)
    code, out, err = box.start(config)
    assert (code, out) == (1, "")
    # `*`: the refused path may be named as given or as far as it was resolved
    head, _, tail = message.format(root=box.root).partition("*")
    last = err.splitlines()[-1] + "\n"
    assert last.startswith(head) and last.endswith(tail), last
    assert list(box.outside.iterdir()) == []
    after = walk_files(box.root)
    assert TXN not in after
    assert after == before  # every file and link as it was
    # and the node is not stuck: another config applies
    code, _, err = box.start(file_mc("benign", entry("/etc/fine")))
    assert code == 0, err


@commands
@pytest.mark.parametrize("case", _host_refusal_params(strict=True))
def test_host_refusal_writes_nothing_at_all(box: Sandbox, case: str) -> None:
    prepare, config, _ = HOST_REFUSALS[case]
    prepare(box)
    before = stamps(box.root)
    assert box.start(config)[0] == 1
    assert stamps(box.root) == before


# --- links inside the root: followed as if the root were / --------------------------------------------


@commands
def test_absolute_link_is_followed_inside_the_root(box: Sandbox) -> None:
    """/etc/evil -> <outside as an absolute path>: on the node that path is under the root, not beside it."""
    (box.root / "etc" / "evil").symlink_to(box.outside)
    code, _, err = box.start(file_mc("abs", entry("/etc/evil/x", "abs\n")))
    assert code == 0, err
    assert list(box.outside.iterdir()) == []
    assert (box.root / str(box.outside).lstrip("/") / "x").read_text() == "abs\n"
    assert os.readlink(box.root / "etc" / "evil") == str(box.outside)
    assert box.check_disk() == 0


@commands
def test_symlinked_parent_directories_inside_the_root(box: Sandbox) -> None:
    etc = box.root / "etc"
    (etc / "real.d").mkdir()
    (etc / "conf.d").symlink_to("real.d")
    (etc / "abs.d").symlink_to("/etc/real.d")
    (etc / "up.d").symlink_to("../etc/./real.d")
    config = file_mc(
        "links",
        entry("/etc/conf.d/a", "a\n"),
        entry("/etc/abs.d/b", "b\n", mode=0o600),
        entry("/etc/up.d/c", "c\n"),
    )
    code, _, err = box.start(config)
    assert code == 0, err
    assert sorted(p.name for p in (etc / "real.d").iterdir()) == ["a", "b", "c"]
    assert (etc / "real.d" / "b").read_text() == "b\n"
    assert stat.S_IMODE((etc / "real.d" / "b").stat().st_mode) == 0o600
    assert [os.readlink(etc / n) for n in ("conf.d", "abs.d", "up.d")] == [
        "real.d",
        "/etc/real.d",
        "../etc/./real.d",
    ]
    assert box.check_disk() == 0
    before = stamps(box.root)
    assert box.start(config)[0] == 0
    assert stamps(box.root) == before


@commands
def test_ssh_directory_linked_outside_is_replaced_not_followed(box: Sandbox) -> None:
    ssh = box.root / "home" / "core" / ".ssh"
    ssh.symlink_to("../../../outside")
    code, _, err = box.start(mc_object("keys", ssh_keys=["ssh-ed25519 AAAA k@example"]))
    assert code == 0, err
    assert list(box.outside.iterdir()) == []
    assert not ssh.is_symlink() and ssh.is_dir()
    assert (ssh / "authorized_keys.d" / "ignition").read_text() == "ssh-ed25519 AAAA k@example\n"


# --- a 100 MB file -----------------------------------------------------------------------------------

BIG = 100 << 20


def _write_big_config(path: Path) -> None:
    """A MachineConfig with a 100 MiB `data:,aaaa…` file, written in chunks (the test never holds it)."""
    head, tail = json.dumps(file_mc("big", {"path": "/var/big", "contents": {"source": "@"}})).split("@")
    chunk = "a" * (1 << 20)
    with path.open("w") as fh:
        fh.write(head.replace('"source": "', '"source": "data:,'))
        for _ in range(BIG // len(chunk)):
            fh.write(chunk)
        fh.write(tail)


def _in_child(argv: list[str], out: Path) -> tuple[int, int]:
    """Run the CLI in a forked child (its memory is its own); exit code and peak RSS in bytes."""
    pid = os.fork()
    if pid == 0:  # child: report through the exit code only
        code = 99
        try:
            with out.open("w") as fh:
                sys.stdout = sys.stderr = fh
                code = main(argv)
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    assert os.WIFEXITED(status), status
    return os.WEXITSTATUS(status), usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


@commands
def test_a_100_mib_file_is_written_correctly(box: Sandbox) -> None:
    config = box.tmp / "big.json"
    _write_big_config(config)
    log = box.tmp / "out.txt"
    argv = ["start", "--once-from", str(config), "--root-mount", str(box.root), "--skip-reboot"]
    code, peak = _in_child(argv, log)
    assert code == 0, log.read_text()[-2000:]
    big = box.root / "var" / "big"
    assert big.stat().st_size == BIG
    with big.open("rb") as fh:
        while block := fh.read(1 << 22):
            assert block.count(b"a") == len(block)
    # the content is held a few times over (JSON text, decoded bytes, the recorded config), not more
    assert peak < 12 * BIG, f"peak RSS {peak >> 20} MiB"
    code, peak = _in_child(["check-disk", "--root-mount", str(box.root)], log)
    assert (code, log.read_text()) == (0, "on-disk state matches big\n")
    assert peak < 12 * BIG, f"peak RSS {peak >> 20} MiB"


def walk_files(root: Path) -> Tree:
    return walk(root, dirs=False)
