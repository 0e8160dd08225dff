"""mcd.host.rpmostree: status parsing, the commands run, rebase retries, and the rpm-ostree stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from recording import RecordingRunner

from mcd.config.ostables import DEFAULT_KERNEL_PACKAGES, REALTIME_KERNEL_PACKAGES
from mcd.host.root import HostRoot
from mcd.host.rpmostree import (
    CLIENT_ID,
    Deployment,
    OstreeImageReference,
    RpmOstree,
    RpmOstreeError,
    RpmOstreeVersion,
    Status,
    booted_image,
    parse_ostree_image_ref,
    parse_status,
    parse_version,
)
from mcd.host.runner import CommandError, SubprocessRunner
from mcd.planner.kargs import kargs_command
from mcd.planner.rpmostree_args import (
    extensions_command,
    kernel_override_reset_command,
    kernel_switch_command,
)

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures" / "rpm-ostree"
STANDIN = TESTS / "standins" / "rpm-ostree"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def status_json(*deployments: dict[str, Any]) -> str:
    return json.dumps({"deployments": list(deployments), "transaction": None})


# --- parse_status against real output --------------------------------------------------------------


def test_parses_staged_container_and_booted_ostree_deployment() -> None:
    status = parse_status(fixture("fcos-container-status.json"))
    assert len(status.deployments) == 2
    staged = status.staged
    assert staged is not None and staged is status.deployments[0]
    assert (
        staged.container_image_reference
        == "ostree-unverified-registry:quay.io/fedora/fedora-coreos:testing-devel"
    )
    assert staged.container_image_reference_digest == (
        "sha256:25d3a07d53835c6c738fb4dcba149dc0b64a9bc4ec9c3431750cabd3596ab233"
    )
    assert not staged.booted
    booted = status.booted
    assert booted.id == "fedora-coreos-a465c49fef185f8339d3cd5857e28386cfdc6516f68206912917c9dc3192d809.0"
    assert booted.osname == "fedora-coreos"
    assert booted.version == "36.20220820.3.0"
    assert booted.origin == "fedora:fedora/x86_64/coreos/stable"
    assert booted.container_image_reference is None
    assert booted.custom_origin == ()
    assert booted.timestamp == 1662488373
    # no layering: the base commit is the deployment's own commit
    assert booted.base_checksum is None
    assert (
        booted.base_commit
        == booted.checksum
        == ("a465c49fef185f8339d3cd5857e28386cfdc6516f68206912917c9dc3192d809")
    )
    assert status.transaction is None


def test_parses_layered_packages_and_base_removals() -> None:
    status = parse_status(fixture("fcos-with-overrides-status.json"))
    staged = status.staged
    assert staged is not None
    assert staged.requested_packages == ("strace",)
    assert staged.requested_base_removals == ("moby-engine",)
    assert staged.requested_local_packages == ()
    assert staged.checksum == "683faf6b42711761e9af070a0f23f9b068ec2b81cc618debcc760b025621e27b"
    assert staged.base_commit == "23bfcb638fcee121d5d257349c1c964b111f7df4e9895f602e671faa9ec7a607"
    # the layered deployment's base is the booted deployment's commit
    assert staged.base_commit == status.booted.checksum
    assert status.booted.requested_packages == ()


def test_booted_image_of_a_non_container_deployment_is_empty() -> None:
    assert booted_image(parse_status(fixture("fcos-container-status.json"))) == ""


def test_active_transaction_is_kept() -> None:
    text = json.dumps({"deployments": [{"booted": True}], "transaction": ["rebase", ":1.42", "/x"]})
    assert parse_status(text).transaction == ("rebase", ":1.42", "/x")


def test_missing_fields_take_defaults() -> None:
    status = parse_status(status_json({"booted": True}))
    assert status.booted == Deployment(booted=True)
    assert status.staged is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "not json at all, and more than thirty characters",
            r"failed to parse `rpm-ostree status --json` output \(not json at all, and more than "
            r"\[18 more chars\]\): Expecting value",
            id="bad-json",
        ),
        pytest.param("[]", r"failed to parse .*: no list of deployments", id="not-an-object"),
        pytest.param('{"deployments": {}}', r"no list of deployments", id="deployments-not-a-list"),
        pytest.param(status_json(), r"^not currently booted in a deployment$", id="no-deployments"),
        pytest.param(
            status_json({"booted": False, "staged": True}),
            r"^not currently booted in a deployment$",
            id="nothing-booted",
        ),
        pytest.param('{"deployments": ["x"]}', r"deployment 0 is not an object", id="deployment-not-object"),
        pytest.param(
            status_json({"booted": "yes"}), r"deployment 0: 'booted' is not a boolean", id="bool-type"
        ),
        pytest.param(
            status_json({"booted": True, "serial": True}), r"'serial' is not an integer", id="bool-is-not-int"
        ),
        pytest.param(
            status_json({"booted": True, "requested-packages": ["a", 1]}),
            r"'requested-packages' is not a list of strings",
            id="package-list-type",
        ),
    ],
)
def test_unreadable_status_raises(text: str, message: str) -> None:
    with pytest.raises(RpmOstreeError, match=message):
        parse_status(text)


# --- image references and the booted image ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (
            "ostree-unverified-registry:quay.io/exampleos/blah",
            OstreeImageReference("insecure", None, "registry", "quay.io/exampleos/blah"),
        ),
        (
            "ostree-unverified-image:docker://quay.io/exampleos/blah",
            OstreeImageReference("insecure", None, "registry", "quay.io/exampleos/blah"),
        ),
        (
            "ostree-unverified-image:registry:quay.io/exampleos/blah",
            OstreeImageReference("insecure", None, "registry", "quay.io/exampleos/blah"),
        ),
        (
            "ostree-image-signed:docker://quay.io/a/b@sha256:0123",
            OstreeImageReference("container-policy", None, "registry", "quay.io/a/b@sha256:0123"),
        ),
        (
            "ostree-remote-registry:fedora:quay.io/fedora/fedora-coreos:stable",
            OstreeImageReference("remote", "fedora", "registry", "quay.io/fedora/fedora-coreos:stable"),
        ),
        (
            "ostree-remote-image:fedora:registry:quay.io/fedora/fedora-coreos:stable",
            OstreeImageReference("remote", "fedora", "registry", "quay.io/fedora/fedora-coreos:stable"),
        ),
        (
            "ostree-remote-image:fedora:docker://quay.io/fedora/fedora-coreos:stable",
            OstreeImageReference("remote", "fedora", "registry", "quay.io/fedora/fedora-coreos:stable"),
        ),
        (
            "ostree-unverified-image:containers-storage:quay.io/a/b@sha256:0123",
            OstreeImageReference("insecure", None, "containers-storage", "quay.io/a/b@sha256:0123"),
        ),
        (
            "ostree-unverified-image:oci:/var/tmp/image",
            OstreeImageReference("insecure", None, "oci", "/var/tmp/image"),
        ),
    ],
)
def test_parses_ostree_image_references(ref: str, expected: OstreeImageReference) -> None:
    assert parse_ostree_image_ref(ref) == expected


@pytest.mark.parametrize(
    "ref",
    [
        "quay.io/exampleos/blah",
        "docker://quay.io/exampleos/blah",
        "ostree-unverified-registry:",
        "ostree-unverified-image:quay.io/exampleos/blah",  # no transport
        "ostree-unverified-image:docker:quay.io/exampleos/blah",  # docker needs //
        "ostree-unverified-image:ftp:quay.io/exampleos/blah",
        "ostree-remote-image:fedora",
        "ostree-remote-registry::quay.io/x",
    ],
)
def test_rejects_malformed_image_references(ref: str) -> None:
    with pytest.raises(ValueError):
        parse_ostree_image_ref(ref)


@pytest.mark.parametrize(
    ("booted", "expected"),
    [
        pytest.param(
            {"container-image-reference": "ostree-unverified-registry:q.io/os@sha256:1"}, "q.io/os@sha256:1"
        ),
        pytest.param(
            {"container-image-reference": "ostree-image-signed:docker://q.io/os:4.16"}, "q.io/os:4.16"
        ),
        pytest.param({"custom-origin": ["pivot://q.io/old@sha256:2", "Managed by MCO"]}, "q.io/old@sha256:2"),
        pytest.param(
            {"custom-origin": ["https://example.com/x", "other tool"]}, "", id="foreign-custom-origin"
        ),
        pytest.param(
            {
                "custom-origin": ["pivot://q.io/old@sha256:2", "Managed by MCO"],
                "container-image-reference": "ostree-unverified-registry:q.io/new@sha256:3",
            },
            "q.io/new@sha256:3",
            id="container-reference-wins",
        ),
        pytest.param({}, "", id="plain-ostree"),
    ],
)
def test_booted_image(booted: dict[str, Any], expected: str) -> None:
    staged = {"staged": True, "container-image-reference": "ostree-unverified-registry:q.io/staged"}
    assert booted_image(parse_status(status_json(staged, {**booted, "booted": True}))) == expected


def test_booted_image_with_malformed_reference_raises() -> None:
    status = Status((Deployment(booted=True, container_image_reference="nonsense"),))
    with pytest.raises(RpmOstreeError, match="failed to parse booted container image reference"):
        booted_image(status)


def test_parses_version_features() -> None:
    text = "rpm-ostree:\n Version: '2024.7'\n Git: abc\n Features:\n  - rust\n  - container\n"
    assert parse_version(text) == RpmOstreeVersion("2024.7", ("rust", "container"))


@pytest.mark.parametrize("text", ["{", "- a\n", "rpm-ostree: 3\n", "rpm-ostree:\n Features: x\n"])
def test_unreadable_version_raises(text: str) -> None:
    with pytest.raises(RpmOstreeError, match=r"failed to parse `rpm-ostree --version` output"):
        parse_version(text)


# --- command lines (RecordingRunner) -------------------------------------------------------------


class Sleeps:
    """A sleep that records instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client(runner: RecordingRunner, sleeps: Sleeps | None = None) -> RpmOstree:
    return RpmOstree(runner, sleep=sleeps or Sleeps())


