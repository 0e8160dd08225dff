"""A parse that takes files and units over from an earlier one (`mcd.config.reuse`): the same
outcome as a parse from scratch, findings included, with the unchanged items the very same
objects. Pure: no I/O."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from mcd.config.ignition import IgnitionResult, ParseOptions, parse_ignition
from mcd.config.machineconfig import machineconfig_from_object
from mcd.config.reuse import same_json

Doc = dict[str, Any]


def _doc(files: int = 5) -> Doc:
    return {
        "ignition": {"version": "3.4.0"},
        "storage": {
            "files": [
                {
                    "path": f"/etc/app/f{i}.conf",
                    "mode": 420,
                    "overwrite": True,
                    "contents": {"source": f"data:,v{i}"},
                }
                for i in range(files)
            ]
        },
        "systemd": {
            "units": [
                {
                    "name": "a.service",
                    "enabled": True,
                    "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
                    "dropins": [{"name": "10-x.conf", "contents": "[Service]\nEnvironment=X=1\n"}],
                }
            ]
        },
    }


def _parse_like(earlier_doc: Doc, doc: Doc) -> tuple[IgnitionResult, IgnitionResult, IgnitionResult]:
    """(earlier, `doc` parsed from scratch, `doc` parsed taking over from earlier)."""
    earlier = parse_ignition(copy.deepcopy(earlier_doc))
    return (
        earlier,
        parse_ignition(copy.deepcopy(doc)),
        parse_ignition(copy.deepcopy(doc), earlier=(earlier_doc, earlier)),
    )


def _set(where: str, value: object) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        *parents, last = where.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return change


CHANGES = {
    "one file's contents": _set("storage.files.2.contents.source", "data:,changed"),
    "a mode written as a float": _set("storage.files.1.mode", 420.0),
    "overwrite written as a number": _set("storage.files.1.overwrite", 1),
    "a path declared twice": lambda d: d["storage"]["files"].append(copy.deepcopy(d["storage"]["files"][0])),
    "a file below another file": lambda d: d["storage"]["files"].append(
        {"path": "/etc/app/f0.conf/x", "contents": {"source": "data:,"}}
    ),
    "a unit's dropin": _set("systemd.units.0.dropins.0.contents", "[Service]\nEnvironment=X=2\n"),
    "a unit enabled as 1": _set("systemd.units.0.enabled", 1),
    "a file where a unit goes": lambda d: d["storage"]["files"].append(
        {"path": "/etc/systemd/system/a.service", "contents": {"source": "data:,"}}
    ),
    "an unknown key": _set("storage.files.3.colour", "blue"),
    "files reordered": lambda d: d["storage"]["files"].reverse(),
    # the list as a whole differs, so each item is matched alone: its types still count
    "a float mode beside a changed file": lambda d: (
        _set("storage.files.1.mode", 420.0)(d),
        _set("storage.files.2.contents.source", "data:,changed")(d),
    ),
    "one file's keys in another order, another changed": lambda d: (
        d["storage"]["files"].__setitem__(1, dict(reversed(list(d["storage"]["files"][1].items())))),
        _set("storage.files.2.contents.source", "data:,changed")(d),
    ),
    "nothing": lambda d: None,
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_taking_over_gives_the_outcome_of_a_parse_from_scratch(change: Callable[[Doc], None]) -> None:
    before = _doc()
    after = copy.deepcopy(before)
    change(after)
    _, cold, warm = _parse_like(before, after)
    assert (warm.config, warm.findings, warm.stage) == (cold.config, cold.findings, cold.stage)
    assert (warm.partial) == (cold.partial)


# a document of several runs of items (mcd.config.reuse compares runs of 64 at once)
LARGE = 300
CHANGES_LARGE = {
    "one file's contents": _set("storage.files.150.contents.source", "data:,changed"),
    "a float mode in a run otherwise alike": lambda d: (
        _set("storage.files.10.mode", 420.0)(d),
        _set("storage.files.200.contents.source", "data:,changed")(d),
    ),
    "overwrite as a number, another run changed": lambda d: (
        _set("storage.files.70.overwrite", 1)(d),
        _set("storage.files.299.contents.source", "data:,changed")(d),
    ),
    "a path declared twice in place of another": lambda d: d["storage"]["files"].__setitem__(
        130, copy.deepcopy(d["storage"]["files"][5])
    ),
    "a file moved below another file": _set("storage.files.250.path", "/etc/app/f3.conf/x"),
    "a path turned into a unit's": _set("storage.files.64.path", "/etc/systemd/system/a.service"),
    "a path unsafe": _set("storage.files.190.path", "/etc/app/../../x"),
    "the files rotated across runs": lambda d: d["storage"]["files"].__setitem__(
        slice(None), [*d["storage"]["files"][200:], *d["storage"]["files"][:200]]
    ),
    "a file removed": lambda d: d["storage"]["files"].pop(100),
    "keys in another order, a content changed": lambda d: (
        d["storage"]["files"].__setitem__(65, dict(reversed(list(d["storage"]["files"][65].items())))),
        _set("storage.files.2.contents.source", "data:,changed")(d),
    ),
    "a directory added under a file": lambda d: (
        d["storage"].__setitem__("directories", [{"path": "/etc/app/f7.conf"}]),
        _set("storage.files.3.contents.source", "data:,changed")(d),
    ),
}


@pytest.mark.parametrize("change", CHANGES_LARGE.values(), ids=list(CHANGES_LARGE))
def test_taking_over_runs_of_items_gives_the_outcome_of_a_parse_from_scratch(
    change: Callable[[Doc], None],
) -> None:
    before = _doc(LARGE)
    after = copy.deepcopy(before)
    change(after)
    _, cold, warm = _parse_like(before, after)
    assert (warm.config, warm.findings, warm.stage) == (cold.config, cold.findings, cold.stage)
    assert (warm.partial) == (cold.partial)


def test_runs_alike_are_taken_over_and_the_rest_by_name() -> None:
    before = _doc(LARGE)
    after = copy.deepcopy(before)
    _set("storage.files.150.contents.source", "data:,changed")(after)
    _set("storage.files.10.mode", 420.0)(after)  # equal in Python, not as JSON: parsed again
    earlier = parse_ignition(copy.deepcopy(before))
    warm = parse_ignition(after, earlier=(before, earlier))
    assert earlier.config is not None and warm.findings  # the float mode is refused
    pairs = zip(after["storage"]["files"], before["storage"]["files"], strict=True)
    assert [i for i, (new, old) in enumerate(pairs) if new is not old] == [10, 150]


def test_unchanged_files_and_units_are_the_earlier_objects() -> None:
    before = _doc()
    after = copy.deepcopy(before)
    _set("storage.files.2.contents.source", "data:,changed")(after)
    earlier, _, warm = _parse_like(before, after)
    assert earlier.config is not None and warm.config is not None
    same = [new is old for new, old in zip(warm.config.files, earlier.config.files, strict=True)]
    assert same == [True, True, False, True, True]
    assert warm.config.units[0] is earlier.config.units[0]
    assert warm.config.files[2].data == b"changed"


def test_the_new_document_shares_the_decoded_json_of_what_it_takes_over() -> None:
    """Two configs alive at once (the one on disk and the one held for the next update) cost
    what differs between them, not a second copy of every decoded file."""
    before = _doc()
    after = copy.deepcopy(before)
    _set("storage.files.2.contents.source", "data:,changed")(after)
    _set("storage.files.4.mode", 420.0)(after)  # equal in Python, not as JSON: not shared
    parse_ignition(after, earlier=(before, parse_ignition(before)))
    files = zip(after["storage"]["files"], before["storage"]["files"], strict=True)
    shared = [new is old for new, old in files]
    assert shared == [True, True, False, True, False]
    assert after["systemd"]["units"][0] is before["systemd"]["units"][0]
    assert after["storage"]["files"][2]["contents"]["source"] == "data:,changed"


def test_nothing_is_taken_from_a_parse_with_findings_or_other_options() -> None:
    before = _doc()
    _set("storage.files.4.colour", "blue")(before)  # a warning: that parse is not reused
    earlier, _, warm = _parse_like(before, before)
    assert earlier.findings and warm.config is not None and earlier.config is not None
    assert warm.config.files[0] is not earlier.config.files[0]
    clean = _doc()
    first = parse_ignition(copy.deepcopy(clean))
    other = parse_ignition(copy.deepcopy(clean), ParseOptions(keep_data_up_to=0), earlier=(clean, first))
    assert other.config is not None and first.config is not None
    assert other.config.files[0] is not first.config.files[0]
    assert other.config.files[0].kept is False  # parsed with its own options


def test_a_machineconfig_like_another_takes_over_its_items() -> None:
    def mc(doc: Doc, name: str) -> dict[str, Any]:
        return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": name}, "spec": {"config": doc}}  # fmt: skip

    old = machineconfig_from_object(mc(_doc(), "rendered-1"), "old")
    new = machineconfig_from_object(mc(_doc(), "rendered-2"), "new", like=old)
    assert new.config is not None and old.config is not None
    assert new.config.files[0] is old.config.files[0]
    assert new.config == machineconfig_from_object(mc(_doc(), "rendered-2"), "new").config


def test_same_json_tells_numbers_and_booleans_apart() -> None:
    assert same_json({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]})
    assert not same_json({"a": 1}, {"a": True})
    assert not same_json({"a": [420]}, {"a": [420.0]})
    assert not same_json({"a": {"b": 0}}, {"a": {"b": False}})
    assert not same_json({"a": 1}, {"a": 1, "b": None})
