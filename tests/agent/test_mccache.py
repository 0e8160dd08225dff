"""The MachineConfig cache in this process (`mcd.agent.mccache`), fed events by hand or from a
scripted watch: one entry at most, of the node's pool, newest wins, dropped on DELETED and when
the watch breaks off, never handed out for another name, nor twice; and what the watch stream
is read into (`mcd.kube.wire`): lines across chunks, the object's text cut out as served;
and what the watch asks of the stand-in API server."""

from __future__ import annotations

import gc
import json
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer
from renames import record_renames
from simcluster import Cluster

from mcd.agent.applied import parse_machineconfig
from mcd.agent.mccache import MachineConfigCache
from mcd.agent.sync import Result
from mcd.config.machineconfig import MachineConfig
from mcd.host import state
from mcd.kube import watch as objectwatch
from mcd.kube.client import NO_OBJECT
from mcd.kube.errors import ApiError, GoneError
from mcd.kube.wire import lines, watch_event
from mcd.node import annotations as ann
from mcd.runtime import guard

Obj = dict[str, Any]


def _mc(name: str, rv: str = "1", content: str = "a=1\n") -> Obj:
    obj: Obj = mc_object(name, files=[ign_file("/etc/mcd-test/a.conf", content)])
    obj["metadata"]["resourceVersion"] = rv
    return obj


DISK = parse_machineconfig(_mc("rendered-worker-0"), "disk")


def _cache(disk: MachineConfig | None = DISK, api: Any = None) -> MachineConfigCache:
    return MachineConfigCache(api, lambda: disk, threading.Event())


def _text(obj: Obj) -> bytes:
    return json.dumps(obj).encode()


def test_the_newest_config_of_the_pool_is_held_parsed_and_taken_once() -> None:
    cache = _cache()
    obj = _mc("rendered-worker-1", "7")
    cache.event("ADDED", obj, _text(obj))
    assert cache.take("rendered-worker-2") is None  # never for another name
    ahead = cache.take("rendered-worker-1")
    assert ahead is not None and (ahead.name, ahead.resource_version) == ("rendered-worker-1", "7")
    assert ahead.config.name == "rendered-worker-1"
    # as served: the update records this text, not the object encoded again
    assert ahead.config.raw_text is not None and ahead.config.raw_text[1] == _text(obj)
    assert cache.take("rendered-worker-1") is None and cache.held() is None
    # taken is taken: a later version of it is not held (the sync keeps its copy, a retry reads)
    cache.event("MODIFIED", _mc("rendered-worker-1", "8"), None)
    assert cache.held() is None


def test_a_newer_event_replaces_the_entry_and_what_it_held_is_freed() -> None:
    cache = _cache()
    refs = []
    for i in range(1, 6):
        cache.event("ADDED", _mc(f"rendered-worker-{i}", str(i), f"a={i}\n"), None)
        entry = cache._entry
        assert entry is not None
        refs.append(weakref.ref(entry.config))
    gc.collect()
    # one entry: every config held before the newest is gone from memory
    assert [r() is not None for r in refs] == [False, False, False, False, True]
    cache.event("MODIFIED", _mc("rendered-worker-5", "9", "a=9\n"), None)
    ahead = cache.take("rendered-worker-5")
    assert ahead is not None and ahead.resource_version == "9"
    assert ahead.config.raw["metadata"]["resourceVersion"] == "9"


def test_only_rendered_configs_of_the_nodes_pool_are_held_and_not_the_one_on_disk() -> None:
    cache = _cache()
    for name in ("rendered-master-1", "rendered-worker-rt-1", "00-worker", "rendered-worker-0"):
        cache.event("ADDED", _mc(name), None)
        assert cache.held() is None, name
    assert _cache(disk=None).held() is None  # no config on disk: no pool known, nothing held
    nothing = _cache(disk=None)
    nothing.event("ADDED", _mc("rendered-worker-1"), None)
    assert nothing.held() is None


