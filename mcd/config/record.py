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
from operator import attrgetter
from types import CodeType, FunctionType

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
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


# `__init__` is compiled once per number of fields, for fields named _0, _1 …, and each class
# gets a copy of that code with its own names (CodeType.replace): a dozen compiles for the whole
# program instead of one per class. The code is the source the dataclass would compile.
_TEMPLATES = {
    "init": "def __init__(self, {params}):\n{sets}    pass\n",
    "init_post": "def __init__(self, {params}):\n{sets}    self.__post_init__()\n",
}
_SCOPE: dict[str, Any] = {"__builtins__": builtins, "_set": object.__setattr__}
# a parameter of that name would hide what the compiled __init__ itself calls
_RESERVED = frozenset(("self", "_set"))


@cache  # constants of the program: one code object per method and number of fields
def _template(kind: str, count: int) -> CodeType:
    names = [f"_{i}" for i in range(count)]
    source = _TEMPLATES[kind].format(
        params=", ".join(names),
        sets="".join(f"    _set(self, {n!r}, {n})\n" for n in names),
    )
    scope: dict[str, Any] = {}
    exec(compile(source, "<record>", "exec"), scope)
    (function,) = (v for k, v in scope.items() if k != "__builtins__")
    code: CodeType = function.__code__
    return code


def _method(cls: type, kind: str, names: tuple[str, ...]) -> Any:
    """The template's function with `names` for _0, _1 … (parameters, attributes, constants)."""
    code = _template(kind, len(names))
    mine = {f"_{i}": n for i, n in enumerate(names)}
    code = code.replace(
        co_varnames=tuple(mine.get(v, v) for v in code.co_varnames),
        co_names=tuple(mine.get(v, v) for v in code.co_names),
        co_consts=tuple(mine.get(c, c) if type(c) is str else c for c in code.co_consts),
        co_qualname=f"{cls.__qualname__}.{code.co_name}",
    )
    return FunctionType(code, _SCOPE, code.co_name)


def _eq_hash(cls: type, names: tuple[str, ...]) -> tuple[Any, Any]:
    """`__eq__` and `__hash__` as the dataclass's: the tuples of the compared fields (taken in C)."""
    key: Callable[[object], tuple[object, ...]]
    if len(names) > 1:
        key = attrgetter(*names)
    elif names:
        one = attrgetter(names[0])

        def key(obj: object) -> tuple[object, ...]:
            return (one(obj),)
    else:

        def key(obj: object) -> tuple[object, ...]:
            return ()

    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    def __hash__(self: object) -> int:
        return hash(key(self))

    __eq__.__qualname__ = f"{cls.__qualname__}.__eq__"
    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    return __eq__, __hash__


def _init_source(fields: tuple[Field, ...], post_init: bool) -> str:
    """`__init__` of a record with a default's factory (or a field named as the template's own
    names): compiled for the class alone, with names no field takes."""
    params = []
    body = []
    for f in fields:
        if f.init:
            params.append(f.name)
            if f.default_factory is not MISSING:
                body.append(f"if {f.name} is __record_factory__: {f.name} = __record_factory_{f.name}__()")
            body.append(f"__record_set__(__record_self__, {f.name!r}, {f.name})")
        elif f.default_factory is not MISSING:
            body.append(f"__record_set__(__record_self__, {f.name!r}, __record_factory_{f.name}__())")
        # an init=False field with a plain default is read from the class, as the dataclass's
    if post_init:
        body.append("__record_self__.__post_init__()")
    head = f"def __init__(__record_self__, {', '.join(params)}):"
    return "\n".join([head, *(f"    {b}" for b in body or ["pass"])]) + "\n"


def _init(cls: type, fields: tuple[Field, ...]) -> Any:
    post_init = hasattr(cls, "__post_init__")
    names = tuple(f.name for f in fields if f.init)
    factories = {
        f"__record_factory_{f.name}__": f.default_factory for f in fields if f.default_factory is not MISSING
    }
    if not factories and len(names) == len(fields) and not _RESERVED.intersection(names):
        init = _method(cls, "init_post" if post_init else "init", names)
    else:
        scope: dict[str, Any] = {"__builtins__": builtins, "__record_set__": object.__setattr__, **factories}
        scope["__record_factory__"] = _FACTORY
        exec(compile(_init_source(fields, post_init), "<record>", "exec"), scope)
        init = scope["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
    defaults = tuple(_FACTORY if f.default_factory is not MISSING else f.default for f in fields if f.init)
    first = next((i for i, d in enumerate(defaults) if d is not MISSING), len(defaults))
    if any(d is MISSING for d in defaults[first:]):
        raise TypeError(f"{cls.__qualname__}: a field without a default follows one with a default")
    init.__defaults__ = defaults[first:] or None
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
        eq_method, hash_method = _eq_hash(cls, tuple(f.name for f in fields if f.compare))
        _set_new(cls, "__eq__", eq_method)
        if not _explicit_hash(cls):
            cls.__hash__ = hash_method  # type: ignore[method-assign]
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