def test_every_command_names_the_mco_client() -> None:
    runner = RecordingRunner().expect(
        ["rpm-ostree", "status", "--json"], stdout=fixture("fcos-container-status.json")
    )
    assert client(runner).status().booted.version == "36.20220820.3.0"
    assert runner.calls[0].env == {"RPMOSTREE_CLIENT_ID": CLIENT_ID}
    assert CLIENT_ID == "machine-config-operator"


def test_booted_image_via_status() -> None:
    booted = {"booted": True, "container-image-reference": "ostree-unverified-registry:q.io/os@sha256:1"}
    runner = RecordingRunner().expect(["rpm-ostree", "status", "--json"], stdout=status_json(booted))
    assert client(runner).booted_image() == "q.io/os@sha256:1"


def test_binary_replaces_rpm_ostree() -> None:
    runner = RecordingRunner().expect(["/opt/ro", "cleanup"])
    RpmOstree(runner, binary="/opt/ro").cleanup_pending()
    assert runner.commands == [("/opt/ro", "cleanup", "-p")]


def test_rebase_pulls_unverified_from_the_registry() -> None:
    runner = RecordingRunner().expect(["rpm-ostree", "rebase"])
    sleeps = Sleeps()
    client(runner, sleeps).rebase("quay.io/os@sha256:abc")
    assert runner.commands == [
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/os@sha256:abc")
    ]
    assert sleeps.calls == []