def test_a_deleted_config_is_dropped_and_another_deletion_leaves_it() -> None:
    cache = _cache()
    cache.event("ADDED", _mc("rendered-worker-1"), None)
    cache.event("DELETED", _mc("rendered-worker-9"), None)
    assert cache.held() == "rendered-worker-1"
    cache.event("DELETED", _mc("rendered-worker-1"), None)
    assert cache.held() is None and cache.take("rendered-worker-1") is None


def test_an_invalid_newest_config_is_not_held_nor_the_older_one() -> None:
    cache = _cache()
    cache.event("ADDED", _mc("rendered-worker-1"), None)
    bad = _mc("rendered-worker-2")
    bad["spec"]["config"] = {"ignition": {"version": "9.9.9"}}
    cache.event("ADDED", bad, None)
    assert cache.held() is None  # the sync reads it and reports what is wrong, as without the cache


class ScriptedApi:
    """list_named/watch as the client answers them: each watch plays the next script."""

    def __init__(self, cache_box: list[MachineConfigCache], scripts: list[list[Any]]) -> None:
        self.box, self.scripts = cache_box, scripts
        self.lists: list[tuple[str, str]] = []
        self.watches: list[str] = []

    def list_named(self, resource: str, name: str) -> tuple[Obj | None, str]:
        self.lists.append((resource, name))
        return None, "100"

    def watch(
        self, resource: str, rv: str, timeout: int, *, name: str = ""
    ) -> Iterator[tuple[str, Obj, bytes | None]]:
        self.watches.append(rv)
        if not self.scripts:
            self.box[0].stop.set()
            return
        for step in self.scripts.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step


class NoWait(threading.Event):
    """A stop event whose backoff waits return at once (the retries are what is tested)."""

    def wait(self, timeout: float | None = None) -> bool:
        return self.is_set()


@pytest.mark.parametrize(
    "cut", [GoneError(410, "too old"), ApiError(500, "internal error"), ApiError(0, "watch broken")]
)
def test_the_watch_starts_from_now_and_a_break_drops_the_entry(cut: Exception) -> None:
    box: list[MachineConfigCache] = []
    one, bookmark = _mc("rendered-worker-1", "101"), {"metadata": {"resourceVersion": "102"}}
    api = ScriptedApi(box, [[("ADDED", one, None), ("BOOKMARK", bookmark, None), cut]])
    cache = MachineConfigCache(api, lambda: DISK, NoWait(), 5)
    box.append(cache)
    cache.run()
    # the first list names no object: it only gives the version to watch from
    assert api.lists[0] == ("machineconfigs", NO_OBJECT)
    assert api.watches[:2] == ["100", "100" if isinstance(cut, GoneError) else "102"]
    # the entry held before the break is gone once the watch broke off
    assert cache.held() is None and cache.take("rendered-worker-1") is None


def test_an_event_the_thread_fails_on_restarts_it_without_what_it_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(objectwatch, "WATCH_MIN_SECONDS", -1.0)  # no watch ends "at once" here
    box: list[MachineConfigCache] = []
    odd = {"metadata": "not an object"}  # a shape the thread does not expect: it raises
    api = ScriptedApi(box, [[("ADDED", _mc("rendered-worker-1", "101"), None), ("ADDED", odd, None)]])
    cache = MachineConfigCache(api, lambda: DISK, NoWait(), 5)
    box.append(cache)
    guard.run_guarded("mc-watch-test", cache.run, cache.stop, start=0.0)
    assert guard.restart_counts()["mc-watch-test"] == 1
    # started again from "now", without the config kept before the failure
    assert api.lists == [("machineconfigs", NO_OBJECT)] * 2 and cache.held() is None


