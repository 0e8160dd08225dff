"""`mcd start --once-from`, `mcd check-disk` and `mcd firstboot-complete-machineconfig` end to end.

Each test builds a sandbox root (/etc/passwd and /etc/group with core, /home/core), applies
MachineConfigs through `mcd.cli.main.main` in-process with the real `systemctl --root` (offline, no
running systemd needed) and compares the whole tree it walks with what the config describes.
Firstboot runs on a CoreOS sandbox with the rpm-ostree stand-in on PATH; the last section runs
the whole update with a RecordingRunner instead, to pin the exact systemctl calls.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import CORE_GID, CORE_UID, make_sandbox_root
from recording import RecordingRunner
from trees import Tree, walk

from mcd.cli.main import main
from mcd.cli.oncefrom import run_once_from
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.update.transaction import Host, UpdateError

commands = pytest.mark.allow_commands

STATE_DIR = "/etc/machine-config-daemon"
STAMP_SOURCE = f"{STATE_DIR}/noorig.stamp"
REBOOT_PENDING = f"{STATE_DIR}/reboot-pending"
UNITS = "/etc/systemd/system"
ORIGINAL_CHRONY = b"pool 2.fedora.pool.ntp.org iburst\n"
GROUP_ID = 4242  # not in /etc/group: numeric ids are used as given
INSTALL = "[Install]\nWantedBy=multi-user.target\n"
HELLO = f"[Unit]\nDescription=hello\n[Service]\nExecStart=/bin/true\n{INSTALL}"
QUIET = f"[Unit]\nDescription=quiet\n[Service]\nExecStart=/bin/true\n{INSTALL}"
OTHER = f"[Unit]\nDescription=other\n[Service]\nExecStart=/bin/true\n{INSTALL}"
MASKED = "[Unit]\nDescription=never runs\n[Service]\nExecStart=/bin/false\n"
HELLO_ENV = "[Service]\nEnvironment=HELLO=1\n"
CHRONY_DROPIN = "[Service]\nNice=5\n"

Entry = tuple[Any, ...]


def config_a() -> dict[str, Any]:
    """Files with every kind of owner and mode, units with dropins, a mask, enablement, SSH keys."""
    files: list[dict[str, Any]] = [
        {"path": "/etc/x", "mode": 0o644, "contents": {"source": data_url("hello\n")}},
        {
            "path": "/etc/app/secret.conf",
            "mode": 0o600,
            "user": {"name": "core"},
            "group": {"id": GROUP_ID},
            "contents": {"source": data_url("token=s3cret\n")},
        },
        {"path": "/etc/app/run.sh", "mode": 0o755, "contents": {"source": data_url("#!/bin/sh\ntrue\n")}},
        {
            "path": "/etc/chrony.conf",
            "mode": 0o644,
            "contents": {"source": data_url("server a.example.com\n")},
        },
    ]
    units: list[dict[str, Any]] = [
        {
            "name": "hello.service",
            "enabled": True,
            "contents": HELLO,
            "dropins": [{"name": "10-env.conf", "contents": HELLO_ENV}],
        },
        {"name": "quiet.service", "enabled": False, "contents": QUIET},
        {"name": "masked.service", "mask": True, "contents": MASKED},
        # a dropin for a unit the config does not ship (its preset fails: only logged)
        {"name": "chronyd.service", "dropins": [{"name": "20-nice.conf", "contents": CHRONY_DROPIN}]},
    ]
    return mc_object(
        "rendered-a", files=files, units=units, ssh_keys=["ssh-ed25519 AAAA a@example", "ssh-rsa BBBB b@ex"]
    )


def config_b() -> dict[str, Any]:
    """Keeps /etc/x (new content) and quiet.service, drops the rest of A, adds its own."""
    files: list[dict[str, Any]] = [
        {"path": "/etc/x", "mode": 0o640, "contents": {"source": data_url("hello from B\n")}},
        {"path": "/etc/b.conf", "contents": {"source": data_url("b\n")}},
    ]
    units = [
        {"name": "quiet.service", "enabled": False, "contents": QUIET},
        {"name": "other.service", "enabled": True, "contents": OTHER},
    ]
    return mc_object("rendered-b", files=files, units=units, ssh_keys=["ssh-ed25519 CCCC c@example"])


# --- helpers ------------------------------------------------------------------------------------


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """inode and mtime_ns of every path, directories and the root included: any write changes one."""
    out = {"/": (os.lstat(root).st_ino, os.lstat(root).st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out["/" + os.path.relpath(full, root)] = (st.st_ino, st.st_mtime_ns)
    return out


def f(text: str, mode: int = 0o644, uid: int = 0, gid: int = 0) -> Entry:
    return ("file", mode, uid, gid, text.encode())


def d(mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
    return ("dir", mode, uid, gid)


def split_state(tree: Tree) -> tuple[Tree, Tree]:
    """(the node's own tree, the daemon's bookkeeping under /etc/machine-config-daemon)."""
    own = {p: e for p, e in tree.items() if p != STATE_DIR and not p.startswith(STATE_DIR + "/")}
    return own, {p: e for p, e in tree.items() if p not in own}


def bookkeeping(config: dict[str, Any], stamped: list[str], dirs: list[str], got: Tree) -> Tree:
    """The expected /etc/machine-config-daemon: current config and image, one empty stamp per path,
    and the reboot the config needs (skipped, so still owed; a sandbox root has no boot id).

    The daemon may keep one empty file the stamps are hard links to (`got` says whether it does).
    """
    tree: Tree = {STATE_DIR: d(), f"{STATE_DIR}/noorig": d()}
    if STAMP_SOURCE in got:
        tree[STAMP_SOURCE] = f("")
    tree |= {f"{STATE_DIR}/noorig{p}": d() for p in dirs}
    tree |= {f"{STATE_DIR}/noorig{p}.mcdnoorig": f("") for p in stamped}
    tree[f"{STATE_DIR}/currentimage"] = f("")
    tree[f"{STATE_DIR}/currentconfig"] = ("json", config)
    name = config["metadata"]["name"]
    reason = f"Node will reboot into config {name}"
    tree[REBOOT_PENDING] = ("json", {"config": name, "reason": reason, "bootID": None})
    return tree


def with_config_parsed(tree: Tree) -> Tree:
    """currentconfig and the reboot record as JSON values (their byte layout is a detail)."""
    out = dict(tree)
    for key in (f"{STATE_DIR}/currentconfig", REBOOT_PENDING):
        entry = tree.get(key)
        if entry is not None:
            assert entry[:4] == ("file", 0o644, 0, 0), entry
            out[key] = ("json", json.loads(entry[4]))
    return out


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def write_config(where: Path, obj: dict[str, Any]) -> str:
    path = where / f"{obj['metadata']['name']}.json"
    path.write_text(json.dumps(obj))
    return str(path)


def _diff(got: Tree, want: Tree) -> str:
    lines = [
        f"{p}: got {got.get(p)!r:.120} want {want.get(p)!r:.120}"
        for p in sorted(set(got) | set(want))
        if got.get(p) != want.get(p)
    ]
    return "\n".join(lines[:30])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_sandbox_root(tmp_path / "root")


def apply(capsys: pytest.CaptureFixture[str], root: Path, config: str) -> dict[str, Any]:
    code, out, err = cli(capsys, "start", "--once-from", config, "--root-mount", str(root), "--skip-reboot")
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    return summary


A_TREE: Tree = {
    "/etc/x": f("hello\n"),
    "/etc/app": d(),
    "/etc/app/secret.conf": f("token=s3cret\n", 0o600, CORE_UID, GROUP_ID),
    "/etc/app/run.sh": f("#!/bin/sh\ntrue\n", 0o755),
    "/etc/chrony.conf": f("server a.example.com\n"),
    "/etc/systemd": d(),
    UNITS: d(),
    f"{UNITS}/hello.service": f(HELLO),
    f"{UNITS}/hello.service.d": d(),
    f"{UNITS}/hello.service.d/10-env.conf": f(HELLO_ENV),
    f"{UNITS}/quiet.service": f(QUIET),
    f"{UNITS}/masked.service": ("link", "/dev/null"),
    f"{UNITS}/chronyd.service.d": d(),
    f"{UNITS}/chronyd.service.d/20-nice.conf": f(CHRONY_DROPIN),
    f"{UNITS}/multi-user.target.wants": d(),
    f"{UNITS}/multi-user.target.wants/hello.service": ("link", f"{UNITS}/hello.service"),
    "/home/core/.ssh": d(0o700, CORE_UID, CORE_GID),
    "/home/core/.ssh/authorized_keys.d": d(0o700, CORE_UID, CORE_GID),
    "/home/core/.ssh/authorized_keys.d/ignition": f(
        "ssh-ed25519 AAAA a@example\nssh-rsa BBBB b@ex\n", 0o600, CORE_UID, CORE_GID
    ),
}
# every path the daemon wrote over nothing gets a stamp, the mask link too
A_STAMPED = [
    f"{UNITS}/masked.service",
    "/etc/x",
    "/etc/app/secret.conf",
    "/etc/app/run.sh",
    "/etc/chrony.conf",
    f"{UNITS}/hello.service",
    f"{UNITS}/hello.service.d/10-env.conf",
    f"{UNITS}/quiet.service",
    f"{UNITS}/chronyd.service.d/20-nice.conf",
]
A_STAMP_DIRS = [
    "/etc",
    "/etc/app",
    "/etc/systemd",
    UNITS,
    f"{UNITS}/hello.service.d",
    f"{UNITS}/chronyd.service.d",
]


# --- 1. a config on a bare root, then a no-op re-run ----------------------------------------------


@commands
def test_once_from_writes_exactly_what_the_config_describes(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = walk(root)
    config = write_config(tmp_path, config_a())
    summary = apply(capsys, root, config)
    assert summary["config"] == "rendered-a"
    assert summary["from"] == "mco-empty-mc"
    assert summary["reboot"] == {"required": True, "done": False}  # legacy actions: files change => reboot

    own, state = split_state(walk(root))
    assert own == base | A_TREE, _diff(own, base | A_TREE)
    want_state = bookkeeping(config_a(), A_STAMPED, A_STAMP_DIRS, state)
    assert with_config_parsed(state) == want_state, _diff(with_config_parsed(state), want_state)

    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    assert (code, out) == (0, "on-disk state matches rendered-a\n")


@commands
def test_second_identical_run_writes_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, config_a())
    apply(capsys, root, config)
    before = stamps(root)
    summary = apply(capsys, root, config)
    assert stamps(root) == before
    assert summary["from"] == "rendered-a"
    assert summary["changes"] == 0
    # the reboot the first run skipped is still owed, and said so
    assert summary["reboot"] == {"required": True, "done": False}
    assert summary["notes"] == ["reboot still pending"]


@commands
def test_the_recorded_config_is_the_json_text_read_and_a_rerun_sees_it_applied(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON MachineConfig is recorded as the text it was read as (any layout): the next run
    reads that record back as the same config."""
    text = json.dumps(config_a(), indent=2, sort_keys=True).encode()
    config = tmp_path / "a.json"
    config.write_bytes(b"\xef\xbb\xbf" + text)
    apply(capsys, root, str(config))
    assert (root / STATE_DIR.lstrip("/") / "currentconfig").read_bytes() == text
    before = stamps(root)
    assert apply(capsys, root, str(config))["changes"] == 0
    assert stamps(root) == before


