"""Secondary indexes (DESIGN §6b, issue 14): declared indexes, maintenance by every writer,
lookups through the index identical to the unindexed path, erasure scrubbing, GC."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.catalog.transforms.indexes import piece_paths
from lethe.erasure.deletes import DeleteRequest
from lethe.gc import collect
from lethe.gc.areas import category
from lethe.gc.marking import references
from lethe.index.core import index_plans
from lethe.index.runs import MAX_RUNS
from lethe.maintenance.compaction import CompactionOptions
from lethe.reading.filters import normalize

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}
F2 = [("customer_id", "=", 2)]


def rows(t: lethe.Table, filters: Any) -> list[int]:
    return sorted(t.scan(["id"], filters)["id"].to_pylist())


def test_declared_indexes_and_their_errors(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    assert t.indexes == ("customer_id",)
    assert lethe.Table.open(table_uri).indexes == ("customer_id",)
    with pytest.raises(errors.InvalidRequest, match="already indexed"):
        t.create_index("customer_id")
    with pytest.raises(errors.InvalidRequest, match="not a column"):
        t.create_index("nope")
    with pytest.raises(errors.InvalidRequest, match="not indexed"):
        t.drop_index("payload")
    floats = pa.schema([("id", pa.int64()), ("score", pa.float64())])
    with pytest.raises(errors.InvalidRequest, match="type double"):
        lethe.Table.create(table_uri + "x", floats, indexes=("score",))
    with pytest.raises(errors.InvalidRequest, match="twice"):
        lethe.Table.create(table_uri + "y", EVENTS, indexes=("customer_id", "customer_id"))
    t.create_index("payload")
    assert t.indexes == ("customer_id", "payload")
    t.drop_index("payload")
    assert t.indexes == ("customer_id",)
    assert [h.operation for h in t.history()[:2]] == ["index", "index"]


def test_append_writes_one_run_and_delete_reads_no_data_file(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 600))
    t.append(events(600, 600))
    (ix,) = t.manifest.indexes
    assert [r.covers for r in ix.runs] == [((1, 1),), ((2, 2),)]
    want = [i for i in range(1200) if i % 100 == 7]
    before = t.store.stats.snapshot()
    r = t.delete([("customer_id", "=", 7)])
    assert r.rows_deleted == len(want)
    # the head, the root and the index pieces (each small enough to come in one GET): no
    # data file, no footer
    gets = t.store.stats.snapshot().requests.get("get", 0) - before.requests.get("get", 0)
    assert gets <= 2 + len(piece_paths(t.manifest))
    assert rows(t, [("customer_id", "=", 7)]) == []
    assert rows(t, [("customer_id", "in", [8, 9])]) == [i for i in range(1200) if i % 100 in (8, 9)]
    assert t.lookup(8)["id"].to_pylist() == [8]


def test_backfill_and_unindexed_files_fall_back(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 500))
    t.create_index("customer_id")
    (ix,) = t.manifest.indexes
    assert ix.runs[0].covers == ((0, 1),)
    t.append(events(500, 500))
    # compaction's outputs are indexed by the compaction commit
    t.delete([("id", "<", 300)])
    t.compact(CompactionOptions(min_deleted_fraction=0.01))
    t.refresh()
    assert all(ix.covers(f) for ix in t.manifest.indexes for f in t.manifest.files)
    assert rows(t, [("customer_id", "=", 42)]) == [i for i in range(300, 1000) if i % 100 == 42]


def test_erase_through_the_index_scrubs_the_value(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 800))
    old = piece_paths(t.manifest)
    res = t.erase([("customer_id", "=", 5)], request_id="gdpr-5")
    assert res.rows_deleted == 8
    t.refresh()
    assert rows(t, [("customer_id", "=", 5)]) == []
    # the pieces that held the value are no longer referenced, and the erasure waits for them
    gone = old - piece_paths(t.manifest)
    assert gone
    rec = t.manifest.erasures[0]
    assert gone <= set(t.manifest.superseded_of(rec))
    for p in piece_paths(t.manifest):
        body = t.store.get(t.key_of(p)).body
        assert 5 not in pq.read_table(pa.BufferReader(body))["value"].to_pylist()
    assert rows(t, [("customer_id", "=", 6)]) == [i for i in range(800) if i % 100 == 6]


def test_gc_marks_and_sweeps_index_pieces(table_uri: str) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", indexes=("customer_id",), gc_grace="30s", **TINY
    )
    t.append(events(0, 300))
    pieces = piece_paths(t.manifest)
    assert pieces and pieces <= references(t.manifest)
    assert {category(p) for p in pieces} == {"segment"}
    t.drop_index("customer_id")
    collect(table_uri, retention="1v", now=datetime.now(UTC) + timedelta(seconds=60))
    left = {o.key for o in t.store.list(t.key_of("index/"))}
    assert not left


def test_a_batch_probes_the_index_once(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 1000))
    n_pieces = len(piece_paths(t.manifest))
    before = t.store.stats.snapshot()
    r = t.delete_batch([DeleteRequest([("customer_id", "=", c)], f"r{c}") for c in range(10)])
    assert r.rows_deleted == 100
    gets = t.store.stats.snapshot().requests.get("get", 0) - before.requests.get("get", 0)
    assert gets <= 2 * n_pieces + 2  # one footer + one group per piece, not per request


@settings(max_examples=8)
@given(
    customers=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    deleted=st.lists(st.integers(0, 40), max_size=3),
    extra=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_indexed_equals_unindexed(
    s3: Any, customers: list[int], deleted: list[int], extra: bool, seed: int
) -> None:
    bucket = f"h-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    rng = np.random.default_rng(seed)
    plain = lethe.Table.create(f"s3://{bucket}/plain", EVENTS, key="id", **TINY)
    indexed = lethe.Table.create(
        f"s3://{bucket}/indexed", EVENTS, key="id", indexes=("customer_id",), **TINY
    )
    for start in (0, 300):
        batch = events(start, 300, customers=41)
        batch = batch.set_column(
            2, "customer_id", pa.array(rng.integers(0, 41, 300).astype(np.int32))
        )
        plain.append(batch)
        indexed.append(batch)
    for c in deleted:
        a = plain.delete([("customer_id", "=", c)])
        b = indexed.delete([("customer_id", "=", c)])
        assert a.rows_deleted == b.rows_deleted
    filters: Any = [("customer_id", "in", customers)]
    if extra:
        filters = [("customer_id", "in", customers), ("id", ">=", 150)]
    assert rows(plain, filters) == rows(indexed, filters)
    a = plain.delete(filters)
    b = indexed.delete(filters)
    assert a.rows_deleted == b.rows_deleted
    assert rows(plain, None) == rows(indexed, None)


def test_small_runs_are_merged_in_bounded_steps(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    for i in range(MAX_RUNS + 3):
        t.append(events(i * 50, 50))
    (ix,) = t.manifest.indexes
    assert len(ix.runs) <= MAX_RUNS
    covered = sorted(v for r in ix.runs for lo, hi in r.covers for v in range(lo, hi + 1))
    assert covered == list(range(1, MAX_RUNS + 4))  # every append's version, once
    assert rows(t, [("customer_id", "=", 3)]) == [
        i for i in range((MAX_RUNS + 3) * 50) if i % 100 == 3
    ]
    assert all(ix.covers(f) for f in t.manifest.files)


def test_spliced_files_are_answered_through_their_origin(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 800))
    t.erase([("id", "in", [1, 2, 3])], request_id="e1")
    t.erase([("id", "in", [102, 204])], request_id="e2")  # a splice of a spliced file
    t.refresh()
    (ix,) = t.manifest.indexes
    spliced = [f for f in t.manifest.files if f.index_origin is not None]
    assert spliced and all(ix.covers(f) for f in t.manifest.files)
    plan = index_plans(t.store, t.catalog.prefix, t.manifest, [normalize(F2, t.schema)])[0]
    assert plan is not None and plan.unindexed == ()  # no file read the unindexed way
    want = [i for i in range(800) if i % 100 == 2 and i not in (2, 102)]
    assert rows(t, F2) == want
    assert rows(t, [("customer_id", "in", [4, 3])]) == [
        i for i in range(800) if i % 100 in (3, 4) and i not in (3, 204)
    ]
    assert t.delete(F2).rows_deleted == len(want)
    # a compaction replaces spliced files by files with runs of their own
    t.delete([("id", "in", list(range(0, 400)))])
    res = t.compact(CompactionOptions(min_deleted_fraction=0.5))
    assert res.version is not None
    t.refresh()
    (ix,) = t.manifest.indexes
    assert all(ix.covers(f) for f in t.manifest.files)
    assert not any(f.index_origin for f in t.manifest.files)
    gone = {3, 204, *range(0, 400)}
    assert rows(t, [("customer_id", "in", [2, 3, 4])]) == [
        i for i in range(800) if i % 100 in (3, 4) and i not in gone
    ]


def test_gc_completes_an_erasure_only_once_the_old_pieces_are_gone(table_uri: str) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", indexes=("customer_id",), gc_grace="7d", **TINY
    )
    t.append(events(0, 400))
    old = piece_paths(t.manifest)
    t.erase([("customer_id", "=", 9)], request_id="erase-9")
    t.refresh()
    gone = old - piece_paths(t.manifest)
    assert gone
    rep = collect(table_uri, retention="30d", grace="7d", erasure_grace="1h")
    (st,) = rep.erasures
    assert not st.complete
    rep = collect(table_uri, retention="1v", grace="7d", erasure_grace="0s")
    (st,) = rep.erasures
    assert st.complete
    left = {o.key[len(t.key_of("")) :] for o in t.store.list(t.key_of("index/"))}
    assert not (gone & left)
    assert left == piece_paths(lethe.Table.open(table_uri).manifest)


def test_string_index(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("payload",), **TINY)
    t.append(events(0, 300))
    assert rows(t, [("payload", "in", ["payload-7", "payload-250", "nobody"])]) == [7, 250]
    assert t.delete([("payload", "=", "payload-7")]).rows_deleted == 1
    assert rows(t, [("payload", "=", "payload-7")]) == []


def test_pieces_of_different_runs_are_probed_concurrently_with_the_same_requests(
    table_uri: str,
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    for i in range(5):
        t.append(events(i * 200, 200))
    (ix,) = t.manifest.indexes
    assert len(ix.runs) == 5
    before = t.store.stats.snapshot()
    (plan,) = index_plans(t.store, t.catalog.prefix, t.manifest, [normalize(F2, t.schema)])
    gets = (t.store.stats.snapshot() - before).requests.get("get", 0)
    assert plan is not None and 5 <= gets <= 2 * 5  # one or two GETs per run's piece
    assert sum(len(b) for b in plan.hits.values()) == 10
    assert rows(t, F2) == [i for i in range(1000) if i % 100 == 2]


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(st.integers(-5, 5), st.sampled_from(["data/b", "data/a", "data/c"])),
        max_size=40,
    ),
    st.booleans(),
)
def test_run_order_is_value_file_pos(rows: list[tuple[int, str]], presorted: bool) -> None:
    from lethe.index.pieces import order as _order

    t = pa.table(
        {
            "value": pa.array([v for v, _ in rows], pa.int32()),
            "file": pa.array([f for _, f in rows], pa.string()),
            "pos": pa.array(range(len(rows)), pa.int64()),
        }
    )
    if presorted:  # the (file, pos) layout an append builds
        t = t.sort_by([("file", "ascending"), ("pos", "ascending")])
    keys = [("value", "ascending"), ("file", "ascending"), ("pos", "ascending")]
    assert t.take(_order(t)).equals(t.sort_by(keys))


def test_an_indexed_column_widens_and_its_index_follows(table_uri: str) -> None:
    """Issue 36 item 5: customer ids outgrowing int32 is the common case; widening an
    indexed column was refused. Old pieces (int32 values) read as the wider type beside new
    ones; deletes stay index-only, runs merge across the types, erase scrubs, verify --deep
    agrees with the rows."""
    from lethe.cli import main

    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 600))
    with t.update_schema() as u:
        u.widen_column("customer_id", pa.int64())
    t = lethe.Table.open(table_uri)
    assert t.schema.field("customer_id").type == pa.int64()
    big = events(600, 300)
    big = big.set_column(
        2, "customer_id", pa.array([2**40 + (i % 3) for i in range(300)], pa.int64())
    )
    t.append(big)
    for i in range(MAX_RUNS):  # enough runs that old and new pieces merge
        t.append(events(900 + i * 20, 20).cast(t.schema))
    before = t.store.stats.snapshot()
    r = t.delete([("customer_id", "=", 7)], request_id="w-7")
    gets = t.store.stats.snapshot().requests.get("get", 0) - before.requests.get("get", 0)
    assert gets <= 2 + len(piece_paths(t.manifest))  # through the index, no data file
    want7 = [i for i in range(900 + MAX_RUNS * 20) if i % 100 == 7 and not 600 <= i < 900]
    assert r.rows_deleted == len(want7)
    t = lethe.Table.open(table_uri)
    assert rows(t, [("customer_id", "=", 2**40 + 1)]) == list(range(601, 900, 3))
    e = t.erase([("customer_id", "in", [2**40 + 2, 8])], request_id="w-e")
    assert e.rows_deleted == 100 + len(
        [i for i in range(900 + MAX_RUNS * 20) if i % 100 == 8 and not 600 <= i < 900]
    )
    t = lethe.Table.open(table_uri)
    assert rows(t, [("customer_id", "=", 2**40 + 2)]) == []
    assert rows(t, [("customer_id", "=", 2**40)]) == list(range(600, 900, 3))
    assert main(["verify", table_uri, "--deep"]) == 0