def test_kargs_output_is_returned_verbatim() -> None:
    runner = RecordingRunner().expect(["rpm-ostree", "kargs"], stdout="rw a=1\n")
    assert client(runner).kargs_output() == "rw a=1\n"
    assert runner.commands == [("rpm-ostree", "kargs")]


def test_verify_extensions_reads_the_staged_deployment() -> None:
    staged = {"staged": True, "requested-packages": ["libkadm5", "usbguard"]}
    booted = {"booted": True, "requested-packages": ["krb5-workstation", "libkadm5", "usbguard"]}
    runner = RecordingRunner().expect(["rpm-ostree", "status", "--json"], stdout=status_json(staged, booted))
    rpmostree = client(runner)
    rpmostree.verify_extensions(["usbguard"])
    with pytest.raises(RpmOstreeError) as info:
        rpmostree.verify_extensions(["usbguard", "libkadm5", "krb5-workstation"])
    assert str(info.value) == (
        "the following extension packages are missing from the staged deployment: [krb5-workstation]"
    )
    assert runner.commands == [("rpm-ostree", "status", "--json")] * 2


def test_verify_extensions_without_a_staged_deployment_fails() -> None:
    # it runs right after an `rpm-ostree update`: nothing staged means the update staged nothing
    booted = {"booted": True, "requested-packages": ["usbguard"]}
    runner = RecordingRunner().expect(["rpm-ostree", "status", "--json"], stdout=status_json(booted))
    with pytest.raises(RpmOstreeError) as info:
        client(runner).verify_extensions(["usbguard"])
    assert str(info.value) == "no staged deployment found after applying extensions"


