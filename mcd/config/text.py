"""Safe rendering of untrusted text in messages. Pure: no I/O.

Paths and values in a config come from whoever wrote it: quoted raw into a terminal line, a
control character (an escape sequence, a carriage return) could rewrite what the admin sees,
and a path of thousands of bytes would drown the line. Messages show them through `shown`.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; also the Unicode line and paragraph separators and bidi overrides,
# which reorder or break a terminal line just as well
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
SHOWN_LIMIT = 200  # characters of one quoted value


def escape_controls(text: str) -> str:
    """`text` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u202e``)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def shown(text: str, limit: int = SHOWN_LIMIT) -> str:
    """`text` for a message: controls escaped, clipped to `limit` characters with an ellipsis."""
    clipped = text if len(text) <= limit else text[:limit] + "…"
    return escape_controls(clipped)


def clip(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[:limit] + "…"
