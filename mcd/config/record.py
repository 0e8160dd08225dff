"""`@record`: a frozen dataclass that costs a short command's start-up next to nothing. Pure.

`dataclasses.dataclass(frozen=True)` compiles six methods per class at import and needs
`dataclasses` itself (inspect, ast, dis, tokenize): about 35 ms of `mcd plan`'s start for the
pure core's sixty classes (issue 30). A record behaves as such a dataclass does (the same
`__init__` signature, defaults and `field(default_factory=…, init=…, repr=…, compare=…)`,
`__post_init__`, `__eq__` on the compared fields of the same class, `__hash__`, `__repr__`,
`__match_args__`, assignments refused), and a method the class defines itself is kept, as the
dataclass keeps it. What differs is how the methods come about: `__init__`, `__eq__` and
`__hash__` are compiled from one short source per distinct list of field names (shared between
classes of the same shape), `__repr__` and the frozen `__setattr__` are generic.

`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work on records too: the first look
at a record class's `__dataclass_fields__` imports dataclasses and describes the record by the
equivalent dataclass's fields (the agent and the tests use them; the short commands never do).
mypy sees the decorator as a dataclass transform (PEP 681), so it checks records as dataclasses.
"""

from __future__ import annotations

import builtins
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:  # typing's import is a few ms a short command does not otherwise need

    def dataclass_transform(**_kwargs: object) -> object:
        return lambda decorated: decorated


class FrozenInstanceError(AttributeError):
    """An assignment to a record's field (as dataclasses' error of the same name)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """A field's specification, as `dataclasses.field` gives it (`name` set by `@record`)."""

    __slots__ = ("compare", "default", "default_factory", "init", "name", "repr", "type")

    def __init__(
        self, default: Any, default_factory: Callable[[], Any] | Any, init: bool, repr: bool, compare: bool
    ) -> None:
        self.name = ""
        self.type: object = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """As `dataclasses.field`: a default, a default's factory, a field left out of `__init__`,
    of `repr` or of the comparison."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, compare)


def _fields_of(cls: type) -> tuple[Field, ...]:
    """The class's fields in declaration order: its annotations, less its class variables."""
    out = []
    # the class's own annotations (inspect.get_annotations: the import this module avoids)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if isinstance(annotation, str) and annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(value, MISSING, True, True, True)
        spec.name = name
        spec.type = annotation
        out.append(spec)
        # the class attribute holds the plain default, as the dataclass leaves it
        if spec.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, spec.default)
    return tuple(out)


@cache  # one compile per shape: many classes share one (a single `unit`, a single `path` …)
def _compiled(source: str) -> Any:
    return compile(source, "<record>", "exec")


def _init_source(fields: tuple[Field, ...], post_init: bool) -> str:
    """`__init__`: the init fields as parameters (defaults bound to the function afterwards),
    each field set past the frozen `__setattr__`, then `__post_init__`."""
    params = []
    body = []
    for f in fields:
        if f.init:
            params.append(f.name)
            if f.default_factory is not MISSING:
                body.append(f"if {f.name} is _FACTORY: {f.name} = _factory_{f.name}()")
            body.append(f"_set(self, {f.name!r}, {f.name})")
        elif f.default_factory is not MISSING:
            body.append(f"_set(self, {f.name!r}, _factory_{f.name}())")
        # an init=False field with a plain default is read from the class, as the dataclass's
    if post_init:
        body.append("self.__post_init__()")
    lines = [f"def __init__(self, {', '.join(params)}):", *(f"    {b}" for b in body or ["pass"])]
    return "\n".join(lines) + "\n"


def _eq_hash_source(names: tuple[str, ...]) -> str:
    """`__eq__` and `__hash__` as the dataclass writes them: tuples of the compared fields."""
    mine = "".join(f"self.{n}," for n in names)
    theirs = "".join(f"other.{n}," for n in names)
    return (
        "def __eq__(self, other):\n"
        "    if other.__class__ is self.__class__:\n"
        f"        return ({mine}) == ({theirs})\n"
        "    return NotImplemented\n"
        "def __hash__(self):\n"
        f"    return hash(({mine}))\n"
    )


