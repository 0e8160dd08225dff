"""mcd.host.runner: the one way mcd runs commands, and the scripted stand-in tests use."""

from __future__ import annotations

import logging
import sys

import pytest
from recording import RecordedCall, RecordingRunner, UnexpectedCommand

from mcd.host.runner import CommandError, CommandResult, CommandTimeout, SubprocessRunner

# --- CommandError ---------------------------------------------------------------------------------


def test_command_error_message_quotes_argv_and_shows_stderr_tail() -> None:
    result = CommandResult(("systemctl", "enable", "a b.service"), 1, "", "line1\nline2\n")
    error = CommandError(result)
    assert str(error) == "command failed: systemctl enable 'a b.service' (exit 1): line1\nline2"
    assert error.result is result
    assert isinstance(error, RuntimeError)


def test_command_error_tail_is_the_last_lines() -> None:
    stderr = "".join(f"l{i}\n" for i in range(30))
    message = str(CommandError(CommandResult(("x",), 2, "", stderr)))
    assert message.endswith(": " + "\n".join(f"l{i}" for i in range(20, 30)))
    assert "l19" not in message


def test_command_error_falls_back_to_stdout_then_to_nothing() -> None:
    assert str(CommandError(CommandResult(("x",), 3, "out\n", ""))) == "command failed: x (exit 3): out"
    assert str(CommandError(CommandResult(("x",), 3, "", " \n"))) == "command failed: x (exit 3)"


# --- RecordingRunner ------------------------------------------------------------------------------


def test_recording_runner_answers_and_records() -> None:
    runner = RecordingRunner().expect(["systemctl", "is-enabled"], stdout="enabled\n")
    result = runner.run(["systemctl", "is-enabled", "foo.service"], input=b"in", env={"A": "1"}, timeout=5)
    assert result == CommandResult(("systemctl", "is-enabled", "foo.service"), 0, "enabled\n", "")
    assert runner.calls == [RecordedCall(("systemctl", "is-enabled", "foo.service"), b"in", {"A": "1"}, 5)]
    assert runner.commands == [("systemctl", "is-enabled", "foo.service")]


def test_unexpected_command_raises_and_is_still_recorded() -> None:
    runner = RecordingRunner().expect(["rpm", "-qf"])
    with pytest.raises(UnexpectedCommand, match=r"unexpected command: rm -rf / \(expected: rpm -qf\)"):
        runner.run(["rm", "-rf", "/"])
    assert runner.commands == [("rm", "-rf", "/")]
    assert issubclass(UnexpectedCommand, AssertionError)
    assert not issubclass(UnexpectedCommand, CommandError)  # `except CommandError` cannot swallow it


def test_prefix_must_match_whole_arguments() -> None:
    runner = RecordingRunner().expect(["systemctl", "enable"])
    with pytest.raises(UnexpectedCommand):
        runner.run(["systemctl", "enabled"])
    with pytest.raises(UnexpectedCommand):
        runner.run(["systemctl"])


def test_longest_prefix_wins() -> None:
    runner = RecordingRunner().expect(["systemctl"], stdout="generic").expect(["systemctl", "preset"], 1)
    assert runner.run(["systemctl", "daemon-reload"]).stdout == "generic"
    assert runner.run(["systemctl", "preset", "x"], check=False).returncode == 1


def test_scripted_sequence_with_times() -> None:
    runner = RecordingRunner()
    runner.expect(["rpm-ostree", "status"], stdout="first", times=1)
    runner.expect(["rpm-ostree", "status"], stdout="then")
    outputs = [runner.run(["rpm-ostree", "status", "--json"]).stdout for _ in range(3)]
    assert outputs == ["first", "then", "then"]


def test_exhausted_expectation_makes_the_command_unexpected() -> None:
    runner = RecordingRunner().expect(["systemctl", "reboot"], times=1)
    runner.run(["systemctl", "reboot"])
    with pytest.raises(UnexpectedCommand, match="expected: nothing"):
        runner.run(["systemctl", "reboot"])


