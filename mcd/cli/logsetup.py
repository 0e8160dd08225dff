"""Logging of the long-running commands: to the journal with each record's priority when stderr
is the journal (so `journalctl -p err` finds failures), to stderr otherwise."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from systemd.journal import JournalHandler

LOG = logging.getLogger("mcd.cli")


def stderr_is_journal() -> bool:
    """systemd sets JOURNAL_STREAM to the device and inode of the journal stream it connected to
    stderr; a redirected stderr (a pipe, a file) no longer matches."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return bool(expected) and expected == f"{st.st_dev}:{st.st_ino}"


def setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler: logging.Handler
    if stderr_is_journal():
        # records keep their priority (err, warning …), so `journalctl -p err` finds failures
        handler = JournalHandler(SYSLOG_IDENTIFIER="mcd")
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    # one line per HTTP connection says nothing an operator needs, even at -vv
    logging.getLogger("urllib3").setLevel(logging.WARNING)


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