def test_verify_extensions_with_nothing_expected_runs_nothing() -> None:
    runner = RecordingRunner()
    client(runner).verify_extensions([])
    assert runner.commands == []


FINALIZE_QUERY = ("-b", "-1", "-o", "cat", "_UID=0", "-u", "ostree-finalize-staged.service")


def test_the_previous_boots_finalization_error_is_the_units_first_error_line(tmp_path: Path) -> None:
    journal = "Finalizing staged deployment\nerror: Installing kernel: No space left\nerror: later\n"
    runner = RecordingRunner().expect(["journalctl"], stdout=journal)
    assert RpmOstree(runner, root=HostRoot("/")).previous_deployment_error() == (
        "error: Installing kernel: No space left"
    )
    # a root that is not a running system: its own journal directory
    assert RpmOstree(runner, root=HostRoot(tmp_path)).previous_deployment_error() is not None
    assert runner.commands == [
        ("journalctl", *FINALIZE_QUERY),
        ("journalctl", "--directory", f"{tmp_path}/var/log/journal", *FINALIZE_QUERY),
    ]


def test_no_error_line_is_no_finalization_error() -> None:
    runner = RecordingRunner().expect(["journalctl"], stdout="Finalizing staged deployment\n a error: b\n")
    assert RpmOstree(runner, root=HostRoot("/")).previous_deployment_error() is None


def test_an_unreadable_journal_is_upstreams_error() -> None:
    runner = RecordingRunner().expect(["journalctl"], returncode=1, stderr="No such boot ID in journal")
    with pytest.raises(RpmOstreeError, match=r"^error querying for previous finalization via journalctl: "):
        RpmOstree(runner, root=HostRoot("/")).previous_deployment_error()


def test_cleanups() -> None:
    runner = RecordingRunner().expect(["rpm-ostree", "cleanup"])
    rpmostree = client(runner)
    rpmostree.cleanup_pending()
    assert runner.commands == [("rpm-ostree", "cleanup", "-p")]