def test_pending_lists_unconsumed_counted_expectations() -> None:
    runner = RecordingRunner().expect(["a"], times=2).expect(["b"], times=1).expect(["c"])
    runner.run(["a"])
    runner.run(["b"])
    assert runner.pending() == [("a",)]


def test_recording_runner_honours_check() -> None:
    runner = RecordingRunner().expect(["false"], 1, stderr="nope\n")
    with pytest.raises(CommandError, match=r"^command failed: false \(exit 1\): nope$"):
        runner.run(["false"])
    assert runner.run(["false"], check=False).returncode == 1


def test_recording_runner_can_simulate_a_missing_executable() -> None:
    runner = RecordingRunner().expect(
        ["rpm"], raises=FileNotFoundError(2, "No such file or directory", "rpm")
    )
    with pytest.raises(FileNotFoundError):
        runner.run(["rpm", "-qf", "/etc/chrony.conf"])


# --- SubprocessRunner -----------------------------------------------------------------------------


def test_subprocess_runner_is_blocked_without_the_marker() -> None:
    with pytest.raises(RuntimeError, match="allow_commands"):
        SubprocessRunner().run(["true"])


@pytest.mark.allow_commands
def test_true_and_false() -> None:
    runner = SubprocessRunner()
    assert runner.run(["true"]) == CommandResult(("true",), 0, "", "")
    with pytest.raises(CommandError, match=r"^command failed: false \(exit 1\)$") as info:
        runner.run(["false"])
    assert info.value.result.returncode == 1
    assert runner.run(["false"], check=False).returncode == 1


@pytest.mark.allow_commands
def test_echo_output_is_captured_and_not_shell_expanded() -> None:
    result = SubprocessRunner().run(["echo", "$HOME", "a  b", "*"])
    assert result.stdout == "$HOME a  b *\n"


@pytest.mark.allow_commands
def test_stderr_and_exit_status_reach_the_error() -> None:
    code = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    with pytest.raises(CommandError, match=r"\(exit 3\): boom$"):
        SubprocessRunner().run([sys.executable, "-c", code])


@pytest.mark.allow_commands
def test_input_is_fed_to_stdin_and_stdin_is_closed_otherwise() -> None:
    runner = SubprocessRunner()
    assert runner.run(["cat"], input=b"piped\n").stdout == "piped\n"
    assert runner.run(["cat"], timeout=10).stdout == ""  # /dev/null, not the test's stdin


@pytest.mark.allow_commands
def test_env_is_added_to_the_inherited_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCD_INHERITED", "yes")
    result = SubprocessRunner().run(["printenv", "MCD_INHERITED", "MCD_ADDED"], env={"MCD_ADDED": "1"})
    assert result.stdout == "yes\n1\n"


@pytest.mark.allow_commands
def test_invalid_utf8_is_replaced() -> None:
    code = "import sys; sys.stdout.buffer.write(b'a\\xffb')"
    assert SubprocessRunner().run([sys.executable, "-c", code]).stdout == "a\ufffdb"


@pytest.mark.allow_commands
def test_missing_executable_raises_file_not_found() -> None:
    with pytest.raises(FileNotFoundError):
        SubprocessRunner().run(["/nonexistent/mcd-no-such-tool"])


@pytest.mark.allow_commands
def test_timeout_raises_even_without_check() -> None:
    code = "import sys, time; print('started', flush=True); time.sleep(60)"
    with pytest.raises(CommandTimeout, match=r"timed out after 0\.5s") as info:
        SubprocessRunner().run([sys.executable, "-c", code], check=False, timeout=0.5)
    assert isinstance(info.value, CommandError)
    assert info.value.result.returncode == -9


@pytest.mark.allow_commands
def test_each_command_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="mcd.host.runner"):
        SubprocessRunner().run(["echo", "a b"])
    assert "running: echo 'a b'" in caplog.messages
