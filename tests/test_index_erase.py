"""Erasure reaches the index whatever the erase's filter (issue 14): the entries of exactly
the erased rows leave every referenced index piece, other rows sharing a value stay indexed,
and after GC no object of the table holds an erased value."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import lethe
from devtools.audit import Needle, audit_bucket
from lethe.audit.verify import verify
from lethe.catalog.manifest import DataFile
from lethe.catalog.transforms.indexes import piece_paths
from lethe.gc import collect
from lethe.index.core import index_plans
from lethe.index.origins import origin_removed
from lethe.maintenance.compaction import CompactionOptions
from lethe.reading.filters import normalize
from lethe.storage.store import parse_s3_uri

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def entries(t: lethe.Table, column: str) -> pa.Table:
    """Every entry of the index on ``column`` in the head (pieces decoded)."""
    ix = t.manifest.index(column)
    assert ix is not None
    parts = [
        pq.read_table(pa.BufferReader(t.store.get(t.key_of(p.path)).body))
        for r in ix.runs
        for p in r.pieces
    ]
    return pa.concat_tables(parts)


def values(t: lethe.Table, column: str) -> list[Any]:
    return entries(t, column)["value"].to_pylist()


def rows(t: lethe.Table, filters: Any) -> list[int]:
    return sorted(t.scan(["id"], filters)["id"].to_pylist())


def gc_now(uri: str) -> None:
    collect(uri, retention="1v", erasure_grace="0s", now=datetime.now(UTC) + timedelta(hours=1))


def test_erase_by_key_scrubs_exactly_the_erased_row(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id", "payload"), **TINY)
    t.append(events(0, 300))  # customer 7 has rows 7, 107 and 207
    old = piece_paths(t.manifest)
    assert values(t, "customer_id").count(7) == 3
    r = t.erase([("id", "=", 107)], request_id="gdpr-107")
    assert r.rows_deleted == 1
    t.refresh()
    # the other two rows of customer 7 stay indexed (and found); the erased one is gone
    assert values(t, "customer_id").count(7) == 2
    assert "payload-107" not in values(t, "payload")
    assert values(t, "payload").count("payload-7") == 1
    assert rows(t, [("customer_id", "=", 7)]) == [7, 207]
    assert rows(t, [("payload", "in", ["payload-107", "payload-207"])]) == [207]
    # only the pieces that could hold the values were rewritten; the old ones await GC
    gone = old - piece_paths(t.manifest)
    assert gone
    (rec,) = t.manifest.erasures
    assert gone <= set(t.manifest.superseded_of(rec))


def test_erase_by_another_column_scrubs_the_index(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 400))
    t.erase([("payload", "in", ["payload-12", "payload-312"])], request_id="by-payload")
    t.refresh()
    assert values(t, "customer_id").count(12) == 2  # 112 and 212 remain
    assert rows(t, [("customer_id", "=", 12)]) == [112, 212]


def test_after_erase_by_key_and_gc_no_object_holds_the_value(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", indexes=("payload",), gc_grace="30m", **TINY
    )
    t.append(events(0, 1_500))  # several files in one run (no payload-177x: the needle)
    assert len(t.manifest.files) > 1
    # a compaction scrubs the entries of the files it replaced from the older runs that
    # still cover live files (here: the other files of the same append; issue 35 one exit)
    t.delete([("id", "in", [i for i in range(150, 200) if i not in (176, 177)])])
    opts = CompactionOptions(min_deleted_fraction=0.05, small_file_fraction=0.0)
    assert t.compact(opts).version is not None
    t.refresh()
    assert values(t, "payload").count("payload-177") == 1  # the live row's only
    needle = {"row 177": Needle((b"payload-177",))}
    bucket = parse_s3_uri(table_uri)[0]
    before = audit_bucket(s3, bucket, needle).found("row 177")
    assert any("/index/" in k for k in before)  # the audit decodes index pieces
    r = t.erase([("id", "=", 177)], request_id="gdpr-177")
    assert r.complete
    gc_now(table_uri)
    assert audit_bucket(s3, bucket, needle).found("row 177") == ()
    t = lethe.Table.open(table_uri)
    assert rows(t, [("payload", "in", ["payload-176", "payload-177"])]) == [176]


def test_read_positions_reads_the_pages_of_the_rows(table_uri: str) -> None:
    from lethe.reading.filtered import read_positions
    from lethe.reading.reader import FileHandle

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 400_000))
    (f,) = t.manifest.files
    whole = pq.read_table(pa.BufferReader(t.store.get(t.key_of(f.path)).body))
    pos = [3, 4, 9_000, 19_999, 350_001]
    h = FileHandle(t.store, t.key_of(f.path), f)
    h.page_index(h.tail())  # the footer and page index: fetched once per object
    before = t.store.stats.snapshot()
    got = read_positions(h, ["id"], pos)
    read = (t.store.stats.snapshot() - before).bytes_downloaded
    assert got.to_pylist() == whole.select(["id"]).take(pos).to_pylist()
    md = h.tail().arrow.row_group(0)
    assert 0 < read < 0.5 * md.column(0).total_compressed_size  # pages of the rows, not the chunks


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(20, 120)),
        st.tuples(st.just("delete"), st.integers(0, 12)),
        st.tuples(st.just("erase_key"), st.integers(0, 10_000)),
        st.tuples(st.just("erase_customer"), st.integers(0, 12)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("purge"), st.just(0)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, seed=st.integers(0, 1000))
def test_index_answers_equal_a_full_scan(s3: Any, ops: list[tuple[str, int]], seed: int) -> None:
    """Random appends, deletes, erases (by key and by the indexed column), purges and
    compactions: every customer's rows through the index are the model's, no live file
    (spliced ones included) is read the unindexed way, and deep verify finds no entry of a
    row a splice removed."""
    bucket = f"h-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    rng = np.random.default_rng(seed)
    t = lethe.Table.create(f"s3://{bucket}/t", EVENTS, key="id", indexes=("customer_id",), **TINY)
    model: dict[int, int] = {}  # id -> customer
    nxt = 0
    for n, (op, arg) in enumerate([("append", 150), *ops]):
        if op == "append":
            batch = events(nxt, arg)
            cust = rng.integers(0, 13, arg).astype(np.int32)
            t.append(batch.set_column(2, "customer_id", pa.array(cust)))
            model.update(zip(range(nxt, nxt + arg), cust.tolist(), strict=True))
            nxt += arg
        elif op == "delete":
            t.delete([("customer_id", "=", arg)])
            model = {i: c for i, c in model.items() if c != arg}
        elif op == "erase_key" and model:
            key = sorted(model)[arg % len(model)]
            assert t.erase([("id", "=", key)], request_id=f"k{n}").complete
            del model[key]
        elif op == "erase_customer":
            assert t.erase([("customer_id", "=", arg)], request_id=f"c{n}").complete
            model = {i: c for i, c in model.items() if c != arg}
        elif op == "compact":
            t.compact(CompactionOptions(min_deleted_fraction=0.1))
        elif op == "purge":
            assert t.purge(request_id=f"p{n}").complete
        t.refresh()
    m = t.manifest
    (ix,) = m.indexes
    assert all(ix.covers(f) for f in m.files)
    event(f"spliced live files: {min(2, sum(f.index_origin is not None for f in m.files))}")
    for c in range(13):
        f = [("customer_id", "=", c)]
        (plan,) = index_plans(t.store, t.catalog.prefix, m, [normalize(f, t.schema)])
        assert plan is not None and plan.unindexed == ()
        assert rows(t, f) == sorted(i for i, v in model.items() if v == c)
    assert rows(t, None) == sorted(model)
    rep = verify(t, deep=True)
    assert rep.ok, rep.problems


def test_index_origin_is_optional_in_the_manifest(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 300))
    (f,) = [f for f in t.manifest.files if f.rows and f.rows > 7]
    assert "index_origin" not in f.model_dump_json()  # files without one read and write as before
    t.erase([("id", "in", [5, 6])], request_id="e")
    t.refresh()
    (s,) = [g for g in t.manifest.files if g.index_origin is not None]
    assert s.index_origin is not None and s.index_origin.path == f.path
    assert sorted(origin_removed(s)) == [5, 6]
    assert DataFile.model_validate_json(s.model_dump_json()) == s
    plain = lethe.Table.create(table_uri + "p", EVENTS, key="id", **TINY)
    plain.append(events(0, 300))
    plain.erase([("id", "=", 5)], request_id="e")
    assert not any(g.index_origin for g in plain.refresh().manifest.files)


def test_an_erase_by_the_indexed_column_reads_no_value_it_already_knows(
    table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request "customer_id in V" names the values of the rows it matches: the scrub reads
    no page of its own (the splice hands the values it read, issue 37 item 3), and the index
    loses exactly the erased rows. Rows an earlier delete hid in the same row groups stay (a
    splice removes only the erased rows, issue 39) with their entries, so their values need
    no read either."""
    import lethe.index.erase as ie
    from lethe.erasure.upkeep import _HeldHandle

    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 300))  # customer c has rows c, c + 100, c + 200
    real = ie.read_positions
    reads: list[int] = []

    def counted(h: Any, cols: Any, bm: Any) -> Any:
        if not isinstance(h, _HeldHandle):  # a read of its own, not the splice's bytes
            reads.append(len(bm))
        return real(h, cols, bm)

    monkeypatch.setattr(ie, "read_positions", counted)
    t.erase([("customer_id", "in", [7])], request_id="e-7")
    assert reads == []  # values known from the request: no page read for the scrub
    assert 7 not in values(t, "customer_id") and rows(t, [("customer_id", "=", 7)]) == []
    t.delete([("id", "=", 108)], request_id="hide-108")  # customer 8, beside 107's group
    t.erase([("customer_id", "in", [9])], request_id="e-9")
    assert reads == []  # the hidden row stays, and so does its entry
    got = entries(t, "customer_id")
    live = set(t.scan(["id"])["id"].to_pylist())
    assert 9 not in got["value"].to_pylist() and got["value"].to_pylist().count(8) == 3
    assert verify(lethe.Table.open(table_uri), deep=True).ok  # every entry is right
    assert len(live) == 300 - 3 - 1 - 3