def test_a_watch_the_server_ends_in_order_is_resumed_and_keeps_the_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box: list[MachineConfigCache] = []
    bookmark = {"metadata": {"resourceVersion": "102"}}
    api = ScriptedApi(box, [[("ADDED", _mc("rendered-worker-1", "101"), None), ("BOOKMARK", bookmark, None)]])
    releases: list[str | None] = []
    cache = MachineConfigCache(
        api, lambda: DISK, threading.Event(), 5, release=lambda: releases.append(cache.held())
    )
    box.append(cache)
    # every watch counts as one that ran to its timeout (not a server ending it at once)
    monkeypatch.setattr(objectwatch, "WATCH_MIN_SECONDS", -1.0)
    cache.run()
    assert api.lists == [("machineconfigs", NO_OBJECT)] and api.watches == ["100", "102"]
    assert cache.held() == "rendered-worker-1"
    # the loop is asked to hand the decoding's memory back once per event, after it was handled
    assert releases == ["rendered-worker-1"]


# --- the stream


class Chunks:
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def stream(self, size: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks


def test_lines_are_joined_across_chunks_and_blank_lines_skipped() -> None:
    got = list(lines(Chunks(b'{"a":', b"1}\n\n  \n{", b'"b":2}\n{"c"', b":3}")))
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_the_object_text_is_cut_out_of_the_event_as_served() -> None:
    obj = {"metadata": {"name": "x", "resourceVersion": "5"}, "spec": {"object": {"type": "y"}}}
    line = b'{"type":"MODIFIED","object":' + _text(obj) + b"}"
    assert watch_event(line) == ("MODIFIED", obj, _text(obj))
    # another shape (the object first, spaces) is decoded whole, without a text
    other = b'{"object": ' + _text(obj) + b', "type": "ADDED"}'
    assert watch_event(other) == ("ADDED", obj, None)
    assert watch_event(b'{"type":"ERROR","object":{"code":410}}')[:2] == ("ERROR", {"code": 410})
    with pytest.raises(ValueError):
        watch_event(b'{"type":"ADDED","object":{')
    with pytest.raises(ValueError):
        watch_event(b"[1]")


def test_the_stand_in_lists_nothing_by_that_name_and_watches_machineconfigs_from_its_version(
    cluster: Cluster, tmp_path: Path
) -> None:
    """What the watch asks of `mcd-sim sim-cluster`'s API server, through the agent's client: the
    list by NO_OBJECT answers no items and the collection's version; a watch from it sees only
    what is created later, with the object's text as served; a compacted version is 410 Gone."""
    from mcd.kube.client import KubeClient

    cluster.add_mc(_mc("rendered-worker-0"))
    client = KubeClient.from_kubeconfig(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        found, rv = client.list_named("machineconfigs", NO_OBJECT)
        assert found is None and int(rv) > 0
        cluster.add_mc(_mc("rendered-worker-1"))
        events = client.watch("machineconfigs", rv, 1)
        etype, obj, text = next(e for e in events if e[0] != "BOOKMARK")
        events.close()  # type: ignore[attr-defined]
        assert (etype, obj["metadata"]["name"]) == ("ADDED", "rendered-worker-1")
        assert text is not None and json.loads(text) == obj
        cluster.sim.store.compact()
        with pytest.raises(GoneError):
            list(client.watch("machineconfigs", rv, 1))
    finally:
        client.close()


class Event(dict[str, Any]):
    """A decoded object that a weak reference can follow (a plain dict cannot)."""


def test_each_event_is_let_go_before_the_memory_is_handed_back() -> None:
    stop = threading.Event()
    refs: list[weakref.ref[Event]] = []
    freed: list[bool] = []

    def watch_from(rv: str) -> Iterator[tuple[str, Obj, bytes | None]]:
        yield "ADDED", Event(_mc("rendered-master-1", "5")), b"{}"
        yield "BOOKMARK", {"metadata": {"resourceVersion": "6"}}, None  # nothing to hand back
        stop.set()

    def event(etype: str, obj: Obj, text: bytes | None) -> None:
        assert isinstance(obj, Event)
        refs.append(weakref.ref(obj))

    objectwatch.follow_events(
        "machineconfigs", lambda: (None, "1"), watch_from, event, stop,
        settled=lambda: freed.append(refs[-1]() is None),
    )  # fmt: skip
    assert freed == [True]  # the trim runs when the megabytes are free, not while still held


def test_the_sync_takes_the_kept_config_stages_it_and_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the sync updates to the config the watch kept without asking the API (which
    does not have it here), stages its update record from the text as served and records it."""
    policy = "/etc/containers/policy.json"  # the default policy reloads crio: rebootless
    old = mc_object("rendered-worker-0", files=[ign_file(policy, "{}\n")])
    new = mc_object("rendered-worker-1", files=[ign_file(policy, '{"default": []}\n')])
    root = make_root(tmp_path, old)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-worker-0", ann.DESIRED_CONFIG: "rendered-worker-1",
                     ann.STATE: "Done"})  # fmt: skip
    api.mcs["rendered-worker-0"] = old  # not the new one: a GET of it would fail the sync

    def disk() -> MachineConfig | None:
        return s.applier.disk_config()  # the syncer's applier, as the loop wires them

    cache = MachineConfigCache(None, disk, threading.Event())  # type: ignore[arg-type]
    s = syncer(root, api, ahead=cache.take)
    text = json.dumps(new, separators=(",", ":")).encode()
    cache.event("ADDED", json.loads(text), text)
    assert cache.held() == "rendered-worker-1"
    renamed = record_renames(monkeypatch)
    assert s.sync(boot=False) is Result.IDLE
    assert (".staged", "pendingconfig") in renamed
    assert (root / state.CURRENT_CONFIG.lstrip("/")).read_bytes() == text
    assert api.obj["metadata"]["annotations"][ann.STATE] == "Done"


def test_the_configs_the_agent_keeps_hold_no_decoded_contents_and_parse_like_each_other(
    tmp_path: Path,
) -> None:
    """The config on disk and the watch's are parsed with the agent's options (`AGENT_PARSE`): no
    file's decoded bytes kept (a config lives as long as the agent), its size and SHA-256 are;
    the watch's config takes the unchanged files over from the one on disk, and an update still
    writes the changed file's bytes and ends Done."""
    files = [ign_file(f"/etc/mcd-test/f{i}.conf", f"v{i}\n") for i in range(3)]
    policy = "/etc/containers/policy.json"  # the default policy reloads crio: rebootless
    old = mc_object("rendered-worker-0", files=[*files, ign_file(policy, "{}\n")])
    new = mc_object("rendered-worker-1", files=[*files, ign_file(policy, '{"default": []}\n')])
    root = make_root(tmp_path, old)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-worker-0", ann.DESIRED_CONFIG: "rendered-worker-1",
                     ann.STATE: "Done"})  # fmt: skip
    api.mcs["rendered-worker-0"] = old

    def disk() -> MachineConfig | None:
        return s.applier.disk_config()

    cache = MachineConfigCache(None, disk, threading.Event())  # type: ignore[arg-type]
    s = syncer(root, api, ahead=cache.take)
    text = json.dumps(new, separators=(",", ":")).encode()
    cache.event("ADDED", json.loads(text), text)
    before = disk()
    assert before is not None and before.config is not None
    assert not any(f.kept for f in before.config.files)
    assert s.sync(boot=False) is Result.IDLE
    assert (root / policy.lstrip("/")).read_bytes() == b'{"default": []}\n'
    assert api.obj["metadata"]["annotations"][ann.STATE] == "Done"
    after = disk()
    assert after is not None and after.config is not None and after.name == "rendered-worker-1"
    assert not any(f.kept for f in after.config.files)
    taken = [f is g for f, g in zip(after.config.files, before.config.files, strict=True)]
    assert taken == [True, True, True, False]
    assert after.config.files[0].data == b"v0\n"  # decoded again when asked
