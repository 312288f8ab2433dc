"""Format 2 (segmented manifests): O(change) commits, pruned reads, the upgrade from format 1,
racing writers, and the hypothesis state machine on small segments."""

from __future__ import annotations

import threading
import uuid
from functools import partial
from typing import Any, ClassVar

import pytest
from conftest import EVENTS, events, run_in_threads, run_state_machine
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from test_deletes import TableModel

import lethe
from devtools.format1 import rewrite_as_format1
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.manifest import LINEAGE_FORMAT_VERSION, decode_manifest

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def ids(t: lethe.Table) -> list[int]:
    return sorted(t.scan(["id"])["id"].to_pylist())


def test_new_tables_are_segmented_and_a_delete_writes_only_the_root(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", segment_target_files=4, **TINY)
    for i in range(6):
        t.append(events(i * 1_000, 1_000))
    m = t.manifest
    assert (m.format_version, m.layout) == (2, "segmented")
    assert m.file_count == len(m.files) > 8 and len(m.segments) >= 3
    assert all(s.files <= 4 for s in m.segments)
    assert verify(t).ok
    before, segs = t.io, m.segments
    r = t.delete([("id", "=", 2_500)])
    d = t.io - before
    assert r.rows_deleted == 1
    assert d.puts == 3, d.describe()  # DV container, root, head: no segment rewritten
    assert t.manifest.segments != segs  # the summary's deleted count moved
    assert [s.path for s in t.manifest.segments] == [s.path for s in segs]
    holder = [f.path for f in m.files if f.columns["id"].min <= 2_500 <= f.columns["id"].max]
    assert [o.path for o in t.manifest.dv_overlay] == holder
    assert 2_500 not in ids(lethe.Table.open(table_uri))
    assert verify(lethe.Table.open(table_uri)).ok


def test_a_lookup_opens_only_the_segment_that_can_hold_the_key(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", segment_target_files=2, **TINY)
    for i in range(8):
        t.append(events(i * 500, 500))
    assert len(t.manifest.segments) >= 4
    fresh = lethe.Table.open(table_uri)
    assert fresh.lookup(1_234)["id"].to_pylist() == [1_234]
    hits = [
        s for s in fresh.manifest.segments if s.columns["id"].min <= 1_234 <= s.columns["id"].max
    ]
    assert len(hits) == 1
    # the segment, the footer tail and the pages: never the other segments
    cache = fresh.catalog.segments
    loaded = {p for p in (s.path for s in fresh.manifest.segments) if p in cache._cache}
    assert loaded == {hits[0].path}


def test_overlay_is_bounded_and_folds_into_the_fullest_segments(table_uri: str) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", segment_target_files=3, dv_overlay_max=4, **TINY
    )
    for i in range(4):
        t.append(events(i * 1_000, 1_000))
    keys = list(range(0, 4_000, 97))
    for k in keys:
        t.delete([("id", "=", k)])
        assert len(t.manifest.dv_overlay) <= 4
    assert set(keys).isdisjoint(ids(lethe.Table.open(table_uri)))
    assert verify(lethe.Table.open(table_uri)).ok
    assert lethe.Table.open(table_uri).manifest.total_rows == 4_000 - len(keys)


def test_old_versions_read_exactly_after_their_segments_were_rewritten(table_uri: str) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", segment_target_files=2, dv_overlay_max=0, **TINY
    )
    seen: dict[int, list[int]] = {}
    for i in range(3):
        t.append(events(i * 1_000, 1_000))
        seen[t.version] = ids(t)
    for k in (5, 1_500, 2_999):
        t.delete([("id", "=", k)])  # no overlay: every delete rewrites its segment
        seen[t.version] = ids(t)
    t.erase([("id", "=", 7)])
    seen[t.version] = ids(t)
    for v, want in seen.items():
        old = lethe.Table.open(table_uri, version=v)
        assert ids(old) == [i for i in want if i != 7], v  # erased from history (issue 39)
        assert verify(old).ok


