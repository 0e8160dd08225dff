"""Logging of the long-running commands: to the journal with each record's priority when stderr
is the journal (so `journalctl -p err` finds failures), to stderr otherwise, one line per record
in klog's shape (`I1128 12:00:00.123456   12345 file.py:42] message`, what `kubectl logs` shows
for every other node component), or with `--log-format json` one JSON object per line (the
shape of Kubernetes components' JSON logs: ts, caller, msg, plus level and logger).

A warning identical to one already given in the last ten minutes is not repeated (at -vv it is):
the same absent thing, met on every sync, is said once, not once per update."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable

from systemd.journal import JournalHandler

LOG = logging.getLogger("mcd.cli")
PROGRESS = logging.getLogger("mcd.progress")  # long work's phases: shown at every verbosity


def stderr_is_journal() -> bool:
    """systemd sets JOURNAL_STREAM to the device and inode of the journal stream it connected to
    stderr; a redirected stderr (a pipe, a file) no longer matches."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return bool(expected) and expected == f"{st.st_dev}:{st.st_ino}"


REPEAT_WINDOW = 600.0  # seconds an identical warning stays said
_KLOG_SEVERITY = {logging.DEBUG: "I", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E"}


class KlogFormatter(logging.Formatter):
    """klog's header: severity letter, month and day, wall time to the microsecond, the process
    id right-aligned in 7 columns, the source file and line; then the message (and a traceback
    on the lines after, as klog prints a stack)."""

    def format(self, record: logging.LogRecord) -> str:
        severity = _KLOG_SEVERITY.get(record.levelno, "E" if record.levelno > logging.ERROR else "I")
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        head = f"{severity}{stamp}.{micros:06d} {record.process:7d} {record.filename}:{record.lineno}]"
        text = f"{head} {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (seconds since the epoch), level, logger, caller, msg, and
    err with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "caller": f"{record.filename}:{record.lineno}",
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["err"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class SaidOnce(logging.Filter):
    """Drops a WARNING whose logger and text are those of one passed in the last `window`
    seconds (other levels pass: errors are never hidden, info is asked for)."""

    def __init__(self, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window, self.clock = window, clock
        self._said: dict[tuple[str, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        key, now = (record.name, record.getMessage()), self.clock()
        last = self._said.get(key)
        if last is not None and now - last < self.window:
            return False
        self._said[key] = now
        return True


def setup_logging(verbosity: int, log_format: str = "text") -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler: logging.Handler
    if stderr_is_journal() and log_format == "text":
        # records keep their priority (err, warning …), so `journalctl -p err` finds failures;
        # the journal stamps each line itself
        handler = JournalHandler(SYSLOG_IDENTIFIER="mcd")
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if log_format == "json" else KlogFormatter())
    if verbosity < 2:
        handler.addFilter(SaidOnce())
    logging.basicConfig(level=level, handlers=[handler])
    # one line per HTTP connection says nothing an operator needs, even at -vv
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    PROGRESS.setLevel(logging.INFO)



# flags upstream's DaemonSet passes that mcd has no use for: accepted, and said once
UNUSED_UPSTREAM_FLAGS = (
    ("payload_version", "--payload-version", "the release payload version is only reported upstream"),
    ("tls_cipher_suites", "--tls-cipher-suites", "the TLS metrics endpoint keeps Python's defaults"),
    ("tls_min_version", "--tls-min-version", "the TLS metrics endpoint takes TLS 1.2 and later"),
)


def log_unused_flags(args: argparse.Namespace) -> None:
    for dest, flag, why in UNUSED_UPSTREAM_FLAGS:
        value = getattr(args, dest, None)
        if value is not None:
            LOG.info("accepted %s=%s and ignored it: %s", flag, value, why)