def test_failures_are_wrapped_with_the_command_output() -> None:
    runner = RecordingRunner().expect(
        ["rpm-ostree", "kargs"], returncode=1, stderr="error: No key 'x' found\n"
    )
    with pytest.raises(RpmOstreeError) as info:
        client(runner).run_planned(["rpm-ostree", "kargs", "--delete-if-present=x"])
    assert str(info.value) == (
        "command failed: rpm-ostree kargs --delete-if-present=x (exit 1): error: No key 'x' found"
    )
    assert isinstance(info.value.__cause__, CommandError)
    assert info.value.result is not None and info.value.result.returncode == 1


def test_missing_binary_is_not_disguised() -> None:
    runner = RecordingRunner().expect(["rpm-ostree"], raises=FileNotFoundError("rpm-ostree"))
    with pytest.raises(FileNotFoundError):
        client(runner).status()


def test_only_rpm_ostree_command_lines_are_run() -> None:
    with pytest.raises(ValueError, match="not an rpm-ostree command line"):
        client(RecordingRunner())._run(["systemctl", "reboot"])


# --- rebase retries ----------------------------------------------------------------------------------


def test_rebase_retries_with_backoff_until_it_succeeds() -> None:
    runner = RecordingRunner()
    runner.expect(["rpm-ostree", "rebase"], returncode=1, stderr="error: pull timed out", times=2)
    runner.expect(["rpm-ostree", "rebase"])
    sleeps = Sleeps()
    refreshed: list[int] = []
    client(runner, sleeps).rebase("q.io/os@sha256:1", before_attempt=lambda: refreshed.append(1))
    assert len(runner.commands) == 3
    assert sleeps.calls == [10, 20]
    assert len(refreshed) == 3  # before every attempt


def test_rebase_gives_up_after_seven_attempts() -> None:
    runner = RecordingRunner().expect(
        ["rpm-ostree", "rebase"], returncode=1, stderr="error: manifest unknown"
    )
    sleeps = Sleeps()
    with pytest.raises(RpmOstreeError) as info:
        client(runner, sleeps).rebase("q.io/os@sha256:1")
    assert len(runner.commands) == 7
    assert sleeps.calls == [10, 20, 40, 60, 60, 60]
    assert str(info.value) == (
        "failed to update OS to q.io/os@sha256:1 after retries: command failed: rpm-ostree rebase "
        "--experimental ostree-unverified-registry:q.io/os@sha256:1 (exit 1): error: manifest unknown: "
        "timed out waiting for the condition"
    )
    assert isinstance(info.value.__cause__, RpmOstreeError)


def test_rebase_is_retried_and_other_planned_commands_run_once() -> None:
    runner = RecordingRunner()
    runner.expect(["rpm-ostree", "rebase"], returncode=1, times=1)
    runner.expect(["rpm-ostree"])
    sleeps = Sleeps()
    rpmostree = client(runner, sleeps)
    rpmostree.rebase("q.io/os@sha256:1")
    rpmostree.run_planned(["rpm-ostree", "kargs", "--append=a=1"])
    assert runner.commands == [
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:q.io/os@sha256:1"),
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:q.io/os@sha256:1"),
        ("rpm-ostree", "kargs", "--append=a=1"),
    ]
    assert sleeps.calls == [10]


def test_planned_command_failure_is_wrapped() -> None:
    runner = RecordingRunner().expect(["rpm-ostree", "cleanup"], returncode=1, stderr="error: busy")
    with pytest.raises(
        RpmOstreeError, match=r"^command failed: rpm-ostree cleanup -p \(exit 1\): error: busy$"
    ):
        client(runner).run_planned(["rpm-ostree", "cleanup", "-p"])


def test_rebase_retry_delays_are_configurable() -> None:
    runner = RecordingRunner().expect(["rpm-ostree", "rebase"], returncode=1)
    sleeps = Sleeps()
    with pytest.raises(RpmOstreeError, match="after retries"):
        RpmOstree(runner, retry_delays=(), sleep=sleeps).rebase("x")
    assert len(runner.commands) == 1
    assert sleeps.calls == []


# --- against the rpm-ostree stand-in ---------------------------------------------------------------

