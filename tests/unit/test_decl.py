"""`File.decl` and `Unit.decl`: two files (units) are equal exactly when their declared fields
are, as the dataclass comparison had it; the planner compares the flat tuples. Pure."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.config.ignition_model import Dropin, File, NodeRef, Resource, Unit

refs = st.builds(NodeRef, st.none() | st.integers(0, 2), st.none() | st.sampled_from(["a", "b"]))
resources = st.none() | st.builds(
    Resource,
    st.none() | st.sampled_from(["data:,a", "data:,b"]),
    st.none() | st.sampled_from(["", "gzip"]),
    st.none() | st.sampled_from(["sha256-0"]),
)
files = st.builds(
    lambda path, mode, overwrite, user, group, contents, append: File(
        path, mode=mode, overwrite=overwrite, user=user, group=group, contents=contents, append=append
    ),
    st.sampled_from(["/etc/a", "/etc/b"]),
    st.none() | st.sampled_from([0o644, 0o600]),
    st.none() | st.booleans(),
    refs,
    refs,
    resources,
    st.lists(st.builds(Resource, st.sampled_from(["data:,x", "data:,y"])), max_size=1).map(tuple),
)
units = st.builds(
    Unit,
    st.sampled_from(["a.service", "b.service"]),
    st.none() | st.booleans(),
    st.none() | st.booleans(),
    st.none() | st.sampled_from(["[Unit]\n", ""]),
    st.lists(st.builds(Dropin, st.just("10.conf"), st.none() | st.just("x")), max_size=1).map(tuple),
)


def _fields(f: File) -> tuple[object, ...]:
    return (f.path, f.mode, f.overwrite, f.user, f.group, f.contents, f.append)


@settings(max_examples=300)
@given(files, files)
def test_files_are_equal_exactly_when_their_declared_fields_are(a: File, b: File) -> None:
    assert (a == b) == (_fields(a) == _fields(b)) == (a.decl == b.decl)
    if a == b:
        assert hash(a) == hash(b)


def test_no_contents_differs_from_contents_without_a_source() -> None:
    assert File("/etc/a") != File("/etc/a", contents=Resource(None))


@settings(max_examples=300)
@given(units, units)
def test_units_are_equal_exactly_when_their_fields_are(a: Unit, b: Unit) -> None:
    fields = (a.name, a.enabled, a.mask, a.contents, a.dropins)
    assert (a == b) == (fields == (b.name, b.enabled, b.mask, b.contents, b.dropins))
    if a == b:
        assert hash(a) == hash(b)