def test_upgrade_from_format_1_keeps_every_snapshot(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", segment_target_files=2, **TINY)
    t.append(events(0, 2_000))
    t.delete([("id", "in", [1, 2, 3])])
    t.append(events(2_000, 1_000))
    t.erase([("id", "=", 10)])
    t = rewrite_as_format1(t)  # every snapshot as a format-1 writer committed it
    assert t.manifest.format_version == 1 and t.manifest.layout == "inline"
    raw = t.store.get(t.key_of("manifest/v00000004.json")).body
    assert decode_manifest(raw).inline_files  # a format-1 manifest lists its files
    assert verify(t).ok
    seen = {v: ids(lethe.Table.open(table_uri, version=v)) for v in range(t.version + 1)}
    if uuid.uuid4().int % 2:  # either path upgrades: the command, or any next commit
        r = lethe.Table.open(table_uri).upgrade()
        assert lethe.Table.open(table_uri).manifest.operation.kind == "upgrade"
        assert lethe.Table.open(table_uri).upgrade().version == r.version  # idempotent
    else:
        lethe.Table.open(table_uri).delete([("id", "=", 11)])
        seen[lethe.Table.open(table_uri).version] = [i for i in seen[t.version] if i != 11]
    head = lethe.Table.open(table_uri)
    # format 4 once a splice recorded a lineage (issue 39), else 2
    fmt = LINEAGE_FORMAT_VERSION if head.manifest.manifest.lineage is not None else 2
    assert (head.manifest.format_version, head.manifest.layout) == (fmt, "segmented")
    assert len(head.manifest.segments) >= 2 and verify(head).ok
    for v, want in seen.items():
        assert ids(lethe.Table.open(table_uri, version=v)) == want, v
    if head.version not in seen:
        assert ids(head) == seen[head.version - 1]
    head.append(events(5_000, 10))
    assert ids(lethe.Table.open(table_uri))[-10:] == list(range(5_000, 5_010))


def test_upgrade_says_whether_it_committed(table_uri: str) -> None:
    """Issue 36: ``lethe upgrade`` said "upgraded at version N" when another process had
    upgraded the table and N was a later append: ``committed`` says who did it."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 100))
    t = rewrite_as_format1(t)
    stale = lethe.Table.open(table_uri)
    assert stale.manifest.format_version == 1
    first = lethe.Table.open(table_uri).upgrade()
    assert first.committed
    lethe.Table.open(table_uri).append(events(100, 10))
    late = stale.upgrade()
    assert not late.committed and late.version == first.version + 1
    assert stale.manifest.format_version == 2
    assert not lethe.Table.open(table_uri).upgrade().committed


def test_racing_writers_on_small_segments_lose_nothing(table_uri: str) -> None:
    lethe.Table.create(
        table_uri, EVENTS, key="id", segment_target_files=3, dv_overlay_max=2, **TINY
    ).append(events(0, 4_000))
    deleted: set[int] = set()
    lock = threading.Lock()

    def appender(i: int) -> None:
        lethe.Table.open(table_uri).append(events(10_000 + i * 100, 100))

    def deleter(i: int) -> None:
        ks = list(range(i * 200, i * 200 + 200, 9))
        r = lethe.Table.open(table_uri).delete([("id", "in", ks)])
        assert r.rows_deleted == len(ks)
        with lock:
            deleted.update(ks)

    errs = run_in_threads(
        *(partial(appender, i) for i in range(8)), *(partial(deleter, i) for i in range(8))
    )
    assert not errs, errs
    t = lethe.Table.open(table_uri)
    want = (set(range(4_000)) - deleted) | {
        10_000 + i * 100 + j for i in range(8) for j in range(100)
    }
    assert ids(t) == sorted(want)
    assert t.version == 17 and [h.version for h in t.history()] == list(range(17, -1, -1))
    assert verify(t).ok


class SegmentedModel(TableModel):
    """The table state machine on tiny segments and overlay (splits, merges and folds happen
    all the time), with erases, sometimes starting from a format-1 table."""

    properties: ClassVar[dict[str, Any]] = {"segment_target_files": 2, "dv_overlay_max": 2, **TINY}

    @initialize(v1=st.booleans())
    def setup(self, v1: bool) -> None:  # type: ignore[override]
        self.start()
        if v1:  # a table a format-1 writer left: two appends, inline
            self.append(300)
            self.append(300)
            self.t = rewrite_as_format1(self.t)

    @precondition(lambda self: bool(getattr(self, "model", None)))
    @rule(data=st.data())
    def erase(self, data: st.DataObject) -> None:
        k = data.draw(st.sampled_from(sorted(self.model)))
        r = self.t.erase([("id", "=", k)])
        assert r.rows_deleted == 1 and r.rows_erased >= 1 and r.complete  # + hidden rows nearby
        del self.model[k]
        for rows in self.versions.values():  # erased from history too (issue 39)
            rows.discard(k)
        self.versions[lethe.Table.open(self.t.uri).version] = set(self.model)

    @invariant()
    def verified(self) -> None:
        if hasattr(self, "t"):
            rep = verify(lethe.Table.open(self.t.uri))
            assert rep.ok, rep.problems


def test_segmented_state_machine(table_uri: str) -> None:
    SegmentedModel.uri = table_uri
    run_state_machine(SegmentedModel, examples=10, steps=10, random=True)


def test_segment_objects_are_checked(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 100))
    [s] = t.manifest.segments
    t.store.put(t.key_of(s.path), b"not gzip")  # overwritten behind Lethe's back
    fresh = lethe.Table.open(table_uri)
    with pytest.raises(errors.CorruptManifest, match="not gzip"):
        fresh.scan()
    assert not verify(lethe.Table.open(table_uri)).ok


def test_a_crash_between_segment_and_manifest_puts_leaves_garbage_gc_removes(
    table_uri: str, s3: Any
) -> None:
    """A committer that wrote its segments and died before its manifest PUT: nothing
    references them; GC keeps them while a writer might still commit (a version beyond the
    head, within the grace) and removes them once that version exists or the grace passed."""
    from datetime import UTC, datetime, timedelta

    from lethe.catalog.manifest import Operation
    from lethe.catalog.transforms import apply_append
    from lethe.gc import collect

    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace="30s", **TINY)
    t.append(events(0, 100))
    files = t.write_data_files(events(100, 50))
    dead = apply_append(t.manifest, files, Operation(kind="append"))
    orphans = set(t.catalog.write_segments(dead))  # ... and the committer died here
    assert orphans

    def present() -> set[str]:
        bucket, prefix = table_uri[5:].split("/", 1)
        out = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/manifest/segments/")
        return {o["Key"][len(prefix) + 1 :] for o in out.get("Contents", [])}

    collect(table_uri, retention="1v", grace="30s")
    assert orphans <= present()  # v2 does not exist yet: its writer may still commit
    assert verify(lethe.Table.open(table_uri)).ok
    later = datetime.now(UTC) + timedelta(seconds=60)
    collect(table_uri, retention="1v", grace="30s", now=later)
    assert not orphans & present()  # past the grace
    # the same crash, then another writer commits that version: removed at once
    dead = apply_append(lethe.Table.open(table_uri).manifest, files, Operation(kind="append"))
    orphans = set(t.catalog.write_segments(dead))
    lethe.Table.open(table_uri).append(events(1_000, 10))
    collect(table_uri, retention="1v", grace="30s")
    assert not orphans & present()
    live = {s.path for s in lethe.Table.open(table_uri).manifest.segments}
    assert live <= present() and verify(lethe.Table.open(table_uri)).ok
    assert ids(lethe.Table.open(table_uri)) == [*range(100), *range(1_000, 1_010)]