BOOTED_IMAGE = "quay.io/openshift/os@sha256:1111"
NEW_IMAGE = "quay.io/openshift/os@sha256:2222"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "rpm-ostree-state.json"
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(path))
    monkeypatch.setenv("RPMOSTREE_STANDIN_BOOTED_IMAGE", BOOTED_IMAGE)
    monkeypatch.setenv("RPMOSTREE_STANDIN_BOOTED_KARGS", "rw root=UUID=1 console=tty0 console=ttyS0")
    for name in ("RPMOSTREE_STANDIN_FAIL", "RPMOSTREE_STANDIN_FAIL_TIMES", "RPMOSTREE_STANDIN_DROP_PACKAGES"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def standin(state: Path, sleeps: Sleeps) -> RpmOstree:
    return RpmOstree(SubprocessRunner(), sleep=sleeps, binary=str(STANDIN))


def run_standin(*args: str) -> str:
    return SubprocessRunner().run([str(STANDIN), *args]).stdout


@pytest.mark.allow_commands
def test_standin_starts_with_one_booted_deployment_in_the_real_format(standin: RpmOstree) -> None:
    status = standin.status()
    assert len(status.deployments) == 1
    assert status.staged is None
    assert booted_image(status) == BOOTED_IMAGE
    assert standin.kargs_output() == "rw root=UUID=1 console=tty0 console=ttyS0\n"
    # same keys as a real container deployment
    real = json.loads(fixture("fcos-container-status.json"))["deployments"][0]
    ours = json.loads(run_standin("status", "--json"))["deployments"][0]
    assert set(ours) == set(real)


@pytest.mark.allow_commands
def test_standin_rebase_stages_the_image(standin: RpmOstree, state: Path) -> None:
    standin.rebase(NEW_IMAGE)
    status = standin.status()
    staged = status.staged
    assert staged is not None
    assert staged.container_image_reference == f"ostree-unverified-registry:{NEW_IMAGE}"
    assert staged.container_image_reference_digest == "sha256:2222"
    assert staged.checksum != status.booted.checksum
    assert booted_image(status) == BOOTED_IMAGE  # nothing boots before a reboot
    calls = json.loads(state.read_text())["standin"]["calls"]
    assert {c["client-id"] for c in calls} == {"machine-config-operator"}


# The update runs the planner's command lines through `run_planned`; these drive the stand-in the
# same way (False: the planner would have built no command).


def run(rpm: RpmOstree, cmd: list[str] | None) -> bool:
    if cmd is None:
        return False
    rpm.run_planned(cmd)
    return True


def kargs(rpm: RpmOstree, old: list[str], new: list[str]) -> bool:
    return run(rpm, kargs_command(old, new))


def extensions(rpm: RpmOstree, installed: list[str], wanted: list[str]) -> bool:
    return run(rpm, extensions_command(installed, wanted))


@pytest.mark.allow_commands
def test_standin_kargs_round_trip(standin: RpmOstree) -> None:
    assert kargs(standin, [], ["a=1", "nosmt"]) is True
    assert standin.kargs_output().split() == [
        "rw",
        "root=UUID=1",
        "console=tty0",
        "console=ttyS0",
        "a=1",
        "nosmt",
    ]
    first = standin.status().staged
    assert first is not None
    assert kargs(standin, ["a=1", "nosmt"], ["a=2"]) is True
    assert standin.kargs_output().split() == ["rw", "root=UUID=1", "console=tty0", "console=ttyS0", "a=2"]
    status = standin.status()
    assert len(status.deployments) == 2  # the second change amended the staged deployment
    # kernel arguments live in the boot entry, not the commit
    assert status.staged is not None and status.staged.checksum == status.booted.checksum
    assert status.staged.serial == 1


@pytest.mark.allow_commands
def test_standin_keeps_duplicate_kargs_in_order(standin: RpmOstree) -> None:
    kargs(standin, [], ["y=0", "z=4", "y=1", "z=4"])
    assert standin.kargs_output().split()[-4:] == ["y=0", "z=4", "y=1", "z=4"]
    kargs(standin, ["y=0", "z=4", "y=1", "z=4"], ["y=0"])
    assert standin.kargs_output().split()[-1:] == ["y=0"]
    assert "z=4" not in standin.kargs_output().split()


@pytest.mark.allow_commands
def test_standin_delete_if_present_tolerates_missing_args(standin: RpmOstree) -> None:
    kargs(standin, ["gone=1"], ["new=1"])
    assert standin.kargs_output().split()[-1] == "new=1"


@pytest.mark.allow_commands
@pytest.mark.parametrize(
    ("arg", "error"),
    [
        ("--delete=missing", "error: No key 'missing' found"),
        ("--delete=rw=1", "error: No karg 'rw=1' found"),
        ("--delete=console", "error: Multiple values for key 'console' found"),
        ("--delete=console=tty9", "error: No karg 'console=tty9' found"),
    ],
)
def test_standin_delete_fails_like_ostree(state: Path, arg: str, error: str) -> None:
    with pytest.raises(CommandError) as info:
        run_standin("kargs", arg)
    assert info.value.result.returncode == 1
    assert info.value.result.stderr.strip() == error
    # the failed call staged nothing
    assert json.loads(run_standin("status", "--json"))["deployments"][0]["booted"] is True


@pytest.mark.allow_commands
def test_standin_delete_of_one_value_among_several(state: Path) -> None:
    run_standin("kargs", "--delete=console=tty0")
    assert run_standin("kargs").split() == ["rw", "root=UUID=1", "console=ttyS0"]


@pytest.mark.allow_commands
def test_standin_cleanup_pending_drops_the_staged_deployment(standin: RpmOstree) -> None:
    standin.rebase(NEW_IMAGE)
    kargs(standin, [], ["a=1"])
    standin.cleanup_pending()
    status = standin.status()
    assert status.staged is None
    assert len(status.deployments) == 1
    assert "a=1" not in standin.kargs_output().split()
    standin.cleanup_pending()  # nothing staged: still fine


@pytest.mark.allow_commands
def test_standin_cleanup_rollback_after_a_reboot(standin: RpmOstree) -> None:
    standin.rebase(NEW_IMAGE)
    run_standin("standin-reboot")
    status = standin.status()
    assert booted_image(status) == NEW_IMAGE
    assert len(status.deployments) == 2
    run(standin, ["rpm-ostree", "cleanup", "-r"])  # the stand-in's rollback cleanup
    assert len(standin.status().deployments) == 1


@pytest.mark.allow_commands
def test_standin_reboot_whose_finalization_failed_boots_the_same_deployment(standin: RpmOstree) -> None:
    booted = standin.status().booted
    standin.rebase(NEW_IMAGE)
    run_standin("standin-reboot", "--finalize-fails")
    status = standin.status()
    assert status.deployments == (booted,)


@pytest.mark.allow_commands
def test_standin_extensions_and_kernel_swap(standin: RpmOstree) -> None:
    assert extensions(standin, [], ["usbguard"]) is True
    run(standin, kernel_switch_command("realtime"))
    staged = standin.status().staged
    assert staged is not None
    assert staged.requested_packages == (
        "kernel-rt-core",
        "kernel-rt-modules",
        "kernel-rt-modules-extra",
        "usbguard",
    )
    assert staged.requested_base_removals == DEFAULT_KERNEL_PACKAGES
    assert staged.base_checksum is not None and staged.base_commit != staged.checksum
    # undo both, as a revert to the old config would
    assert (
        run(standin, kernel_override_reset_command(staged.requested_base_removals, staged.requested_packages))
        is True
    )
    assert extensions(standin, ["usbguard"], []) is True
    staged = standin.status().staged
    assert staged is not None
    assert staged.requested_packages == () and staged.requested_base_removals == ()
    assert staged.base_checksum is None


@pytest.mark.allow_commands
def test_standin_reset_needs_an_override_on_the_pending_deployment(state: Path) -> None:
    # nothing was swapped on the booted deployment: rpm-ostree refuses to reset it
    with pytest.raises(CommandError, match="No overrides for package 'kernel'"):
        SubprocessRunner().run([str(STANDIN), "override", "reset", "kernel", "--uninstall", "kernel-rt-core"])
    assert json.loads(state.read_text())["deployments"][0]["staged"] is False


@pytest.mark.allow_commands
def test_standin_records_the_swap_on_the_staged_deployment_only(standin: RpmOstree) -> None:
    run(standin, kernel_switch_command("realtime"))
    status = standin.status()
    assert status.staged is not None
    assert status.staged.requested_base_removals == DEFAULT_KERNEL_PACKAGES
    assert (status.booted.requested_packages, status.booted.requested_base_removals) == ((), ())
    run_standin("standin-reboot")
    assert standin.status().booted.requested_packages == REALTIME_KERNEL_PACKAGES


@pytest.mark.allow_commands
def test_standin_can_drop_installed_packages(standin: RpmOstree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RPMOSTREE_STANDIN_DROP_PACKAGES", "libkadm5")
    assert extensions(standin, [], ["kerberos"]) is True
    staged = standin.status().staged
    assert staged is not None and staged.requested_packages == ("krb5-workstation",)
    with pytest.raises(RpmOstreeError, match=r"missing from the staged deployment: \[libkadm5\]"):
        standin.verify_extensions(["krb5-workstation", "libkadm5"])


@pytest.mark.allow_commands
def test_standin_version_has_the_container_feature(standin: RpmOstree) -> None:
    assert "container" in standin.version().features


@pytest.mark.allow_commands
def test_standin_rebase_retries_injected_failures(
    standin: RpmOstree, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL", "rebase")
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL_TIMES", "2")
    standin.rebase(NEW_IMAGE)
    assert sleeps.calls == [10, 20]
    staged = standin.status().staged
    assert (
        staged is not None and staged.container_image_reference == f"ostree-unverified-registry:{NEW_IMAGE}"
    )


@pytest.mark.allow_commands
def test_standin_rebase_gives_up_on_a_persistent_failure(
    standin: RpmOstree, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL", "rebase")
    with pytest.raises(
        RpmOstreeError, match=rf"^failed to update OS to {NEW_IMAGE} after retries: .*injected failure"
    ):
        standin.rebase(NEW_IMAGE)
    assert sleeps.calls == [10, 20, 40, 60, 60, 60]
    assert standin.status().staged is None


@pytest.mark.allow_commands
def test_standin_requires_its_state_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RPMOSTREE_STANDIN_STATE", raising=False)
    with pytest.raises(CommandError, match="RPMOSTREE_STANDIN_STATE is not set"):
        run_standin("status", "--json")


def test_require_feature_fails_without_the_container_feature() -> None:
    old = "rpm-ostree:\n Version: '2022.2'\n Features:\n  - rust\n"
    runner = RecordingRunner().expect(["rpm-ostree", "--version"], stdout=old)
    with pytest.raises(RpmOstreeError) as info:
        client(runner).require_feature("container")
    assert str(info.value) == (
        "rpm-ostree 2022.2 lacks the container feature: "
        "updating the OS through a container is not supported by mcd"
    )
    new = "rpm-ostree:\n Version: '2025.1'\n Features:\n  - rust\n  - container\n"
    client(RecordingRunner().expect(["rpm-ostree", "--version"], stdout=new)).require_feature("container")


def test_link_pull_secret_needs_a_root() -> None:
    with pytest.raises(ValueError, match="no node root"):
        client(RecordingRunner()).link_pull_secret()
