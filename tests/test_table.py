"""Table API against moto's server: append, scan, filters, lookup, time travel, bad input."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS, events, run_in_threads

import lethe
from lethe import errors
from lethe.catalog.manifest import encode_manifest, manifest_key
from lethe.storage.layout import HEAD_KEY

SMALL = {"target_file_bytes": 40_000, "row_group_bytes": 10_000}


@pytest.fixture
def table(table_uri: str) -> lethe.Table:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    t.append(events(0, 10_000))
    t.append(events(10_000, 10_000))
    return t


def test_create_open_append_scan(table: lethe.Table, table_uri: str) -> None:
    assert table.version == 2
    files = table.manifest.files
    assert len(files) >= 4, "input splits into several files of about target_file_bytes"
    assert all(len(f.row_groups) >= 2 for f in files)
    assert all(f.sorted_by_key for f in files)
    assert max(f.size for f in files) < 2 * SMALL["target_file_bytes"]
    out = lethe.Table.open(table_uri).scan()
    assert out.num_rows == 20_000
    assert sorted(out["id"].to_pylist()) == list(range(20_000))
    assert out.schema.equals(EVENTS)


def test_manifest_stats_cover_data(table: lethe.Table) -> None:
    for f in table.manifest.files:
        data = table.scan(filters=None).filter(pc.field("id") >= 0)
        del data
        lo = f.row_groups[0].key_min
        hi = f.row_groups[-1].key_max
        assert f.columns["id"].min == lo and f.columns["id"].max == hi
        assert sum(rg.rows for rg in f.row_groups) == f.rows


def test_projection_and_filters(table: lethe.Table) -> None:
    full = table.scan()
    cases: list[Any] = [
        [("id", "=", 1234)],
        [("id", "in", [5, 17_000, 99_999])],
        [("customer_id", "=", 7)],
        [("id", ">=", 19_990)],
        [[("id", "<", 3)], [("id", ">", 19_997)]],
        [("payload", "!=", "payload-5"), ("id", "<", 10)],
        [("event_time", ">=", datetime(2023, 11, 14, 22, 14, 30, tzinfo=UTC)), ("id", "<", 100)],
        [("customer_id", "not in", [1, 2, 3]), ("id", "<", 50)],
    ]
    import pyarrow.parquet as pq

    for f in cases:
        want = full.filter(pq.filters_to_expression(f)).sort_by("id")
        got = table.scan(filters=f).sort_by("id")
        assert got.equals(want), f
    iso = table.scan(filters=[("event_time", ">=", "2023-11-14T22:14:30+00:00"), ("id", "<", 100)])
    assert iso.sort_by("id").equals(table.scan(filters=cases[6]).sort_by("id"))
    assert 0 < iso.num_rows < 100
    proj = table.scan(["payload", "id"], [("id", "<", 5)])
    assert proj.column_names == ["payload", "id"]
    assert proj.num_rows == 5


def test_pruning_reads_only_needed_chunks(table_uri: str) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=3 << 20, row_group_bytes=200_000
    )
    t.append(events(0, 200_000))
    f = t.manifest.files[0]
    assert f.size > 1 << 20 and len(f.row_groups) > 4
    t.lookup(5)  # warm the footer cache
    before = t.io
    got = t.lookup(5, columns=["payload"])
    d = t.io - before
    assert got.to_pylist() == [{"payload": "payload-5"}]
    assert d.count("get") == 1, d.describe()
    rg0 = f.row_groups[0]
    assert d.bytes_downloaded <= rg0.length, "at most one row group's chunks"
    before = t.io
    assert t.scan(["id"], [("id", "=", 9)]).num_rows == 1
    d = t.io - before
    assert d.count("get") == 1 and d.bytes_downloaded < rg0.length / 3, "only the key chunk"
    before = t.io
    assert t.lookup(7).num_rows == 1
    d = t.io - before
    assert d.count("get") == 1 and d.bytes_downloaded <= rg0.length


def test_lookup_missing_key(table: lethe.Table) -> None:
    before = table.io
    assert table.lookup(10**9).num_rows == 0
    assert (table.io - before).count("get") == 0, "manifest stats prune every file"


def test_pinned_reader_ignores_later_commits(table: lethe.Table, table_uri: str) -> None:
    pinned = lethe.Table.open(table_uri)
    v = pinned.version
    other = lethe.Table.open(table_uri)
    other.append(events(20_000, 500))
    assert pinned.version == v
    assert pinned.scan(["id"]).num_rows == 20_000
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == 20_500
    pinned.refresh()
    assert pinned.version == v + 1


def test_time_travel(table: lethe.Table, table_uri: str) -> None:
    assert lethe.Table.open(table_uri, version=0).scan().num_rows == 0
    assert lethe.Table.open(table_uri, version=1).scan().num_rows == 10_000
    with pytest.raises(errors.SnapshotNotFound, match="latest is 2"):
        lethe.Table.open(table_uri, version=7)
    hist = table.history()
    assert [h.version for h in hist] == [2, 1, 0]
    assert [h.operation for h in hist] == ["append", "append", "create"]
    assert [h.live_rows for h in hist] == [20_000, 10_000, 0]


def test_replaced_object_fails_loudly(table: lethe.Table, s3: Any) -> None:
    f = table.manifest.files[0]
    bucket = table.store.bucket
    key = table.key_of(f.path)
    fresh = lethe.Table.open(table.uri)  # cold footer cache is shared; clear by replacing
    s3.put_object(Bucket=bucket, Key=key, Body=b"PAR1 not the same file PAR1")
    with pytest.raises(errors.StaleSnapshot, match="changed since the snapshot"):
        fresh.scan(filters=[("id", "in", [f.columns["id"].min])])


def test_unknown_table(bucket: str) -> None:
    with pytest.raises(errors.TableNotFound, match="no Lethe table"):
        lethe.Table.open(f"s3://{bucket}/nothing/here")


def test_create_twice(table: lethe.Table) -> None:
    with pytest.raises(errors.TableExists):
        lethe.Table.create(table.uri, EVENTS, key="id")


def test_bad_create_arguments(table_uri: str) -> None:
    with pytest.raises(errors.InvalidRequest, match="key column"):
        lethe.Table.create(table_uri, EVENTS, key="nope")


def test_wrong_schema_append_leaves_table_unharmed(table: lethe.Table) -> None:
    v = table.version
    bad = events(0, 10).drop_columns(["payload"])
    with pytest.raises(errors.SchemaMismatch, match="missing columns"):
        table.append(bad)
    wrong_type = events(0, 10).set_column(2, "customer_id", pa.array(["x"] * 10))
    with pytest.raises(errors.SchemaMismatch, match="type mismatch"):
        table.append(wrong_type)
    with pytest.raises(errors.InvalidRequest):
        table.append({"id": [1]})  # type: ignore[arg-type]
    again = lethe.Table.open(table.uri)
    assert again.version == v and again.scan(["id"]).num_rows == 20_000


def test_reordered_columns_are_accepted(table: lethe.Table) -> None:
    t = events(50_000, 10)
    r = table.append(t.select(["payload", "id", "customer_id", "event_time"]))
    assert r.rows_added == 10
    assert table.lookup(50_003)["payload"].to_pylist() == ["payload-50003"]


def test_bad_filters_are_invalid_requests(table: lethe.Table) -> None:
    for f in (
        [("nope", "=", 1)],
        [("id", "~", 1)],
        [("id", "=", "abc")],
        [("id", "in", 5)],
        [],
        [("id",)],
    ):
        with pytest.raises(errors.InvalidRequest):
            table.scan(filters=f)
    with pytest.raises(errors.InvalidRequest):
        table.scan(columns=["nope"])


def test_corrupt_head_and_manifest(table: lethe.Table, s3: Any) -> None:
    bucket = table.store.bucket
    head_key = table.key_of(HEAD_KEY)
    good_head = s3.get_object(Bucket=bucket, Key=head_key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=head_key, Body=b'{"version": 2, "manif')
    with pytest.raises(errors.CorruptManifest, match="not valid JSON"):
        lethe.Table.open(table.uri)
    s3.put_object(Bucket=bucket, Key=head_key, Body=good_head)
    # corrupt an (immutable) manifest out of band: opening that version is a clear error
    mkey = table.key_of(manifest_key(1))
    good = s3.get_object(Bucket=bucket, Key=mkey)["Body"].read()
    s3.put_object(Bucket=bucket, Key=mkey, Body=good[: len(good) // 3])
    with pytest.raises(errors.CorruptManifest):
        lethe.Table.open(table.uri, version=1)
    s3.put_object(Bucket=bucket, Key=mkey, Body=good)
    # the latest version was never harmed
    assert lethe.Table.open(table.uri).scan(["id"]).num_rows == 20_000


def test_crashed_committer_is_rolled_forward(table: lethe.Table, s3: Any) -> None:
    """A writer that died between its manifest PUT and its head PUT does not wedge the table."""
    from lethe.catalog.manifest import Operation
    from lethe.catalog.transforms import apply_append

    base = table.manifest
    orphan = apply_append(base, [], Operation(kind="append"))
    table.catalog.write_segments(orphan)
    s3.put_object(
        Bucket=table.store.bucket,
        Key=table.key_of(manifest_key(orphan.version)),
        Body=encode_manifest(orphan.manifest),
    )
    # the head still names the old version; the next commit must land on top of the orphan
    r = lethe.Table.open(table.uri).append(events(90_000, 10))
    assert r.version == orphan.version + 1
    t = lethe.Table.open(table.uri)
    assert t.version == orphan.version + 1
    assert t.scan(["id"]).num_rows == 20_010
    assert (
        json.loads(
            s3.get_object(Bucket=table.store.bucket, Key=table.key_of(HEAD_KEY))["Body"].read()
        )["version"]
        == r.version
    )


def test_concurrent_appends(table_uri: str) -> None:
    """16 threads appending at once: every append visible exactly once, versions contiguous."""
    lethe.Table.create(table_uri, EVENTS, key="id")
    results: list[lethe.CommitResult] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        r = lethe.Table.open(table_uri).append(events(i * 100, 100))
        with lock:
            results.append(r)

    assert not run_in_threads(*(partial(work, i) for i in range(16)))
    assert sorted(r.version for r in results) == list(range(1, 17))
    t = lethe.Table.open(table_uri)
    assert t.version == 16
    ids = t.scan(["id"])["id"].to_pylist()
    assert sorted(ids) == list(range(1600)), "no lost or duplicated append"
    assert [h.version for h in t.history()] == list(range(16, -1, -1))
    assert any(r.attempts > 1 for r in results), "the race was real"
