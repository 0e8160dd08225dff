"""`@record` (mcd.config.record) behaves as `@dataclass(frozen=True)`: each check runs on a record
and on the same class declared as a frozen dataclass, and expects the same answer."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from mcd.config import record as rec

Decorator = Callable[..., Any]
DECORATORS: dict[str, tuple[Decorator, Decorator]] = {
    "dataclass": (lambda **kw: dataclasses.dataclass(frozen=True, **kw), dataclasses.field),
    "record": (rec.record, rec.field),
}


def _classes(kind: str) -> dict[str, type]:
    """The same declarations, decorated one way or the other."""
    deco, field = DECORATORS[kind]

    @deco()
    class Point:
        kind: ClassVar[str] = "point"
        x: int
        y: int = 0
        tags: tuple[str, ...] = field(default_factory=tuple)
        note: str = field(default="", compare=False, repr=False)

    @deco()
    class Other:
        x: int
        y: int = 0
        tags: tuple[str, ...] = ()
        note: str = ""

    @deco()
    class Empty:
        pass

    @deco()
    class Derived:
        a: int
        total: int = field(init=False, compare=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "total", self.a * 2)

    @deco(init=False)
    class Custom:
        name: str

        def __init__(self, raw: str) -> None:
            object.__setattr__(self, "name", raw.strip())

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Custom) and other.name.lower() == self.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

    @deco(eq=False)
    class Identity:
        v: int

    @deco()
    class Named:  # fields named as the compiled methods' own names
        self: int
        hash: str = "h"
        other: int = 0

    @deco()
    class Built:
        items: list[int] = field(default_factory=list)
        count: int = field(init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "count", len(self.items))

    classes = (Point, Other, Empty, Derived, Custom, Identity, Named, Built)
    return {c.__name__: c for c in classes}


def _each(check: Callable[[dict[str, type]], object]) -> None:
    answers = {kind: check(_classes(kind)) for kind in DECORATORS}
    assert answers["record"] == answers["dataclass"]


def _outcome(call: Callable[[], object]) -> object:
    try:
        return ("ok", call())
    except Exception as exc:
        return (type(exc).__name__, str(exc).replace("<locals>.", ""))


def test_construction_and_repr() -> None:
    def check(c: dict[str, type]) -> object:
        p = c["Point"]
        return [
            repr(p(1)),
            repr(p(1, 2, ("a",), "hidden")),
            repr(p(x=3, note="n")),
            repr(c["Empty"]()),
            repr(c["Derived"](4)),
            c["Derived"](4).total,
            c["Custom"]("  pad ").name,
            p.__match_args__,
            p.y,
            hasattr(p, "x"),
            hasattr(p, "tags"),
            p.kind,
            p.__init__.__qualname__.rsplit(".", 2)[-2:],
            repr(c["Named"](1, "x", 2)),
            repr(c["Named"](self=1)),
            repr(c["Built"]()),
            repr(c["Built"]([1, 2])),
            c["Built"]().items is not c["Built"]().items,
        ]

    _each(check)


def test_bad_arguments_fail_alike() -> None:
    def check(c: dict[str, type]) -> object:
        p = c["Point"]
        calls: list[Callable[[], object]] = [
            p,
            lambda: p(1, 2, (), "", 5),
            lambda: p(1, z=2),
            lambda: p(1, x=2),
            lambda: c["Derived"](1, 2),
            c["Named"],
            lambda: c["Built"](1, 2),
        ]
        return [_outcome(call) for call in calls]

    _each(check)


def test_equality_and_hash() -> None:
    def check(c: dict[str, type]) -> object:
        p, o = c["Point"], c["Other"]
        return [
            p(1) == p(1),
            p(1) == p(1, note="differs"),
            p(1) == p(2),
            p(1) != p(1, tags=("t",)),
            p(1) == o(1),
            p(1) == (1, 0, (), ""),
            hash(p(1)) == hash(p(1, note="other")),
            hash(p(1, 2)) == hash((1, 2, ())),
            c["Empty"]() == c["Empty"](),
            hash(c["Empty"]()) == hash(()),
            c["Derived"](1) == c["Derived"](1),
            c["Custom"]("A") == c["Custom"]("a"),
            hash(c["Custom"]("A")) == hash("a"),
            c["Identity"](1) == c["Identity"](1),
            c["Named"](1, "a") == c["Named"](1, "a"),
            hash(c["Named"](1, "a", 2)) == hash((1, "a", 2)),
            c["Built"]([1]) == c["Built"]([1]),
            bool(c["Empty"]()),
        ]

    _each(check)


def test_frozen() -> None:
    def check(c: dict[str, type]) -> object:
        p = c["Point"](1)
        return [
            _outcome(lambda: setattr(p, "x", 2)),
            _outcome(lambda: setattr(p, "new", 2)),
            _outcome(lambda: delattr(p, "x")),
            isinstance(_raised(lambda: setattr(p, "x", 2)), AttributeError),
            p.x,
        ]

    _each(check)


def _raised(call: Callable[[], object]) -> BaseException | None:
    try:
        call()
    except BaseException as exc:
        return exc
    return None


def test_dataclasses_functions_read_records() -> None:
    def check(c: dict[str, type]) -> object:
        p = c["Point"](1, 2, ("a",), "n")
        fields = dataclasses.fields(p)
        return [
            dataclasses.is_dataclass(p),
            [(f.name, f.init, f.repr, f.compare) for f in fields],
            [f.name for f in dataclasses.fields(c["Derived"])],
            repr(dataclasses.replace(p, y=5)),
            dataclasses.replace(p, y=5).note,
            dataclasses.asdict(p),
            dataclasses.astuple(p),
            repr(dataclasses.replace(c["Derived"](3), a=5)),
        ]

    _each(check)


def test_match_by_position_and_keyword() -> None:
    def check(c: dict[str, type]) -> object:
        p = c["Point"](1, 2)
        point = c["Point"]
        match p:
            case point(x, y):  # type: ignore[misc]
                positional = (x, y)
        match p:
            case point(tags=tags):  # type: ignore[misc]
                keyword = tags
        return positional, keyword

    _each(check)


@rec.record
class Picklable:
    a: int
    b: tuple[str, ...] = ()


def test_a_record_pickles() -> None:
    value = Picklable(1, ("x",))
    assert pickle.loads(pickle.dumps(value)) == value


def test_a_field_without_default_after_one_with_fails() -> None:
    with pytest.raises(TypeError):

        @rec.record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_both_defaults_fail() -> None:
    with pytest.raises(ValueError):
        rec.field(default=1, default_factory=int)


def test_its_own_fields_and_replace_answer_as_dataclasses_do() -> None:
    def check(c: dict[str, type], fields: Callable[..., Any], replace: Callable[..., Any]) -> object:
        p = c["Point"](1, 2, ("a",), "n")
        return [
            [f.name for f in fields(p)],
            [f.name for f in fields(c["Derived"])],
            repr(replace(p, y=5, note="m")),
            _outcome(lambda: replace(c["Derived"](1), total=3)),
            _outcome(lambda: replace(p, z=1)),
        ]

    mine = check(_classes("record"), rec.fields, rec.replace)
    theirs = check(_classes("dataclass"), dataclasses.fields, dataclasses.replace)
    assert mine == theirs