@commands
def test_once_from_an_http_url(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps(config_b()).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/b.json" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/b.json"
            assert apply(capsys, root, url)["config"] == "rendered-b"
        finally:
            server.shutdown()
            thread.join()
    assert (root / "etc" / "b.conf").read_text() == "b\n"


# --- 2. B after A ---------------------------------------------------------------------------------


def sandbox_with_original(path: Path) -> Path:
    """A sandbox root whose /etc/chrony.conf pre-exists (an OS original A replaces), 0640 root:wheel."""
    r = make_sandbox_root(path)
    chrony = r / "etc" / "chrony.conf"
    chrony.write_bytes(ORIGINAL_CHRONY)
    chrony.chmod(0o640)
    os.chown(chrony, 0, 10)
    return r


@pytest.fixture
def root_with_original(tmp_path: Path) -> Path:
    return sandbox_with_original(tmp_path / "root")


@commands
def test_b_after_a_leaves_exactly_b(
    root_with_original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with_original
    base = walk(root)
    a, b = write_config(tmp_path, config_a()), write_config(tmp_path, config_b())
    apply(capsys, root, a)
    # A replaced the original: it is kept as the backup (same mode and owner) and not stamped
    backup = f"{STATE_DIR}/orig/etc/chrony.conf.mcdorig"
    assert walk(root)[backup] == base["/etc/chrony.conf"]
    assert not (root / f"{STATE_DIR}/noorig/etc/chrony.conf.mcdnoorig".lstrip("/")).exists()

    summary = apply(capsys, root, b)
    assert (summary["from"], summary["config"]) == ("rendered-a", "rendered-b")
    own, state = split_state(walk(root))
    want = base | {
        "/etc/x": f("hello from B\n", 0o640),
        "/etc/b.conf": f("b\n"),
        "/etc/systemd": d(),
        UNITS: d(),
        f"{UNITS}/quiet.service": f(QUIET),
        f"{UNITS}/other.service": f(OTHER),
        f"{UNITS}/multi-user.target.wants": d(),
        f"{UNITS}/multi-user.target.wants/other.service": ("link", f"{UNITS}/other.service"),
        "/home/core/.ssh": d(0o700, CORE_UID, CORE_GID),
        "/home/core/.ssh/authorized_keys.d": d(0o700, CORE_UID, CORE_GID),
        "/home/core/.ssh/authorized_keys.d/ignition": f(
            "ssh-ed25519 CCCC c@example\n", 0o600, CORE_UID, CORE_GID
        ),
    }
    # directories A created and B no longer needs stay, empty (as upstream: only files are pruned)
    leftover_dirs = {"/etc/app", f"{UNITS}/hello.service.d", f"{UNITS}/chronyd.service.d"}
    assert own == want | {p: d() for p in leftover_dirs}, _diff(own, want)
    assert all(not any((root / p.lstrip("/")).iterdir()) for p in leftover_dirs)

    # the original is back byte for byte with its mode and owner, and nothing of A's is recorded
    assert own["/etc/chrony.conf"] == ("file", 0o640, 0, 10, ORIGINAL_CHRONY)
    files_in_state = {p for p, e in state.items() if e[0] != "dir"} - {STAMP_SOURCE}
    assert files_in_state == {
        f"{STATE_DIR}/currentconfig",
        f"{STATE_DIR}/currentimage",
        REBOOT_PENDING,
        f"{STATE_DIR}/noorig/etc/x.mcdnoorig",
        f"{STATE_DIR}/noorig/etc/b.conf.mcdnoorig",
        f"{STATE_DIR}/noorig{UNITS}/quiet.service.mcdnoorig",
        f"{STATE_DIR}/noorig{UNITS}/other.service.mcdnoorig",
    }
    assert json.loads(state[f"{STATE_DIR}/currentconfig"][4]) == config_b()

    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    assert (code, out) == (0, "on-disk state matches rendered-b\n")


@commands
def test_b_after_a_equals_b_alone(
    root_with_original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file and link (directories aside) is as if A had never been applied."""
    a, b = write_config(tmp_path, config_a()), write_config(tmp_path, config_b())
    apply(capsys, root_with_original, a)
    apply(capsys, root_with_original, b)
    fresh = sandbox_with_original(tmp_path / "fresh")
    apply(capsys, fresh, b)

    def no_dirs(tree: Tree) -> Tree:
        return {p: e for p, e in tree.items() if e[0] != "dir"}

    got, want = no_dirs(walk(root_with_original)), no_dirs(walk(fresh))
    assert got == want, _diff(got, want)


# --- 3. check-disk finds drift ----------------------------------------------------------------------


def _edit(root: Path) -> None:
    with (root / "etc" / "x").open("a") as fh:
        fh.write("edited\n")


def _relink(path: Path, target: str) -> None:
    path.unlink()
    path.symlink_to(target)


def _replace_with_file(path: Path) -> None:
    path.unlink()
    path.write_text("[Unit]\n")
    path.chmod(0o644)


DRIFT = {
    "content": (_edit, 'content mismatch for file "/etc/x"'),
    "chmod-0600": (
        lambda r: (r / "etc" / "x").chmod(0o600),
        'mode mismatch for file: "/etc/x"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600',
    ),
    "chmod-0755": (
        lambda r: (r / "etc" / "x").chmod(0o755),
        'mode mismatch for file: "/etc/x"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755',
    ),
    "removed-file": (
        lambda r: (r / "etc" / "app" / "run.sh").unlink(),
        'could not stat file "/etc/app/run.sh": lstat /etc/app/run.sh: no such file or directory',
    ),
    "dropin": (
        lambda r: (r / UNITS.lstrip("/") / "hello.service.d" / "10-env.conf").write_text("[Service]\n"),
        f'content mismatch for file "{UNITS}/hello.service.d/10-env.conf"',
    ),
    "enablement-link-removed": (
        lambda r: (r / UNITS.lstrip("/") / "multi-user.target.wants" / "hello.service").unlink(),
        'unit "hello.service" expected enabled=true, but systemd reports "disabled"',
    ),
    "disabled-unit-enabled": (
        lambda r: (r / UNITS.lstrip("/") / "multi-user.target.wants" / "quiet.service").symlink_to(
            f"{UNITS}/quiet.service"
        ),
        'unit "quiet.service" expected enabled=false, but systemd reports "enabled"',
    ),
    "mask-relinked": (
        lambda r: _relink(r / UNITS.lstrip("/") / "masked.service", "/lib/systemd/system/masked.service"),
        f'state validation: invalid unit masked setting. path: "{UNITS}/masked.service"; '
        "expected: /dev/null; received: /lib/systemd/system/masked.service",
    ),
    "mask-replaced-by-file": (
        lambda r: _replace_with_file(r / UNITS.lstrip("/") / "masked.service"),
        f'state validation: invalid unit masked setting. path: "{UNITS}/masked.service"; '
        f"expected: /dev/null; received: {UNITS}/masked.service",
    ),
}


@commands
@pytest.mark.parametrize("case", list(DRIFT))
def test_check_disk_reports_drift(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    mutate, message = DRIFT[case]
    apply(capsys, root, write_config(tmp_path, config_a()))
    mutate(root)
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    assert code == 2
    assert out == f"unexpected on-disk state validating against rendered-a: {message}\n"


@commands
def test_check_disk_json_lists_every_problem(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(capsys, root, write_config(tmp_path, config_a()))
    _edit(root)
    (root / UNITS.lstrip("/") / "multi-user.target.wants" / "hello.service").unlink()
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root), "-o", "json")
    assert code == 2
    first = 'content mismatch for file "/etc/x"'
    assert json.loads(out) == {
        "config": "rendered-a",
        "clean": False,
        "errors": [first, 'unit "hello.service" expected enabled=true, but systemd reports "disabled"'],
        "reason": f"unexpected on-disk state validating against rendered-a: {first}",
    }
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    assert code == 2
    assert (
        out.splitlines()[1]
        == '  also: unit "hello.service" expected enabled=true, but systemd reports "disabled"'
    )


@commands
def test_check_disk_against_a_named_config(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(capsys, root, write_config(tmp_path, config_a()))
    b = write_config(tmp_path, config_b())
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root), b, "-o", "json")
    assert code == 2
    result = json.loads(out)
    assert result["config"] == "rendered-b"
    assert result["errors"][:2] == [
        'mode mismatch for file: "/etc/x"; expected: -rw-r-----/416/0640; received: -rw-r--r--/420/0644',
        'could not stat file "/etc/b.conf": lstat /etc/b.conf: no such file or directory',
    ]
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root), write_config(tmp_path, config_a()))
    assert (code, out) == (0, "on-disk state matches rendered-a\n")


def test_check_disk_without_a_recorded_config(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "check-disk", "--root-mount", str(root))
    assert (code, out) == (1, "")
    assert err == f"{STATE_DIR}/currentconfig: no config recorded on this node; name one\n"


# --- 6. firstboot ----------------------------------------------------------------------------------

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
ENCAPSULATED = "/etc/ignition-machine-config-encapsulated.json"
FB_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "c" * 64
FB_KARGS = ["nosmt", "systemd.unified_cgroup_hierarchy=1"]


@pytest.fixture
def coreos_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CoreOS sandbox root; `rpm-ostree` on PATH is the stand-in, with its state in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm-ostree").symlink_to(STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(tmp_path / "rpm-ostree.json"))
    for name in (
        "RPMOSTREE_STANDIN_FAIL",
        "RPMOSTREE_STANDIN_BOOTED_IMAGE",
        "RPMOSTREE_STANDIN_BOOTED_KARGS",
    ):
        monkeypatch.delenv(name, raising=False)
    return make_sandbox_root(tmp_path / "root", coreos=True)


def encapsulated() -> dict[str, Any]:
    """What the MCS leaves on a new node: the rendered config with its Ignition emptied."""
    return mc_object(
        "rendered-worker-1",
        ignition={"ignition": {"version": "3.5.0"}},
        osImageURL=FB_IMAGE,
        kernelArguments=FB_KARGS,
    )


def deployments(tmp_path: Path) -> list[dict[str, Any]]:
    state: dict[str, Any] = json.loads((tmp_path / "rpm-ostree.json").read_text())
    result: list[dict[str, Any]] = state["deployments"]
    return result


@commands
def test_firstboot_stages_the_image_and_kargs(
    coreos_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = coreos_root
    data = json.dumps(encapsulated()).encode()
    (root / ENCAPSULATED.lstrip("/")).write_bytes(data)
    base = walk(root)
    code, out, err = cli(
        capsys, "firstboot-complete-machineconfig", "--root-mount", str(root), "--skip-reboot"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["config"], summary["reboot"]) == ("rendered-worker-1", {"required": True, "done": False})

    staged, booted = deployments(tmp_path)
    assert (staged["staged"], booted["booted"]) == (True, True)
    assert staged["container-image-reference"] == f"ostree-unverified-registry:{FB_IMAGE}"
    assert staged["_kargs"] == booted["_kargs"] + FB_KARGS  # the booted ones plus the config's
    assert (
        booted["container-image-reference"]
        == "ostree-unverified-registry:quay.io/fedora/fedora-coreos:stable"
    )

    # the encapsulated config became .bak; the only other changes are the daemon's record and
    # rpm-ostree's pull secret link, made before the rebase
    tree = walk(root)
    bak = ENCAPSULATED + ".bak"
    assert tree[bak] == base[ENCAPSULATED]
    own, state = split_state(tree)
    link = {
        "/run/ostree": ("dir", 0o755, 0, 0),
        "/run/ostree/auth.json": ("link", "/var/lib/kubelet/config.json"),
    }
    assert own == {p: e for p, e in base.items() if p != ENCAPSULATED} | {bak: base[ENCAPSULATED]} | link
    assert with_config_parsed(state) == {
        STATE_DIR: d(),
        f"{STATE_DIR}/currentconfig": ("json", encapsulated()),
        f"{STATE_DIR}/currentimage": f(""),
        # --skip-reboot: the reboot into the staged deployment is still owed
        REBOOT_PENDING: (
            "json",
            {
                "config": "rendered-worker-1",
                "reason": "Node will reboot into config rendered-worker-1",
                "bootID": None,
            },
        ),
    }

    # after the reboot the node is in the config
    SubprocessRunner().run(["rpm-ostree", "standin-reboot"])
    code, out, _ = cli(capsys, "check-disk", "--root-mount", str(root))
    assert (code, out) == (0, "on-disk state matches rendered-worker-1\n")


@commands
def test_firstboot_renames_the_encapsulated_config_bak(
    coreos_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Upstream's one rename: the `.bak` is the very file the MCS wrote, never a copy of it."""
    path = coreos_root / ENCAPSULATED.lstrip("/")
    path.write_text(json.dumps(encapsulated()))
    inode = path.stat().st_ino
    argv = ["--root-mount", str(coreos_root), "--skip-reboot"]
    code, _, err = cli(capsys, "firstboot-complete-machineconfig", *argv)
    assert code == 0, err
    assert not path.exists()
    assert Path(f"{path}.bak").stat().st_ino == inode


@commands
def test_firstboot_on_a_node_already_in_the_config_only_deletes_the_file(
    coreos_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RPMOSTREE_STANDIN_BOOTED_IMAGE", FB_IMAGE)
    monkeypatch.setenv("RPMOSTREE_STANDIN_BOOTED_KARGS", "root=UUID=1234 rw " + " ".join(FB_KARGS))
    root = coreos_root
    (root / ENCAPSULATED.lstrip("/")).write_text(json.dumps(encapsulated()))
    base = walk(root)
    code, out, err = cli(
        capsys, "firstboot-complete-machineconfig", "--root-mount", str(root), "--skip-reboot"
    )
    assert code == 0, err
    assert json.loads(out) == {"applied": False}
    assert walk(root) == {p: e for p, e in base.items() if p != ENCAPSULATED}
    [booted] = deployments(tmp_path)
    assert booted["booted"] and not booted["staged"]
    state = json.loads((tmp_path / "rpm-ostree.json").read_text())
    assert {c["argv"][0] for c in state["standin"]["calls"]} <= {"status", "kargs"}
    assert all(c["argv"] in (["status", "--json"], ["kargs"]) for c in state["standin"]["calls"])


@commands
def test_firstboot_disables_and_removes_the_revert_service(
    coreos_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Left by a layered-image revert, it must not run again once the config is applied."""
    root = coreos_root
    (root / ENCAPSULATED.lstrip("/")).write_text(json.dumps(encapsulated()))
    units = root / UNITS.lstrip("/")
    (units / "multi-user.target.wants").mkdir(parents=True)
    (units / "machine-config-daemon-revert.service").write_text(OTHER)
    link = units / "multi-user.target.wants" / "machine-config-daemon-revert.service"
    link.symlink_to(f"{UNITS}/machine-config-daemon-revert.service")
    code, _, err = cli(capsys, "firstboot-complete-machineconfig", "--root-mount", str(root), "--skip-reboot")
    assert code == 0, err
    assert not os.path.lexists(link)  # disabled by the real systemctl --root
    assert not (units / "machine-config-daemon-revert.service").exists()


@commands
def test_firstboot_from_another_path_keeps_the_file(
    coreos_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the default encapsulated file is renamed to .bak (as upstream)."""
    root = coreos_root
    (root / "etc" / "mc.json").write_text(json.dumps(encapsulated()))
    argv = ["--root-mount", str(root), "--machineconfig-file", "/etc/mc.json", "--skip-reboot"]
    code, _, err = cli(capsys, "firstboot-complete-machineconfig", *argv)
    assert code == 0, err
    assert (root / "etc" / "mc.json").exists()
    assert not (root / "etc" / "mc.json.bak").exists()
    assert deployments(tmp_path)[0]["staged"]


# --- 7. the whole path with a RecordingRunner: exactly the systemctl calls the update makes -----------


def scripted(
    root: Path, *calls: tuple[tuple[str, ...], int, str, str]
) -> tuple[RecordingRunner, list[tuple[str, ...]]]:
    """A runner answering each `systemctl --root=<R> ARGS` once; returns it and the argv list expected."""
    runner = RecordingRunner()
    flag = f"--root={root.resolve()}"
    expected = []
    for args, returncode, stdout, stderr in calls:
        argv = ("systemctl", flag, *args)
        runner.expect(argv, returncode, stdout, stderr, times=1)
        expected.append(argv)
    return runner, expected


NO_CHRONYD = "Failed to preset unit: Unit file chronyd.service does not exist.\n"


def test_recorded_commands_of_a_then_a_again_then_b(root: Path, tmp_path: Path) -> None:
    """No real process runs here (no allow_commands): every command goes through the RecordingRunner."""
    a, b = write_config(tmp_path, config_a()), write_config(tmp_path, config_b())

    # offline, nothing is asked about units whose files the links settle: new units have no
    # link, so none is enabled now, and disabling quiet.service (no link to remove) runs nothing
    runner, expected = scripted(
        root,
        (("preset", "masked.service"), 0, "", ""),
        (("preset", "chronyd.service"), 1, "", NO_CHRONYD),  # a failed preset is only logged
        (("enable", "hello.service"), 0, "", ""),
    )
    outcome = run_once_from(Host.for_root(HostRoot(root), runner), a, skip_reboot=True)
    assert runner.commands == expected
    assert runner.pending() == []
    assert outcome.reboot and not outcome.rebooted
    assert (root / "etc" / "app" / "secret.conf").read_text() == "token=s3cret\n"
    assert os.readlink(root / "etc" / "systemd" / "system" / "masked.service") == "/dev/null"
    # what the recorded `enable hello.service` would have linked
    wants = root / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir()
    (wants / "hello.service").symlink_to("/etc/systemd/system/hello.service")

    # the same config again: one read-only drift check, nothing else
    runner, expected = scripted(
        root, (("is-enabled", "hello.service", "quiet.service"), 1, "enabled\ndisabled\n", "")
    )
    outcome = run_once_from(Host.for_root(HostRoot(root), runner), a, skip_reboot=True)
    assert runner.commands == expected
    assert outcome.notes == ("reboot still pending",)  # the first run skipped it

    # B: only the changed units are written; A's dropped units are preset, then disabled if theirs
    # (hello.service has a link to remove; quiet.service is unchanged and has none)
    runner, expected = scripted(
        root,
        (("enable", "other.service"), 0, "", ""),
        (("preset", "hello.service"), 0, "", ""),
        (("preset", "masked.service"), 0, "", ""),
        (("preset", "chronyd.service"), 1, "", NO_CHRONYD),
        (("disable", "hello.service"), 0, "", ""),
    )
    run_once_from(Host.for_root(HostRoot(root), runner), b, skip_reboot=True)
    assert runner.commands == expected
    assert runner.pending() == []
    assert not (root / "etc" / "systemd" / "system" / "hello.service").exists()


def test_an_unexpected_command_fails_the_run(root: Path, tmp_path: Path) -> None:
    runner = RecordingRunner()  # nothing scripted
    with pytest.raises(UpdateError, match=r"unexpected command: systemctl --root=\S+ "):
        run_once_from(
            Host.for_root(HostRoot(root), runner), write_config(tmp_path, config_a()), skip_reboot=True
        )
    assert runner.commands[0][:2] == ("systemctl", f"--root={root.resolve()}")


# --- 8. `mcd plan --root-mount DIR NEW` prints what `mcd start --once-from NEW` then runs --------------


def plan_then_start(capsys: pytest.CaptureFixture[str], root: Path, config: str) -> tuple[Any, Any]:
    code, out, err = cli(capsys, "plan", "--root-mount", str(root), config, "-o", "json")
    assert (code, err) == (0, "")
    planned = json.loads(out)
    summary = apply(capsys, root, config)
    ran = [{k: v for k, v in s.items() if k != "skipped"} for s in summary["steps"]]
    assert ran == planned["steps"]
    return planned, summary


@commands
def test_plan_on_the_root_is_what_start_runs(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = write_config(tmp_path, config_a()), write_config(tmp_path, config_b())
    planned, _ = plan_then_start(capsys, root, a)
    assert planned["old"] != "rendered-a"
    assert planned["mode"] == "legacy"  # the action table once-from uses, not the cluster's policy
    planned, summary = plan_then_start(capsys, root, b)
    assert planned["old"] == "rendered-a"
    kinds = [s["kind"] for s in summary["steps"]]
    assert "restore-original" in kinds or "remove-file" in kinds
    # applied: planning the same config again shows nothing left to do but the owed reboot
    _, out, _ = cli(capsys, "plan", "--root-mount", str(root), b, "-o", "json")
    assert [s["kind"] for s in json.loads(out)["steps"]] in ([], ["reboot"])


@commands
def test_a_unit_without_contents_is_not_enabled_in_the_plan_or_the_run(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path, mc_object("rendered-foo", units=[{"name": "foo.service", "enabled": True}])
    )
    planned, _ = plan_then_start(capsys, root, config)
    assert [s for s in planned["steps"] if s["kind"] == "enable"] == []
    assert planned["notes"] == ['Could not enable unit "foo.service", because it has no contents, skipping']
    assert [c[:2] for c in planned["commands"]] == [["systemd-run", "--unit"]]  # the legacy reboot only
    # without a node the plan cannot know, and says so
    _, out, _ = cli(capsys, "plan", "-", config, "-o", "json")
    unknown = json.loads(out)
    assert unknown["commands"][0] == ["systemctl", "enable", "foo.service"]
    assert "plan with --root-mount to know" in unknown["notes"][0]


def test_plan_on_a_root_takes_only_new(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = write_config(tmp_path, config_a()), write_config(tmp_path, config_b())
    code, _, err = cli(capsys, "plan", "--root-mount", str(root), a, b)
    assert code == 1
    assert "with --root-mount, OLD comes from the node: give only NEW" in err
    code, _, err = cli(capsys, "plan", "--root-mount", str(root), a, "--legacy")
    assert code == 1
    assert "--legacy comes from the node" in err
