"""One object by name, as an informer of one: list it, watch from the list's resourceVersion,
resume from the last one seen when a stream breaks, list again on 410 Gone or when the server
ends watches at once. The agent's Node and the ControllerConfig are both followed this way, and
the MachineConfigs as a collection watched from "now" (`follow_events`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from mcd.kube.backoff import Backoff
from mcd.kube.errors import ApiError, GoneError, NotFoundError

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]

# a watch that keeps failing is retried at least this often: the object's changes are the work
WATCH_RETRY_MAX = 5.0
# a watch that ends sooner than this was cut by the server (or a proxy), not timed out
WATCH_MIN_SECONDS = 1.0


def follow(
    what: str,
    list_one: Callable[[], tuple[Obj | None, str]],
    watch_from: Callable[[str], Iterable[tuple[str, Obj, bytes | None]]],
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

    def event(etype: str, obj: Obj, _text: bytes | None) -> None:
        seen(None if etype == "DELETED" else obj)

    follow_events(
        what, list_one, watch_from, event, stop, listed=seen, after_watch=after_watch, absent=absent
    )


def follow_events(
    what: str,
    list_one: Callable[[], tuple[Obj | None, str]],
    watch_from: Callable[[str], Iterable[tuple[str, Obj, bytes | None]]],
    event: Callable[[str, Obj, bytes | None], None],
    stop: threading.Event,
    *,
    listed: Callable[[Obj | None], None] | None = None,
    cut: Callable[[], None] | None = None,
    settled: Callable[[], None] | None = None,
    after_watch: Callable[[], None] | None = None,
    absent: Callable[[], float] | None = None,
) -> None:
    """`follow` by events: `listed` gets what a list found, `event` each (type, object, text)
    but bookmarks; `cut` runs whenever a watch broke off (an error, 410 Gone, a server that ends
    it at once), before anything is listed or watched again: what came meanwhile is not known;
    `settled` after each such event, once this loop let go of it."""
    rv = ""
    backoff = Backoff(cap=WATCH_RETRY_MAX)
    while not stop.is_set():
        try:
            if not rv:
                obj, rv = list_one()
                if listed is not None:
                    listed(obj)
            started = time.monotonic()
            for etype, obj, text in watch_from(rv):
                rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                if etype != "BOOKMARK":
                    event(etype, obj, text)
                del obj, text  # a MachineConfig's event is megabytes: not kept while the watch waits
                if etype != "BOOKMARK" and settled is not None:
                    settled()
                backoff.reset()
                if stop.is_set():
                    return
            if time.monotonic() - started < WATCH_MIN_SECONDS:
                # a server that ends watches at once must not make this loop spin, nor keep
                # changes from us: back off, then list (a list always answers)
                _cut(cut)
                stop.wait(backoff.next_delay())
                rv = ""
            if after_watch is not None:
                after_watch()
        except GoneError:
            _cut(cut)
            LOG.info("watch of %s expired: listing it again", what)
            rv = ""
        except NotFoundError as exc:
            _cut(cut)
            if absent is None:
                _retry(what, exc, backoff, stop)
            else:
                stop.wait(absent())
                rv = ""
        except ApiError as exc:
            _cut(cut)
            _retry(what, exc, backoff, stop)


def _cut(cut: Callable[[], None] | None) -> None:
    if cut is not None:
        cut()


def _retry(what: str, exc: ApiError, backoff: Backoff, stop: threading.Event) -> None:
    delay = backoff.next_delay()
    LOG.info("watch of %s interrupted (%s): resuming in %.0fs", what, exc, delay)
    stop.wait(delay)
