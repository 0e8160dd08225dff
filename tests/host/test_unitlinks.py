"""mcd.host.unitlinks and the offline manager's use of it: fewer systemctl processes, same links.

Part one reads hand-made roots (no process). Part two is the proof that matters: the unit writer
on the offline manager ends with exactly the tree the previous behaviour produced (every
`is-enabled` and every `disable` handed to systemctl), run side by side with the real
`systemctl --root` on two roots, over named scenarios and generated ones.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording import RecordingRunner
from trees import walk

from mcd.config.ignition import Dropin, Unit
from mcd.host.root import HostRoot
from mcd.host.runner import CommandResult, SubprocessRunner
from mcd.host.systemd import OfflineSystemctl, SystemdError
from mcd.host.unitlinks import UnitLinks, enabled_from_links, plain_unit_name
from mcd.host.units import UnitResult, UnitWriter

ETC = "etc/systemd/system"
USR = "usr/lib/systemd/system"


def service(install: str = "WantedBy=multi-user.target\n", tag: str = "") -> str:
    return f"[Unit]\nDescription=t {tag}\n[Service]\nExecStart=/bin/true\n[Install]\n{install}"


def put(root: Path, relpath: str, text: str = "") -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(root: Path, relpath: str, target: str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def enabled_link(root: Path, name: str, target: str = "multi-user.target") -> Path:
    return link(root, f"{ETC}/{target}.wants/{name}", f"/etc/systemd/system/{name}")


# --- reading the links (no process) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("a.service", True),
        ("a-b_c:d\\x2d.e.socket", True),
        ("a@.service", False),
        ("a@b.service", False),
        ("a.conf", False),
        ("a", False),
        ("../a.service", False),
        ("x" * 247 + ".service", True),  # 255 characters: the longest
        ("x" * 248 + ".service", False),
    ],
)
def test_plain_unit_name(name: str, plain: bool) -> None:
    """Only plain names are judged from the links; systemctl judges the rest (and reports bad ones)."""
    assert plain_unit_name(name) is plain


def test_a_unit_with_its_dependency_link_is_surely_enabled(tmp_path: Path) -> None:
    put(tmp_path, f"{ETC}/on.service", service())
    enabled_link(tmp_path, "on.service")
    put(tmp_path, f"{ETC}/off.service", service())
    assert enabled_from_links(HostRoot(tmp_path), ["on.service", "off.service", "new.service"]) == (
        frozenset({"on.service"}),
        [],
    )


@pytest.mark.parametrize(
    "setup",
    [
        # a link named after the unit in /run makes it enabled-runtime
        lambda r: link(
            r, "run/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service"
        ),
        # a top-level alias: `indirect`, or `enabled` when the unit lists it in Alias=
        lambda r: link(r, f"{ETC}/other.service", "/etc/systemd/system/a.service"),
        # the unit's own path is a link (a mask, a linked unit)
        lambda r: ((r / ETC / "a.service").unlink(), link(r, f"{ETC}/a.service", "/dev/null")),
        # named after the unit but pointing elsewhere
        lambda r: link(r, f"{ETC}/multi-user.target.wants/a.service", "/opt/a.service"),
        # a link in a vendor directory
        lambda r: link(r, f"{USR}/multi-user.target.wants/a.service", "/usr/lib/systemd/system/a.service"),
        # a unit file in a directory that takes precedence over /etc/systemd/system
        lambda r: (put(r, "run/systemd/transient/a.service", service()), enabled_link(r, "a.service")),
        # /etc/systemd/system is itself a link: systemd would follow it, we do not guess
        lambda r: (shutil.move(r / ETC, r / "opt/units"), (r / ETC).symlink_to("/opt/units")),
        # a link with `..` in its target
        lambda r: link(r, f"{ETC}/multi-user.target.wants/b.service", "../b.service"),
    ],
    ids=["runtime", "alias", "own-link", "elsewhere", "vendor", "shadowed", "linked-config-dir", "dotdot"],
)
def test_what_the_links_do_not_settle_is_left_to_systemctl(
    tmp_path: Path, setup: Callable[[Path], object]
) -> None:
    put(tmp_path, f"{ETC}/a.service", service())
    setup(tmp_path)
    assert enabled_from_links(HostRoot(tmp_path), ["a.service"]) == (frozenset(), ["a.service"])


@pytest.mark.parametrize(
    "setup",
    [
        # is-enabled reads dependency directories only: a link elsewhere never makes it enabled
        lambda r: link(r, f"{ETC}/odd.dir/a.service", "/etc/systemd/system/a.service"),
        lambda r: link(r, f"{ETC}/a.service.d/a.service", "/etc/systemd/system/a.service"),
        # links to other units
        lambda r: enabled_link(r, "b.service"),
        # a dependency directory that is a link: systemd does not descend into it
        lambda r: (
            link(r, "opt/wants/a.service", "/etc/systemd/system/a.service"),
            link(r, f"{ETC}/multi-user.target.wants", "/opt/wants"),
        ),
    ],
    ids=["odd-dir", "dropin-dir", "other-unit", "linked-dependency-dir"],
)
def test_links_is_enabled_does_not_read_leave_the_unit_surely_not_enabled(
    tmp_path: Path, setup: Callable[[Path], object]
) -> None:
    put(tmp_path, f"{ETC}/a.service", service())
    setup(tmp_path)
    assert enabled_from_links(HostRoot(tmp_path), ["a.service"]) == (frozenset(), [])


def test_templates_and_odd_names_are_always_asked(tmp_path: Path) -> None:
    names = ["t@.service", "t@x.service", "bad name"]
    assert enabled_from_links(HostRoot(tmp_path), names) == (frozenset(), names)


def test_needing_disable_leaves_out_units_with_nothing_to_remove(tmp_path: Path) -> None:
    for name in ("idle.service", "linked.service", "aliased.service", "chained.service", "stray.service"):
        put(tmp_path, f"{ETC}/{name}", service())
    enabled_link(tmp_path, "linked.service")
    link(tmp_path, f"{ETC}/alias.service", "/etc/systemd/system/aliased.service")
    # a link to an alias of the unit: systemd follows the chain
    link(tmp_path, f"{ETC}/hop.service", "/etc/systemd/system/hop2.service")
    link(tmp_path, f"{ETC}/hop2.service", "chained.service")
    # disable walks every directory under /etc/systemd/system, dropin directories included
    link(tmp_path, f"{ETC}/x.service.d/stray.service", "/nowhere")
    names = ["idle.service", "linked.service", "aliased.service", "chained.service", "stray.service"]
    assert UnitLinks(HostRoot(tmp_path)).needing_disable(names) == names[1:]


@pytest.mark.parametrize(
    "setup",
    [
        lambda r: put(r, f"{ETC}/a.service", service("WantedBy=x.target\nAlso=b.service\n")),
        lambda r: put(r, f"{USR}/a.service.d/10.conf", "[Install]\nAlso=b.service\n"),
        lambda r: link(r, f"{ETC}/a.service.d/10.conf", "/opt/10.conf"),
        lambda r: put(r, f"{ETC}/a.service", ""),  # empty: a mask to systemd
        lambda r: (r / ETC / "a.service").unlink(),
        lambda r: put(r, "etc/systemd/system.control/a.service", service()),
    ],
    ids=["also", "also-in-vendor-dropin", "linked-dropin", "empty", "no-file", "shadowed"],
)
def test_needing_disable_keeps_units_whose_disable_may_reach_further(
    tmp_path: Path, setup: Callable[[Path], object]
) -> None:
    put(tmp_path, f"{ETC}/a.service", service())
    setup(tmp_path)
    assert UnitLinks(HostRoot(tmp_path)).needing_disable(["a.service"]) == ["a.service"]


def test_an_unfollowable_link_keeps_every_disable(tmp_path: Path) -> None:
    put(tmp_path, f"{ETC}/a.service", service())
    link(tmp_path, f"{ETC}/multi-user.target.wants/odd.service", "../odd.service")
    assert UnitLinks(HostRoot(tmp_path)).needing_disable(["a.service"]) == ["a.service"]


def test_offline_disable_runs_systemctl_only_for_units_with_something_to_remove(tmp_path: Path) -> None:
    put(tmp_path, f"{ETC}/idle.service", service())
    put(tmp_path, f"{ETC}/on.service", service())
    enabled_link(tmp_path, "on.service")
    runner = RecordingRunner().expect(["systemctl"])
    manager = OfflineSystemctl(HostRoot(tmp_path), runner)
    manager.disable(["idle.service"])
    assert runner.commands == []
    manager.disable(["idle.service", "on.service", "gone.service"])
    assert runner.commands == [
        ("systemctl", f"--root={tmp_path.resolve()}", "disable", "on.service", "gone.service")
    ]


def test_offline_enabled_among_asks_only_about_the_unsettled(tmp_path: Path) -> None:
    put(tmp_path, f"{ETC}/on.service", service())
    enabled_link(tmp_path, "on.service")
    put(tmp_path, f"{ETC}/rt.service", service())
    link(tmp_path, "run/systemd/system/multi-user.target.wants/rt.service", "/etc/systemd/system/rt.service")
    runner = RecordingRunner().expect(
        ["systemctl", f"--root={tmp_path.resolve()}", "is-enabled"], 0, "enabled-runtime\n"
    )
    manager = OfflineSystemctl(HostRoot(tmp_path), runner)
    assert manager.enabled_among(["on.service", "rt.service", "new.service"]) == {"on.service"}
    assert [argv[2:] for argv in runner.commands] == [("is-enabled", "rt.service")]


# --- the same tree as before, with real systemctl -----------------------------------------------

needs_systemctl = pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl is not installed")


class CountingRunner:
    """Runs commands for real and counts the systemctl verbs."""

    def __init__(self) -> None:
        self.inner = SubprocessRunner()
        self.verbs: Counter[str] = Counter()

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.verbs[argv[2]] += 1
        return self.inner.run(argv, check=check, input=input, timeout=timeout, env=env)


class AskEverything(OfflineSystemctl):
    """The previous behaviour: every state question and every disable goes to systemctl."""

    def enabled_among(self, names: Sequence[str]) -> frozenset[str]:
        states = self.is_enabled(names)
        return frozenset(name for name in names if states[name] == "enabled")

    def disable(self, names: Sequence[str]) -> None:
        super(OfflineSystemctl, self).disable(names)


Step = Sequence[Unit]
Setup = Callable[[Path], object]


@dataclass
class Outcome:
    result: UnitResult | str  # the error text when the pass failed


def apply(writer: UnitWriter, previous: Step, units: Step, root: Path) -> tuple[Outcome, Outcome]:
    """Write `units`, then clean up what `previous` declared and `units` no longer does, as an update does."""
    outcomes = []
    for remove in (False, True):
        try:
            result = writer.remove_units(previous, units) if remove else writer.write_units(units)
            outcomes.append(Outcome(result))
        except SystemdError as e:
            outcomes.append(Outcome(str(e).replace(str(root), "<root>")))
    return outcomes[0], outcomes[1]


PRESETS = "enable p*.service\ndisable *\n"


def run_side_by_side(
    tmp_path: Path, setup: Setup, steps: Sequence[Step]
) -> tuple[Counter[str], Counter[str]]:
    """Apply `steps` to two identical roots, new and previous behaviour; trees and results must match."""
    roots = [tmp_path / "new", tmp_path / "old"]
    for root in roots:
        (root / ETC).mkdir(parents=True)
        put(root, "etc/systemd/system-preset/90-test.preset", PRESETS)
        setup(root)
    new_runner, old_runner = CountingRunner(), CountingRunner()
    new = UnitWriter(HostRoot(roots[0]), OfflineSystemctl(HostRoot(roots[0]), new_runner))
    old = UnitWriter(HostRoot(roots[1]), AskEverything(HostRoot(roots[1]), old_runner))
    previous: Step = []
    for number, units in enumerate(steps):
        got, want = apply(new, previous, units, roots[0]), apply(old, previous, units, roots[1])
        assert got == want, f"step {number}"
        assert walk(roots[0]) == walk(roots[1]), f"step {number}"
        previous = units
    return new_runner.verbs, old_runner.verbs


def nothing(root: Path) -> None:
    pass


def vendor_enabled(root: Path) -> None:
    put(root, f"{USR}/v.service", service())
    link(root, f"{USR}/multi-user.target.wants/v.service", "/usr/lib/systemd/system/v.service")


def runtime_enabled(root: Path) -> None:
    link(root, "run/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service")


def stray_links(root: Path) -> None:
    link(root, f"{ETC}/odd.dir/a.service", "/etc/systemd/system/a.service")
    link(root, f"{ETC}/b.service.d/a.service", "/nowhere/a.service")
    link(root, f"{ETC}/graphical.target.wants/renamed.service", "/etc/systemd/system/a.service")


def also_in_vendor_dropin(root: Path) -> None:
    put(root, f"{USR}/a.service.d/50-also.conf", "[Install]\nAlso=b.service\n")


A1 = service()
A2 = service("WantedBy=graphical.target\n", "v2")
A3 = service("WantedBy=multi-user.target\n", "v3")
ALSO_B = service("WantedBy=multi-user.target\nAlso=b.service\n", "also")
ALIAS = service("WantedBy=multi-user.target\nAlias=a-alias.service\n", "alias")
TEMPLATE = service("WantedBy=multi-user.target\nDefaultInstance=x\n", "tmpl")
B = service(tag="b")
ENABLED_B = Unit("b.service", enabled=True, contents=B)

SCENARIOS: dict[str, tuple[Setup, list[Step]]] = {
    "enabled-install-target-changed": (
        nothing,
        [[Unit("a.service", enabled=True, contents=A1)], [Unit("a.service", enabled=True, contents=A2)]],
    ),
    "enabled-to-disabled-with-new-contents": (
        nothing,
        [[Unit("a.service", enabled=True, contents=A1)], [Unit("a.service", enabled=False, contents=A2)]],
    ),
    "enabled-to-disabled-same-contents": (
        nothing,
        [[Unit("a.service", enabled=True, contents=A1)], [Unit("a.service", enabled=False, contents=A1)]],
    ),
    "new-enabled-and-new-disabled": (
        nothing,
        [[Unit("a.service", enabled=True, contents=A1), Unit("b.service", enabled=False, contents=B)]],
    ),
    "masked-to-unmasked-with-contents": (
        nothing,
        [
            [Unit("a.service", enabled=True, contents=A1)],
            [Unit("a.service", mask=True)],
            [Unit("a.service", mask=False, enabled=True, contents=A2)],
        ],
    ),
    "masked-to-unmasked-without-contents": (
        nothing,
        [[Unit("a.service", mask=True)], [Unit("a.service", mask=False, enabled=False)]],
    ),
    "enabled-unset-follows-presets": (
        nothing,
        [
            [Unit("p.service", contents=A1), Unit("q.service", enabled=True, contents=A1)],
            [Unit("p.service", contents=A2), Unit("q.service", contents=A2)],
        ],
    ),
    "old-install-section-had-also": (
        nothing,
        [
            [ENABLED_B, Unit("a.service", enabled=True, contents=ALSO_B)],
            [Unit("a.service", enabled=False, contents=A1)],
        ],
    ),
    "new-install-section-has-also-of-a-disabled-unit": (
        nothing,
        [
            [ENABLED_B, Unit("a.service", enabled=True, contents=A1)],
            [Unit("a.service", enabled=True, contents=ALSO_B), Unit("b.service", enabled=False, contents=B)],
        ],
    ),
    "also-in-a-dropin": (
        nothing,
        [
            [ENABLED_B, Unit("a.service", enabled=True, contents=A1)],
            [
                Unit(
                    "a.service",
                    enabled=False,
                    contents=A2,
                    dropins=(Dropin("10.conf", "[Install]\nAlso=b.service\n"),),
                )
            ],
        ],
    ),
    "also-in-a-vendor-dropin": (
        also_in_vendor_dropin,
        [
            [ENABLED_B, Unit("a.service", enabled=True, contents=A1)],
            [Unit("a.service", enabled=False, contents=A2)],
        ],
    ),
    "alias-dropped": (
        nothing,
        [[Unit("a.service", enabled=True, contents=ALIAS)], [Unit("a.service", enabled=True, contents=A1)]],
    ),
    "vendor-enabled-unit-overridden": (
        vendor_enabled,
        [[Unit("v.service", enabled=False, contents=A2)], [Unit("v.service", enabled=True, contents=A1)]],
    ),
    "vendor-unit-disabled-by-name": (vendor_enabled, [[Unit("v.service", enabled=False)]]),
    "runtime-enabled-unit-changed": (
        runtime_enabled,
        [[Unit("a.service", enabled=True, contents=A1)], [Unit("a.service", enabled=True, contents=A2)]],
    ),
    "stray-links-to-a-disabled-unit": (
        stray_links,
        [[Unit("a.service", enabled=False, contents=A1)], [Unit("a.service", enabled=False, contents=A2)]],
    ),
    "template-with-default-instance": (
        nothing,
        [
            [Unit("t@.service", enabled=True, contents=TEMPLATE)],
            [Unit("t@.service", enabled=False, contents=A1), Unit("t@x.service", enabled=False)],
        ],
    ),
    "unchanged-units-only": (
        nothing,
        [
            [Unit("a.service", enabled=True, contents=A1), Unit("b.service", enabled=False, contents=B)],
            [Unit("a.service", enabled=True, contents=A1), Unit("b.service", enabled=False, contents=B)],
        ],
    ),
}


@needs_systemctl
@pytest.mark.allow_commands
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenarios_end_with_the_same_tree(tmp_path: Path, scenario: str) -> None:
    setup, steps = SCENARIOS[scenario]
    new, old = run_side_by_side(tmp_path, setup, steps)
    assert sum(new.values()) <= sum(old.values())


@needs_systemctl
@pytest.mark.allow_commands
def test_a_changed_workload_takes_two_processes_instead_of_four(tmp_path: Path) -> None:
    """The common change: some enabled and some disabled units get new contents.

    Their [Install] section stays, so no enabled unit needs its disable before the rewrite:
    one enable per pass is all."""
    names = [f"u{i}.service" for i in range(6)]
    first = [Unit(n, enabled=i % 2 == 0, contents=A1) for i, n in enumerate(names)]
    second = [Unit(n, enabled=i % 2 == 0, contents=A3) for i, n in enumerate(names)]
    new, old = run_side_by_side(tmp_path, nothing, [first])
    assert (new, old) == (Counter(enable=1), Counter(enable=1, disable=1))
    new, old = run_side_by_side(tmp_path / "again", nothing, [first, second])
    assert new == Counter(enable=2)
    assert old == Counter(enable=2, disable=2)


INSTALLS = [
    A1,
    A2,
    ALSO_B,
    ALIAS,
    TEMPLATE,
    service("RequiredBy=multi-user.target\n", "req"),
    service("WantedBy=multi-user.target\nAlso=a.service c.service\n", "also-a-c"),
    "[Service]\nExecStart=/bin/true\n",
]
DROPINS = [
    (),
    (Dropin("10.conf", "[Service]\nNice=1\n"),),
    (Dropin("10.conf", "[Install]\nAlso=c.service\n"),),
    (Dropin("10.conf", "[Install]\nWantedBy=graphical.target\n"),),
    (Dropin("10.conf", ""),),
]
NAMES = ["a.service", "b.service", "c.service", "p.service", "v.service", "t@.service", "t@x.service"]
# links a root may hold before any pass: (path under the root, target)
LINKS = [
    (f"{ETC}/odd.dir/a.service", "/etc/systemd/system/a.service"),
    (f"{ETC}/b.service.d/a.service", "/nowhere/a.service"),
    (f"{ETC}/graphical.target.wants/renamed.service", "/etc/systemd/system/b.service"),
    (f"{ETC}/multi-user.target.wants/c.service", "/opt/c.service"),
    (f"{ETC}/hop.service", "/etc/systemd/system/a-alias.service"),
    (f"{ETC}/multi-user.target.wants/t@y.service", "/etc/systemd/system/t@.service"),
    ("run/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service"),
    (f"{USR}/multi-user.target.wants/v.service", "/usr/lib/systemd/system/v.service"),
    (f"{USR}/multi-user.target.wants/b.service", "/etc/systemd/system/b.service"),
]
SETUPS: list[Setup] = [nothing, stray_links, runtime_enabled, also_in_vendor_dropin, vendor_enabled]


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    base = draw(st.sampled_from(SETUPS))
    links = draw(st.lists(st.sampled_from(LINKS), unique=True, max_size=3))

    def setup(root: Path) -> None:
        base(root)
        for path, target in links:
            if not (root / path).is_symlink():
                link(root, path, target)

    return setup


@st.composite
def unit_lists(draw: st.DrawFn) -> list[Unit]:
    units = []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)):
        units.append(
            Unit(
                name,
                enabled=draw(st.sampled_from([None, True, False])),
                mask=draw(st.sampled_from([None, None, None, True, False])),
                contents=draw(st.sampled_from([None, *INSTALLS])),
                dropins=draw(st.sampled_from(DROPINS)),
            )
        )
    return units


@needs_systemctl
@pytest.mark.allow_commands
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(setup=setups(), steps=st.lists(unit_lists(), min_size=1, max_size=3))
def test_generated_passes_end_with_the_same_tree(
    tmp_path_factory: pytest.TempPathFactory, setup: Setup, steps: list[list[Unit]]
) -> None:
    run_side_by_side(tmp_path_factory.mktemp("pass"), setup, steps)
