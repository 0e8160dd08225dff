"""mcd.host.systemd.UnitWriter: upstream's unit writing order and results, against a recording manager."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mcd.config.ignition import Dropin, Unit
from mcd.host.root import HostRoot
from mcd.host.systemd import SystemdError
from mcd.host.units import PlainUnitFiles, UnitWriter
from mcd.planner.managed_paths import install_section

SERVICE = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
UNIT_DIR = "etc/systemd/system"


class FakeManager:
    """A SystemdManager that records calls (with the unit file's bytes at call time) and can fail."""

    def __init__(self, root: Path, states: dict[str, str] | None = None, known: Sequence[str] = ()) -> None:
        self.root = root
        self.states = dict(states or {})
        self.known = set(known)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.fail: dict[tuple[str, str], str] = {}  # (method, name) -> output
        self.seen_contents: dict[tuple[str, str], bytes | None] = {}

    def _record(self, method: str, names: Sequence[str]) -> None:
        self.calls.append((method, tuple(names)))
        for name in names:
            path = self.root / UNIT_DIR / name
            self.seen_contents[(method, name)] = path.read_bytes() if path.is_file() else None
            if (method, name) in self.fail:
                raise SystemdError(self.fail[(method, name)])

    def enable(self, names: Sequence[str]) -> None:
        self._record("enable", names)

    def disable(self, names: Sequence[str]) -> None:
        self._record("disable", names)

    def preset(self, name: str) -> None:
        self._record("preset", [name])

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        self.calls.append(("is_enabled", tuple(names)))
        return {n: self.states.get(n, "not-found") for n in names}

    def unit_file_known(self, name: str) -> bool:
        self.calls.append(("unit_file_known", (name,)))
        return name in self.known

    def daemon_reload(self) -> None:  # pragma: no cover - the writer never reloads
        raise AssertionError("the unit writer must not reload systemd")

    def reload(self, unit: str) -> None:  # pragma: no cover
        raise AssertionError("the unit writer must not reload units")

    def restart(self, unit: str) -> None:  # pragma: no cover
        raise AssertionError("the unit writer must not restart units")

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


@pytest.fixture
def root(tmp_path: Path) -> HostRoot:
    return HostRoot(tmp_path)


def unit_file(root: HostRoot, name: str) -> Path:
    return root.prefix / UNIT_DIR / name


def put(root: HostRoot, relpath: str, text: str) -> Path:
    path = root.prefix / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def snapshot(base: Path) -> dict[str, tuple[int, int, str | None]]:
    """(inode, mtime_ns, link target) of every entry under base: any rewrite changes it."""
    out: dict[str, tuple[int, int, str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[p] = (st.st_ino, st.st_mtime_ns, os.readlink(p) if os.path.islink(p) else None)
    return out


# --- unit files and enablement ------------------------------------------------------------------


def test_unit_with_contents_is_written_0644_and_enabled(root: HostRoot) -> None:
    manager = FakeManager(root.prefix)
    result = UnitWriter(root, manager).write_units([Unit("a.service", enabled=True, contents=SERVICE)])
    path = unit_file(root, "a.service")
    assert path.read_text() == SERVICE
    assert path.stat().st_mode & 0o777 == 0o644
    assert result.written == ("/etc/systemd/system/a.service",)
    assert result.enabled == ("a.service",)
    assert manager.calls == [("is_enabled", ("a.service",)), ("enable", ("a.service",))]


def test_enablement_is_one_enable_and_one_disable_call_at_the_end(root: HostRoot) -> None:
    manager = FakeManager(root.prefix)
    units = [
        Unit("a.service", enabled=True, contents=SERVICE),
        Unit("b.service", enabled=False, contents=SERVICE),
        Unit("c.service", enabled=True, contents=SERVICE),
        Unit("d.service", enabled=False, contents=SERVICE),
    ]
    result = UnitWriter(root, manager).write_units(units)
    assert manager.calls[-2:] == [
        ("enable", ("a.service", "c.service")),
        ("disable", ("b.service", "d.service")),
    ]
    assert manager.methods().count("enable") == 1
    assert manager.methods().count("disable") == 1
    # every unit file is on disk before systemd is asked to enable any of them
    assert all(manager.seen_contents[("enable", n)] == SERVICE.encode() for n in ("a.service", "c.service"))
    assert (result.enabled, result.disabled) == (("a.service", "c.service"), ("b.service", "d.service"))


def test_unset_enabled_runs_preset_per_unit(root: HostRoot) -> None:
    manager = FakeManager(root.prefix)
    result = UnitWriter(root, manager).write_units(
        [Unit("a.service", contents=SERVICE), Unit("b.service", contents=SERVICE)]
    )
    assert ("preset", ("a.service",)) in manager.calls
    assert ("preset", ("b.service",)) in manager.calls
    assert "enable" not in manager.methods()
    assert result.preset == ("a.service", "b.service")


def test_failed_preset_is_only_logged_and_the_others_still_run(
    root: HostRoot, caplog: pytest.LogCaptureFixture
) -> None:
    manager = FakeManager(root.prefix)
    manager.fail[("preset", "a.service")] = "Failed to preset unit, unit a.service does not exist."
    with caplog.at_level(logging.INFO, logger="mcd.host.units"):
        result = UnitWriter(root, manager).write_units(
            [Unit("a.service", dropins=(Dropin("x.conf", "[Unit]\n"),)), Unit("b.service", contents=SERVICE)]
        )
    assert result.preset_failed == ("a.service",)
    assert result.preset == ("b.service",)
    assert "Could not reset unit preset for a.service, skipping." in caplog.text


@pytest.mark.parametrize(("enabled", "action"), [(True, "enable"), (False, "disable")])
def test_enablement_without_contents_or_known_file_is_skipped(
    root: HostRoot, caplog: pytest.LogCaptureFixture, enabled: bool, action: str
) -> None:
    manager = FakeManager(root.prefix)
    with caplog.at_level(logging.INFO, logger="mcd.host.units"):
        result = UnitWriter(root, manager).write_units([Unit("ghost.service", enabled=enabled)])
    assert result.skipped == ("ghost.service",)
    assert action not in manager.methods()
    assert f'Could not {action} unit "ghost.service", because it has no contents, skipping' in caplog.text


@pytest.mark.parametrize(("enabled", "action"), [(True, "enable"), (False, "disable")])
def test_enablement_without_contents_applies_to_a_unit_file_systemd_knows(
    root: HostRoot, enabled: bool, action: str
) -> None:
    manager = FakeManager(root.prefix, known=["chronyd.service"])
    UnitWriter(root, manager).write_units([Unit("chronyd.service", enabled=enabled)])
    assert manager.calls == [("unit_file_known", ("chronyd.service",)), (action, ("chronyd.service",))]
    assert not unit_file(root, "chronyd.service").exists()


def test_changed_enabled_unit_is_disabled_before_its_file_is_replaced(root: HostRoot) -> None:
    old = put(root, f"{UNIT_DIR}/a.service", "[Install]\nWantedBy=old.target\n")
    manager = FakeManager(root.prefix, states={"a.service": "enabled", "b.service": "disabled"})
    result = UnitWriter(root, manager).write_units(
        [Unit("a.service", enabled=True, contents=SERVICE), Unit("b.service", enabled=True, contents=SERVICE)]
    )
    assert manager.calls == [
        ("is_enabled", ("a.service", "b.service")),
        ("disable", ("a.service",)),
        ("enable", ("a.service", "b.service")),
    ]
    # the disable saw the old [Install] section, the enable the new one
    assert manager.seen_contents[("disable", "a.service")] == b"[Install]\nWantedBy=old.target\n"
    assert manager.seen_contents[("enable", "a.service")] == SERVICE.encode()
    assert old.read_text() == SERVICE
    assert result.disabled_before_write == ("a.service",)


@pytest.mark.parametrize("state", ["disabled", "static", "masked", "enabled-runtime", "not-found"])
def test_only_the_enabled_state_triggers_the_disable_before_write(root: HostRoot, state: str) -> None:
    put(root, f"{UNIT_DIR}/a.service", "old\n")
    manager = FakeManager(root.prefix, states={"a.service": state})
    result = UnitWriter(root, manager).write_units([Unit("a.service", enabled=True, contents=SERVICE)])
    assert manager.methods() == ["is_enabled", "enable"]
    assert result.disabled_before_write == ()


def test_unchanged_unit_is_neither_queried_nor_disabled_nor_rewritten(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service", SERVICE).chmod(0o644)
    manager = FakeManager(root.prefix, states={"a.service": "enabled"})
    before = snapshot(root.prefix)
    result = UnitWriter(root, manager).write_units([Unit("a.service", enabled=True, contents=SERVICE)])
    assert manager.calls == [("enable", ("a.service",))]
    assert result.written == ()
    assert not result.files_changed
    assert snapshot(root.prefix) == before


def test_enable_failure_reports_upstream_text(root: HostRoot) -> None:
    manager = FakeManager(root.prefix)
    manager.fail[("enable", "a.service")] = "Failed to enable unit: boom"
    with pytest.raises(SystemdError, match=r"^error enabling units: Failed to enable unit: boom$"):
        UnitWriter(root, manager).write_units([Unit("a.service", enabled=True, contents=SERVICE)])


def test_disable_failure_reports_upstream_text(root: HostRoot) -> None:
    manager = FakeManager(root.prefix)
    manager.fail[("disable", "a.service")] = "Failed to disable unit: boom"
    with pytest.raises(SystemdError, match=r"^error disabling unit: Failed to disable unit: boom$"):
        UnitWriter(root, manager).write_units([Unit("a.service", enabled=False, contents=SERVICE)])


def test_failed_disable_before_write_stops_before_writing(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service", "old\n")
    manager = FakeManager(root.prefix, states={"a.service": "enabled"})
    manager.fail[("disable", "a.service")] = "Access denied"
    with pytest.raises(SystemdError, match=r"^disabling a\.service failed: Access denied$"):
        UnitWriter(root, manager).write_units([Unit("a.service", enabled=True, contents=SERVICE)])
    assert unit_file(root, "a.service").read_text() == "old\n"


# --- mask / unmask ------------------------------------------------------------------------------


def test_mask_links_to_dev_null_and_writes_no_contents(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service", "old\n")
    manager = FakeManager(root.prefix)
    result = UnitWriter(root, manager).write_units([Unit("a.service", mask=True, contents=SERVICE)])
    path = unit_file(root, "a.service")
    assert path.is_symlink()
    assert os.readlink(path) == "/dev/null"
    assert result.masked == ("a.service",)
    assert result.written == ()
    # masking is not a content change: no is-enabled query, no disable before write
    assert "is_enabled" not in manager.methods()


def test_mask_replaces_a_directory(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service/junk", "x")
    UnitWriter(root, FakeManager(root.prefix)).write_units([Unit("a.service", mask=True)])
    assert os.readlink(unit_file(root, "a.service")) == "/dev/null"


def test_mask_is_idempotent(root: HostRoot) -> None:
    writer = UnitWriter(root, FakeManager(root.prefix))
    writer.write_units([Unit("a.service", mask=True)])
    before = snapshot(root.prefix)
    result = writer.write_units([Unit("a.service", mask=True)])
    assert result.masked == ()
    assert snapshot(root.prefix) == before


def test_explicit_unmask_without_contents_removes_the_path(root: HostRoot) -> None:
    writer = UnitWriter(root, FakeManager(root.prefix))
    writer.write_units([Unit("a.service", mask=True)])
    result = writer.write_units([Unit("a.service", mask=False)])
    assert not os.path.lexists(unit_file(root, "a.service"))
    assert result.removed == ("/etc/systemd/system/a.service",)
    assert writer.write_units([Unit("a.service", mask=False)]).removed == ()


def test_unset_mask_without_contents_leaves_the_path(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service", "kept\n")
    UnitWriter(root, FakeManager(root.prefix)).write_units([Unit("a.service")])
    assert unit_file(root, "a.service").read_text() == "kept\n"


def test_contents_with_mask_false_replace_a_mask(root: HostRoot) -> None:
    writer = UnitWriter(root, FakeManager(root.prefix))
    writer.write_units([Unit("a.service", mask=True)])
    writer.write_units([Unit("a.service", mask=False, contents=SERVICE)])
    path = unit_file(root, "a.service")
    assert not path.is_symlink()
    assert path.read_text() == SERVICE


# --- dropins ------------------------------------------------------------------------------------


def test_dropins_are_written_0644_and_empty_ones_removed(root: HostRoot) -> None:
    stale = put(root, f"{UNIT_DIR}/a.service.d/20-empty.conf", "old\n")
    unit = Unit(
        "a.service",
        dropins=(
            Dropin("10-x.conf", "[Service]\nNice=5\n"),
            Dropin("20-empty.conf", ""),
            Dropin("30-none.conf"),
        ),
    )
    result = UnitWriter(root, FakeManager(root.prefix)).write_units([unit])
    written = root.prefix / UNIT_DIR / "a.service.d/10-x.conf"
    assert written.read_text() == "[Service]\nNice=5\n"
    assert written.stat().st_mode & 0o777 == 0o644
    assert not stale.exists()
    assert not (root.prefix / UNIT_DIR / "a.service.d/30-none.conf").exists()
    assert result.written == ("/etc/systemd/system/a.service.d/10-x.conf",)
    assert result.removed == ("/etc/systemd/system/a.service.d/20-empty.conf",)
    assert not unit_file(root, "a.service").exists()


def test_writes_and_removals_go_through_the_unit_file_operations(root: HostRoot) -> None:
    writes: list[tuple[str, bytes, int]] = []
    removals: list[str] = []

    def write_files(items: Sequence[tuple[str, bytes, int]]) -> list[bool]:
        writes.extend(items)  # one batch for the whole unit list
        return [True] * len(items)

    def remove_file(path: str, *, keep_unrecorded: bool = False) -> bool:
        removals.append(path)
        return False

    unit = Unit("a.service", contents=SERVICE, dropins=(Dropin("a.conf", "x"), Dropin("b.conf")))
    UnitWriter(root, FakeManager(root.prefix), Files(write_files, remove_file)).write_units([unit])
    assert writes == [
        ("/etc/systemd/system/a.service.d/a.conf", b"x", 0o644),
        ("/etc/systemd/system/a.service", SERVICE.encode(), 0o644),
    ]
    assert removals == ["/etc/systemd/system/a.service.d/b.conf"]
    assert list(root.prefix.iterdir()) == []


def test_second_run_writes_nothing(root: HostRoot) -> None:
    units = [
        Unit("a.service", enabled=True, contents=SERVICE, dropins=(Dropin("x.conf", "[Unit]\n"),)),
        Unit("b.service", mask=True),
        Unit("c.service", contents=SERVICE),
    ]
    manager = FakeManager(root.prefix)
    writer = UnitWriter(root, manager)
    assert writer.write_units(units).files_changed
    manager.states["a.service"] = "enabled"
    before = snapshot(root.prefix)
    second = writer.write_units(units)
    assert not second.files_changed
    assert second.disabled_before_write == ()
    assert snapshot(root.prefix) == before


# --- removed units ------------------------------------------------------------------------------


def test_remove_units_presets_then_disables_then_removes(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/gone.service", SERVICE)
    put(root, f"{UNIT_DIR}/gone.service.d/x.conf", "x")
    put(root, f"{UNIT_DIR}/kept.service", SERVICE)
    manager = FakeManager(root.prefix)
    old = [
        Unit("gone.service", enabled=True, contents=SERVICE, dropins=(Dropin("x.conf", "x"),)),
        Unit("kept.service", contents=SERVICE),
    ]
    result = UnitWriter(root, manager).remove_units(old, [Unit("kept.service", contents=SERVICE)])
    assert manager.calls == [("preset", ("gone.service",)), ("disable", ("gone.service",))]
    # both ran while the unit file still existed
    assert manager.seen_contents[("preset", "gone.service")] == SERVICE.encode()
    assert manager.seen_contents[("disable", "gone.service")] == SERVICE.encode()
    assert not unit_file(root, "gone.service").exists()
    assert not (root.prefix / UNIT_DIR / "gone.service.d/x.conf").exists()
    assert unit_file(root, "kept.service").exists()
    assert result.removed == (
        "/etc/systemd/system/gone.service.d/x.conf",
        "/etc/systemd/system/gone.service",
    )


def test_remove_units_removes_dropins_dropped_from_a_kept_unit(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service.d/old.conf", "x")
    put(root, f"{UNIT_DIR}/a.service.d/new.conf", "y")
    manager = FakeManager(root.prefix)
    UnitWriter(root, manager).remove_units(
        [Unit("a.service", dropins=(Dropin("old.conf", "x"), Dropin("new.conf", "y")))],
        [Unit("a.service", dropins=(Dropin("new.conf", "y"),))],
    )
    assert not (root.prefix / UNIT_DIR / "a.service.d/old.conf").exists()
    assert (root.prefix / UNIT_DIR / "a.service.d/new.conf").exists()
    assert manager.calls == []


def test_remove_units_preset_failure_is_logged_and_masks_are_not_disabled(
    root: HostRoot, caplog: pytest.LogCaptureFixture
) -> None:
    os.makedirs(root.prefix / UNIT_DIR)
    os.symlink("/dev/null", unit_file(root, "m.service"))
    manager = FakeManager(root.prefix)
    manager.fail[("preset", "m.service")] = "Unit m.service is masked"
    with caplog.at_level(logging.INFO, logger="mcd.host.units"):
        result = UnitWriter(root, manager).remove_units([Unit("m.service", mask=True)], [])
    assert manager.calls == [("preset", ("m.service",))]
    assert not os.path.lexists(unit_file(root, "m.service"))
    assert result.preset_failed == ("m.service",)
    assert "Did not restore preset for m.service (may not exist)" in caplog.text


def test_remove_units_presets_once_before_an_original_is_restored(root: HostRoot) -> None:
    """As upstream's deleteStaleData: one preset while the config's file is there, none after."""
    put(root, f"{UNIT_DIR}/os.service", "ours\n")

    def restore_original(path: str, *, keep_unrecorded: bool = False) -> bool:
        (root.prefix / path.lstrip("/")).write_text("original\n")
        return True

    manager = FakeManager(root.prefix)
    UnitWriter(root, manager, Files(remove=restore_original)).remove_units(
        [Unit("os.service", contents="ours\n")], []
    )
    assert manager.calls == [("preset", ("os.service",)), ("disable", ("os.service",))]
    assert manager.seen_contents[("preset", "os.service")] == b"ours\n"
    assert (root.prefix / UNIT_DIR.lstrip("/") / "os.service").read_text() == "original\n"


def test_remove_units_disable_failure_reports_upstream_text(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/gone.service", SERVICE)
    manager = FakeManager(root.prefix)
    manager.fail[("disable", "gone.service")] = "nope"
    with pytest.raises(SystemdError, match=r"^error disabling unit: nope$"):
        UnitWriter(root, manager).remove_units([Unit("gone.service", contents=SERVICE)], [])


# --- the disable before a rewrite: only when the [Install] section may change ---------------------

INSTALL_A = (
    "[Unit]\nDescription=a {tag}\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
)


def test_a_rewrite_keeping_the_install_section_needs_no_disable_first(root: HostRoot) -> None:
    put(root, f"{UNIT_DIR}/a.service", INSTALL_A.format(tag="old"))
    manager = FakeManager(root.prefix, states={"a.service": "enabled"})
    result = UnitWriter(root, manager).write_units(
        [Unit("a.service", enabled=True, contents=INSTALL_A.format(tag="new"))]
    )
    assert manager.calls == [("enable", ("a.service",))]
    assert result.disabled_before_write == ()
    assert result.written == (f"/{UNIT_DIR}/a.service",)


@pytest.mark.parametrize(
    ("old", "dropins", "on_disk_dropin"),
    [
        # a changed [Install] line
        (INSTALL_A.replace("multi-user", "graphical").format(tag="old"), (), None),
        # a second [Install] header is not the same section
        (INSTALL_A.format(tag="old") + "[Install]\n", (), None),
        # a dropin of the new config could add links
        (INSTALL_A.format(tag="old"), (Dropin("10.conf", "[Install]\nAlias=b.service\n"),), None),
        # a dropin on disk (about to be dropped or kept) could have made links
        (INSTALL_A.format(tag="old"), (), "[Install]\nAlso=c.service\n"),
    ],
    ids=["changed-line", "two-headers", "new-dropin", "dropin-on-disk"],
)
def test_the_disable_first_stays_when_the_links_may_change(
    root: HostRoot, old: str, dropins: tuple[Dropin, ...], on_disk_dropin: str | None
) -> None:
    put(root, f"{UNIT_DIR}/a.service", old)
    if on_disk_dropin is not None:
        put(root, f"{UNIT_DIR}/a.service.d/50-old.conf", on_disk_dropin)
    manager = FakeManager(root.prefix, states={"a.service": "enabled"})
    result = UnitWriter(root, manager).write_units(
        [Unit("a.service", enabled=True, contents=INSTALL_A.format(tag="new"), dropins=dropins)]
    )
    assert result.disabled_before_write == ("a.service",)


def test_install_section_ignores_comments_and_other_sections_only() -> None:
    base = b"[Unit]\nA=1\n[Install]\nWantedBy=x.target\n"
    assert install_section(base) == (b"[Install]", b"WantedBy=x.target")
    assert install_section(base.replace(b"A=1", b"A=2")) == install_section(base)
    assert install_section(base + b"# note\n; other\n") == install_section(base)
    assert install_section(base + b"\n") != install_section(base)  # a blank can end a continuation
    assert install_section(b"[Service]\nX=1\n") == ()
    assert install_section(base.replace(b"x.target", b"y.target")) != install_section(base)


class Files(PlainUnitFiles):
    """Plain unit file operations, with writes and removals replaced by the test's functions."""

    def __init__(
        self,
        write: Callable[[Sequence[tuple[str, bytes, int]]], list[bool]] | None = None,
        remove: Callable[..., bool] | None = None,
    ) -> None:
        self._write, self._remove = write, remove

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        assert self._write is not None
        return self._write([(p, d.encode() if isinstance(d, str) else d, m) for p, d, m in items])

    def remove_unit_path(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        assert self._remove is not None
        return self._remove(path, keep_unrecorded=keep_unrecorded)

    def remove_empty_dropin(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        return self.remove_unit_path(path, keep_unrecorded=keep_unrecorded)
