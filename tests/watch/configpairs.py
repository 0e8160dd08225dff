"""Random pairs of configs for the drift monitor's tests: B mostly declares what A declares,
with a few items declared otherwise, dropped, added or moved."""

from __future__ import annotations

import copy
import random
from typing import Any

from builders import ign_file, mc_object
from hypothesis import strategies as st

from mcd.config.machineconfig import MachineConfig, machineconfig_from_object

DIRS = ("/etc/mcd-t", "/etc/mcd-t/sub", "/etc/mcd-t/sub/deep", "/etc/other", "/usr/local/mcd-t")
# a file where a unit or dropin of the pool goes: a config declaring both is refused
UNIT_DIR_FILES = ("/etc/systemd/system/mcd-t0.service", "/etc/systemd/system/mcd-t1.service.d/10-a.conf")
FILES = tuple(f"{d}/f{i}.conf" for d in DIRS for i in range(3)) + UNIT_DIR_FILES
UNITS = tuple(f"mcd-t{i}.service" for i in range(5))
# a seed per pair: hypothesis's own random draws lean to the first choices, a seeded Random
# spreads the pairs over every kind of change
SEEDS = st.integers(min_value=0, max_value=2**32)
DROPINS = ("10-a.conf", "20-b.conf")
DROPIN_TEXTS = ("", "[Service]\nEnvironment=X=1\n", "[Service]\nEnvironment=X=2\n")


def _file(rnd: random.Random, path: str) -> dict[str, Any]:
    return ign_file(path, rnd.choice(("a=1\n", "b=2\n", "")), mode=rnd.choice((420, 384, None)))


def unit(rnd: random.Random, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    for key, values in (("enabled", (True, False)), ("mask", (True, False))):
        if rnd.random() < 0.4:
            entry[key] = rnd.choice(values)
    if rnd.random() < 0.7:
        text = rnd.choice(("x", "y"))
        entry["contents"] = f"[Unit]\nDescription={text}\n[Install]\nWantedBy=multi-user.target\n"
    dropins = []
    for d in rnd.sample(DROPINS, rnd.randint(0, len(DROPINS))):
        dropin: dict[str, Any] = {"name": d}
        if rnd.random() < 0.7:
            dropin["contents"] = rnd.choice(DROPIN_TEXTS)
        dropins.append(dropin)
    if dropins:
        entry["dropins"] = dropins
    return entry


def _unit_again(rnd: random.Random, name: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """Unit `name` declared again: half the time with `old`'s dropins (their contents maybe not)."""
    new = unit(rnd, name)
    if old is not None and rnd.random() < 0.5:
        new.pop("dropins", None)
        dropins = [{**d, "contents": rnd.choice(DROPIN_TEXTS)} for d in old.get("dropins", ())]
        if dropins:
            new["dropins"] = dropins
    return new


def _file_again(rnd: random.Random, path: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    return _file(rnd, path)


def _mutate(
    rnd: random.Random, items: list[dict[str, Any]], key: str, make: Any, pool: tuple[str, ...]
) -> None:
    """Change, drop, add or move a few of `items` (most stay as they are)."""
    for i in range(len(items)):
        if rnd.random() < 0.25:
            items[i] = make(rnd, items[i][key], items[i])  # declared again: maybe alike, maybe not
    if items and rnd.random() < 0.1:
        del items[rnd.randrange(len(items))]
    unused = [p for p in pool if p not in {item[key] for item in items}]
    if unused and rnd.random() < 0.1:
        items.insert(rnd.randint(0, len(items)), make(rnd, rnd.choice(unused)))
    if len(items) > 1 and rnd.random() < 0.05:
        i, j = rnd.sample(range(len(items)), 2)
        items[i], items[j] = items[j], items[i]


def config_pair(rnd: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """Config objects A and B: B mostly declares what A declares."""
    files = [_file(rnd, p) for p in rnd.sample(FILES, rnd.randint(0, 8))]
    units = [unit(rnd, n) for n in rnd.sample(UNITS, rnd.randint(0, 4))]
    a = mc_object("rendered-a", files=files, units=units)
    files, units = copy.deepcopy(files), copy.deepcopy(units)
    _mutate(rnd, files, "path", _file_again, FILES)
    _mutate(rnd, units, "name", _unit_again, UNITS)
    return a, mc_object("rendered-b", files=files, units=units)


def parsed_pair(
    a_obj: dict[str, Any], b_obj: dict[str, Any], *, like: bool
) -> tuple[MachineConfig, MachineConfig] | None:
    """A, and B parsed like A (taking over the items declared alike) or on its own; None when
    either is not a valid config."""
    a = machineconfig_from_object(copy.deepcopy(a_obj), "A")
    if a.config is None:
        return None
    b = machineconfig_from_object(copy.deepcopy(b_obj), "B", like=a if like else None)
    return None if b.config is None else (a, b)
