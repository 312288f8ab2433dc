"""The GC grace rule (issue 10 item 2): writers never land a manifest that references an
object GC may have deleted; GC reads the table's grace and rounds LastModified up."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pyarrow as pa
import pytest
from conftest import EVENTS, events, run_in_threads

import lethe
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.grace import check_fresh, commit_deadline, margin, round_up
from lethe.gc import collect
from lethe.gc.policy import is_old


def keys_under(s3: Any, uri: str, prefix: str) -> set[str]:
    bucket, _, root = uri.removeprefix("s3://").partition("/")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{prefix}")
    return {o["Key"][len(root) + 1 :] for p in pages for o in p.get("Contents", [])}


# --- the rule (pure) -------------------------------------------------------------------------
def test_margin_and_deadline() -> None:
    assert margin(3) == 1 and commit_deadline(3) == 2
    assert margin(7 * 86400) == 900 and commit_deadline(3600) == 2700
    check_fresh(None, 3)  # nothing written: nothing to check
    check_fresh(100.0, 3, now=101.99)
    with pytest.raises(errors.GraceExpired, match="within 2s of its first upload"):
        check_fresh(100.0, 3, now=102.0)
    assert issubclass(errors.GraceExpired, errors.CommitConflict)


def test_gc_rounds_last_modified_up() -> None:
    """S3 truncates LastModified: an object written at 10.9 s says 10 s. With a 3 s grace it
    may go only at 14 s (10 + 1 + 3), never 2.2 s after its upload."""
    written = datetime(2026, 1, 1, 0, 0, 10, 900_000, tzinfo=UTC)
    lm = written.replace(microsecond=0)  # what S3 reports
    grace = timedelta(seconds=3)
    assert not is_old(lm, written + timedelta(seconds=2.2), grace)
    assert not is_old(lm, lm + timedelta(seconds=3.999), grace)
    assert is_old(lm, lm + timedelta(seconds=4), grace)
    assert round_up(lm) == lm + timedelta(seconds=1)


def test_grace_is_a_table_property(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="90m")
    assert lethe.Table.open(table_uri).manifest.properties.gc_grace_seconds == 5400
    with pytest.raises(errors.InvalidRequest, match="positive"):
        lethe.Table.create(table_uri + "x", EVENTS, key="id", gc_grace=0)
    with pytest.raises(errors.InvalidRequest, match="not a duration"):
        lethe.Table.create(table_uri + "y", EVENTS, key="id", gc_grace="soon")
    assert t.append(events(0, 10)).files_added == 1


def test_gc_never_uses_a_grace_shorter_than_the_tables(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="1h")
    t.append(events(0, 10))
    orphan = t.write_data_files(events(10, 10))[0].path  # a writer still at work
    soon = datetime.now(UTC) + timedelta(minutes=30)
    with pytest.raises(errors.InvalidRequest, match="gc_grace 1h, the floor"):
        collect(table_uri, grace="0s", now=soon)  # asks for 0 s: refused (issue 35 item 12)
    rep = collect(table_uri, now=soon)  # the table's hour
    assert orphan in keys_under(s3, table_uri, "data/")
    assert rep.grace_seconds == 3600 and rep.deleted.get("data") is None
    later = datetime.now(UTC) + timedelta(minutes=61)
    rep = collect(table_uri, now=later)  # default: the table's grace
    assert orphan not in keys_under(s3, table_uri, "data/")
    assert rep.deleted["data"].objects == 1


# --- writers ---------------------------------------------------------------------------------
def test_a_slow_append_refuses_and_leaves_nothing(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="3s", target_file_bytes=1)
    t.append(events(0, 10))
    before = keys_under(s3, table_uri, "data/")

    def slow() -> Iterator[pa.RecordBatch]:
        yield from events(100, 50).to_batches()
        time.sleep(2.2)  # the first file is uploaded; the deadline (2 s) passes
        yield from events(200, 50).to_batches()

    reader = pa.RecordBatchReader.from_batches(EVENTS, slow())
    with pytest.raises(errors.GraceExpired, match="GC grace is 3s"):
        t.append(reader)
    assert keys_under(s3, table_uri, "data/") == before  # its files removed again
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == 10


def test_commit_files_reads_last_modified_when_not_told(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="3s")
    files = t.write_data_files(events(0, 10))
    time.sleep(3.1)  # LastModified (truncated) is now more than 2 s ago
    with pytest.raises(errors.GraceExpired):
        t.commit_files(files)
    fresh = t.write_data_files(events(10, 10))
    assert t.commit_files(fresh).files_added == 1


@pytest.fixture
def graced(table_uri: str) -> lethe.Table:
    """A table with a 3 s grace holding ids 0..99."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="3s")
    t.append(events(0, 100))
    return t


