"""mcd.host.bootfiles: the first boot's leftovers retired with upstream's error texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcd.host import bootfiles
from mcd.host.root import HostRoot

ENCAPSULATED = "etc/ignition-machine-config-encapsulated.json"
PRESET = "etc/systemd/system-preset/20-ignition.preset"


def test_nothing_to_retire_is_no_change(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    root = HostRoot(tmp_path)
    assert not bootfiles.retire_encapsulated_config(root)
    assert not bootfiles.remove_ignition_preset(root)
    assert [p.name for p in tmp_path.rglob("*")] == ["etc"]


def test_a_dangling_link_is_left_as_upstreams_stat_leaves_it(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / ENCAPSULATED).symlink_to("/nowhere")
    assert not bootfiles.retire_encapsulated_config(HostRoot(tmp_path))
    assert (tmp_path / ENCAPSULATED).is_symlink()


def test_a_rename_that_fails_says_so_in_upstreams_words(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / ENCAPSULATED).write_text("{}")
    (tmp_path / (ENCAPSULATED + ".bak")).mkdir()  # in the way
    (tmp_path / (ENCAPSULATED + ".bak") / "x").write_text("")
    with pytest.raises(bootfiles.BootFileError) as failed:
        bootfiles.retire_encapsulated_config(HostRoot(tmp_path))
    assert str(failed.value).startswith(
        "failed to rename encapsulated MachineConfig after processing on firstboot: Is a directory: "
    )
    assert (tmp_path / ENCAPSULATED).read_text() == "{}"


def test_a_preset_that_cannot_be_removed_says_so_in_upstreams_words(tmp_path: Path) -> None:
    (tmp_path / PRESET).mkdir(parents=True)
    with pytest.raises(bootfiles.BootFileError) as failed:
        bootfiles.remove_ignition_preset(HostRoot(tmp_path))
    assert str(failed.value).startswith("failed to remove Ignition-written systemd preset file: ")
