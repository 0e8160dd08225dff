"""One object by name, as an informer of one: list it, watch from the list's resourceVersion,
resume from the last one seen when a stream breaks, list again on 410 Gone or when the server
ends watches at once. The agent's Node and the ControllerConfig are both followed this way."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from mcd.agent.errors import ApiError, Backoff, GoneError, NotFoundError

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]

# a watch that keeps failing is retried at least this often: the object's changes are the work
WATCH_RETRY_MAX = 5.0
# a watch that ends sooner than this was cut by the server (or a proxy), not timed out
WATCH_MIN_SECONDS = 1.0


def follow(
    what: str,
    list_one: Callable[[], tuple[Obj | None, str]],
    watch_from: Callable[[str], Iterable[tuple[str, Obj]]],
    seen: Callable[[Obj | None], None],
    stop: threading.Event,
    *,
    after_watch: Callable[[], None] | None = None,
    absent: Callable[[], float] | None = None,
) -> None:
    """Call `seen` with every version of the object (None: there is none, or it was deleted)
    until `stop` is set. `after_watch` runs when a watch ends (a resync point); `absent`, when
    given, answers a 404 of the collection (an API the cluster does not serve) with how long to
    wait before looking again; without it a 404 is retried like any API error."""
    rv = ""
    backoff = Backoff(cap=WATCH_RETRY_MAX)
    while not stop.is_set():
        try:
            if not rv:
                obj, rv = list_one()
                seen(obj)
            started = time.monotonic()
            for etype, obj in watch_from(rv):
                rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                if etype != "BOOKMARK":
                    seen(None if etype == "DELETED" else obj)
                backoff.reset()
                if stop.is_set():
                    return
            if time.monotonic() - started < WATCH_MIN_SECONDS:
                # a server that ends watches at once must not make this loop spin, nor keep
                # changes from us: back off, then list (a list always answers)
                stop.wait(backoff.next_delay())
                rv = ""
            if after_watch is not None:
                after_watch()
        except GoneError:
            LOG.info("watch of %s expired: listing it again", what)
            rv = ""
        except NotFoundError as exc:
            if absent is None:
                _retry(what, exc, backoff, stop)
            else:
                stop.wait(absent())
                rv = ""
        except ApiError as exc:
            _retry(what, exc, backoff, stop)


def _retry(what: str, exc: ApiError, backoff: Backoff, stop: threading.Event) -> None:
    delay = backoff.next_delay()
    LOG.info("watch of %s interrupted (%s): resuming in %.0fs", what, exc, delay)
    stop.wait(delay)