def test_a_delete_rewrites_a_stale_dv_container(
    graced: lethe.Table, table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lethe.dv.store as dvstore

    t = graced
    real = dvstore.write_dvs
    calls: list[str] = []

    def slow_first(store: Any, prefix: str, dvs: Any) -> Any:
        refs = real(store, prefix, dvs)
        calls.append(next(iter(refs.values())).container)
        if len(calls) == 1:
            time.sleep(2.2)  # contention held this commit past the deadline
        return refs

    monkeypatch.setattr(dvstore, "write_dvs", slow_first)
    r = t.delete([("id", "in", [3, 4])])
    assert r.rows_deleted == 2 and len(calls) == 2
    containers = keys_under(s3, table_uri, "tombstone/")
    assert containers == {calls[1]}  # the stale one was removed, the fresh one committed
    assert t.manifest.files[0].dv.container == calls[1]  # type: ignore[union-attr]
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == 98


def test_a_slow_splice_is_not_committed_and_the_erasure_stays_pending(
    graced: lethe.Table, table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lethe.erasure.erase as erase_mod

    t = graced
    real = erase_mod.splice_file

    def stale(*a: Any, **k: Any) -> Any:
        s = real(*a, **k)
        return erase_mod.SpliceResult(**{**_fields(s), "written_at": time.time() - 2.5})

    monkeypatch.setattr(erase_mod, "splice_file", stale)
    data_before = keys_under(s3, table_uri, "data/")
    with pytest.raises(errors.GraceExpired):
        t.erase([("id", "=", 7)], request_id="erase-7")
    assert keys_under(s3, table_uri, "data/") == data_before  # the spliced object removed
    t.refresh()
    [e] = t.manifest.erasures
    assert e.state == "pending" and t.lookup(7).num_rows == 0
    monkeypatch.setattr(erase_mod, "splice_file", real)
    done = t.erase([("id", "=", 7)], request_id="erase-7")  # the retry finishes it
    assert done.complete and t.manifest.erasures[0].state == "spliced"


def _fields(s: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


# --- the race the issue reproduced -----------------------------------------------------------
@pytest.mark.slow
def test_gc_racing_slow_appenders_and_deleters_never_breaks_the_table(
    table_uri: str, s3: Any
) -> None:
    """3 appenders (some slower than the grace), 2 deleters and GC in a loop with a 3 s grace:
    afterwards every object a retained manifest references exists, the head scans, and the
    rows are exactly those committed minus those deleted."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="3s")
    t.append(events(0, 200))
    stop = time.monotonic() + 15
    lock = threading.Lock()
    committed: set[int] = set(range(200))
    deleted: set[int] = set()
    refused = {"append": 0}

    def appender(n: int) -> None:
        me = lethe.Table.open(table_uri)
        rng = random.Random(n)
        start = 1_000 * (n + 1)
        while time.monotonic() < stop:
            written_at = time.time()
            files = me.write_data_files(events(start, 20))
            time.sleep(rng.uniform(0, 5.5))  # often past the deadline (2 s) and the grace (3+1 s)
            try:
                me.commit_files(files, written_at=written_at)
            except errors.GraceExpired:
                me.discard(files)
                with lock:
                    refused["append"] += 1
            else:
                with lock:
                    committed.update(range(start, start + 20))
            start += 20

    def deleter(n: int) -> None:
        me = lethe.Table.open(table_uri)
        rng = random.Random(100 + n)
        while time.monotonic() < stop:
            k = rng.randrange(0, 200)
            r = me.delete([("id", "=", k)])
            with lock:
                if r.rows_deleted:
                    deleted.add(k)

    def gc() -> None:
        while time.monotonic() < stop:
            collect(table_uri, retention="1v", erasure_grace="0s")
            time.sleep(0.2)

    failures = run_in_threads(
        *(partial(appender, i) for i in range(3)), *(partial(deleter, i) for i in range(2)), gc
    )
    assert not failures, failures
    head = lethe.Table.open(table_uri)
    assert verify(head).ok, verify(head).problems
    ids = set(head.scan(["id"])["id"].to_pylist())
    assert ids == committed - deleted
    assert refused["append"] > 0  # the slow writers did hit the rule
    collect(table_uri, retention="1v", erasure_grace="0s")  # GC after the race: still whole
    assert verify(lethe.Table.open(table_uri)).ok
