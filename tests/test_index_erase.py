"""Erasure reaches the index whatever the erase's filter (issue 14): the entries of exactly
the erased rows leave every referenced index piece, other rows sharing a value stay indexed,
and after GC no object of the table holds an erased value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import EVENTS, events

import lethe
from devtools.demo import Needle, audit_bucket
from lethe.compaction import CompactionOptions, compact
from lethe.gc import collect
from lethe.index import piece_paths
from lethe.store import parse_s3_uri

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
    assert gone <= set(rec.superseded)


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
    t.append(events(0, 300))
    # a compaction leaves entries of the files it replaced in the older runs
    t.delete([("id", "in", list(range(0, 60)))])
    assert compact(t, CompactionOptions(min_deleted_fraction=0.1)).version is not None
    t.refresh()
    assert values(t, "payload").count("payload-177") == 2  # one live, one of a gone file
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
    from lethe.reader import FileHandle, read_positions

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
