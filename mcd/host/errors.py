"""The host layer's common error, and the one way an OS error or a path is put into a message.

`HostError`: an operation on the node's root was refused or failed (a file, a unit, an account,
the root lock, the probe); the message names the path or command. Its kinds are `StepError` here
(one step of an update: `mcd.host.state`, `mcd.update.perform`), `RootLockError`
(`mcd.host.rootlock`) and `ProbeError` (`mcd.host.facts`). For whom: the executor
(`mcd.update.transaction`), which reports them as its `UpdateError`. The errors of one tool are
not HostErrors and stay in its module: `CommandError` (runner), `RpmOstreeError`,
`SystemdError`, `RebootError`, `StateError`, `PathEscapeError` (a path leading out of the root).

`os_error_text` and `shown_path` word every such message (the CLI's too).
"""

from __future__ import annotations

import os

from mcd.config.text import escape_controls, shown

# a path in a message: enough to recognise it; ENAMETOOLONG paths run to thousands of bytes
SHOWN_PATH = 120


class HostError(RuntimeError):
    """A host operation was refused or failed; the message names the path or command involved."""


class StepError(HostError):
    """A step of an update failed; the message names the step, then what the system said."""


def os_error_text(exc: OSError) -> str:
    """`No space left on device: /etc/x` for an OS error: no errno prefix, the path clipped, no
    control characters (a path comes from the config)."""
    if exc.strerror:
        text = exc.strerror
        for name in (exc.filename, exc.filename2):
            if isinstance(name, str | bytes):
                text += f": {shown(os.fsdecode(name), SHOWN_PATH)}"
        return escape_controls(text)
    return escape_controls(str(exc))


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path for a message: clipped, controls escaped."""
    return shown(os.fspath(path), SHOWN_PATH)