def _init(cls: type, fields: tuple[Field, ...]) -> Callable[..., None]:
    scope: dict[str, Any] = {"__builtins__": builtins, "_set": object.__setattr__, "_FACTORY": _FACTORY}
    for f in fields:
        if f.default_factory is not MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
    exec(_compiled(_init_source(fields, hasattr(cls, "__post_init__"))), scope)
    init: Callable[..., None] = scope["__init__"]
    defaults = tuple(_FACTORY if f.default_factory is not MISSING else f.default for f in fields if f.init)
    first = next((i for i, d in enumerate(defaults) if d is not MISSING), len(defaults))
    if any(d is MISSING for d in defaults[first:]):
        raise TypeError(f"{cls.__qualname__}: a field without a default follows one with a default")
    init.__defaults__ = defaults[first:] or None
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**{f.name: f.type for f in fields if f.init}, "return": None}
    return init


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _repr(self: Any) -> str:
    cls = type(self)
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in cls.__record_repr__)
    return f"{cls.__qualname__}({shown})"


def _setattr(self: Any, name: str, value: object) -> None:
    cls = type(self)
    if "__record_fields__" in cls.__dict__ or name in cls.__record_names__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    cls = type(self)
    if "__record_fields__" in cls.__dict__ or name in cls.__record_names__:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


class _DataclassFields:
    """`__dataclass_fields__`, built on first use from the equivalent dataclass (then cached on
    the class): what `dataclasses.fields`, `replace` and `asdict` read."""

    def __get__(self, instance: object, owner: type) -> dict[str, Any]:
        import dataclasses  # noqa: PLC0415 (only code that asks for it pays for the import)

        def spec(f: Field) -> Any:
            default = dataclasses.MISSING if f.default is MISSING else f.default
            factory: Any = dataclasses.MISSING if f.default_factory is MISSING else f.default_factory
            return dataclasses.field(
                default=default, default_factory=factory, init=f.init, repr=f.repr, compare=f.compare
            )

        specs = [(f.name, f.type, spec(f)) for f in owner.__dict__["__record_fields__"]]
        twin = dataclasses.make_dataclass(owner.__name__, specs, frozen=True)
        fields: dict[str, Any] = twin.__dataclass_fields__  # type: ignore[attr-defined]
        type.__setattr__(owner, "__dataclass_fields__", fields)
        return fields


def _set_new(cls: type, name: str, value: object) -> None:
    """A method the class does not define itself (the dataclass keeps the class's own)."""
    if name not in cls.__dict__:
        setattr(cls, name, value)


def _explicit_hash(cls: type) -> bool:
    # defining __eq__ alone makes Python set __hash__ to None in the class: not an explicit one
    value = cls.__dict__.get("__hash__", MISSING)
    return value is not MISSING and not (value is None and "__eq__" in cls.__dict__)


def _process(cls: type, init: bool, eq: bool) -> type:
    fields = _fields_of(cls)
    cls.__record_fields__ = fields  # type: ignore[attr-defined]
    cls.__record_names__ = frozenset(f.name for f in fields)  # type: ignore[attr-defined]
    cls.__record_repr__ = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
    if init:
        _set_new(cls, "__init__", _init(cls, fields))
    _set_new(cls, "__repr__", _repr)
    if eq:
        scope: dict[str, Any] = {"__builtins__": builtins}
        exec(_compiled(_eq_hash_source(tuple(f.name for f in fields if f.compare))), scope)
        _set_new(cls, "__eq__", scope["__eq__"])
        if not _explicit_hash(cls):
            cls.__hash__ = scope["__hash__"]  # type: ignore[method-assign]
    for name, method in (("__setattr__", _setattr), ("__delattr__", _delattr)):
        if name in cls.__dict__:
            raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
        setattr(cls, name, method)
    _set_new(cls, "__match_args__", tuple(f.name for f in fields if f.init))
    cls.__dataclass_fields__ = _DataclassFields()  # type: ignore[attr-defined]
    return cls


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, init: bool = True, eq: bool = True) -> Any:
    """`@record`, `@record(init=False)`, `@record(eq=False)`: `@dataclass(frozen=True, …)`."""
    if cls is None:
        return lambda c: _process(c, init, eq)
    return _process(cls, init, eq)


def fields(obj: object) -> tuple[Field, ...]:
    """A record's (or record class's) fields, as `dataclasses.fields` without its import."""
    cls = obj if isinstance(obj, type) else type(obj)
    found: tuple[Field, ...] = cls.__dict__["__record_fields__"]
    return found


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of a record with some fields changed, as `dataclasses.replace` without its import."""
    for f in fields(obj):
        if not f.init:
            if f.name in changes:
                message = f"field {f.name} is declared with init=False, it cannot be specified with replace()"
                raise ValueError(message)
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return type(obj)(**changes)
