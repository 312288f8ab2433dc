"""Issue 35 item 9: row TTL at the seams. Rows dropped with their whole file leave the index
(no piece nor the head manifest names them after GC), a retention needs a unit, a drop-only
sweep reads no dropped file, an all-NULL time file is not re-read by every sweep, receipts
say ``dropped`` for dropped files, and a no-op sweep names no receipt."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from faults import on_request

import lethe
from devtools.audit import Needle, audit_bucket
from lethe import errors
from lethe.erasure.retention import RowRetention
from lethe.gc import collect
from lethe.ingest import register_parquet
from lethe.storage.store import parse_s3_uri

T0 = 1_700_000_000  # conftest.events: row i has event_time T0 + i seconds
TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def index_values(t: lethe.Table, column: str) -> list[Any]:
    """Every value of the head's index on ``column`` (pieces decoded)."""
    ix = t.manifest.index(column)
    assert ix is not None
    out: list[Any] = []
    for r in ix.runs:
        for p in r.pieces:
            body = t.store.get(t.key_of(p.path)).body
            out += pq.read_table(io.BytesIO(body)).column("value").to_pylist()
    return out


def test_seam09_rows_dropped_with_their_file_leave_no_index_entry(table_uri: str, s3: Any) -> None:
    """issue 35 item 9: the files a sweep drops whole share an index run with live files;
    their entries must leave the pieces (and the piece bounds in the head manifest), and
    after GC no object of the bucket holds an expired customer's id."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "1000s"), gc_grace="30m",
        **TINY,
    )  # fmt: skip
    n = 200
    for k in range(3):
        t.append(events(k * n, n, customers=100_000))  # customer i is row i
    for column in ("customer_id", "payload"):
        t.create_index(column)  # one run covering the three files
    t.refresh()
    assert all(len(ix.runs) == 1 for ix in t.manifest.indexes)
    r = t.sweep_retention(now=at(1000 + n))  # exactly the first file expires
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (1, 0, n)
    t.refresh()
    kept = index_values(t, "customer_id")
    assert sorted(kept) == list(range(n, 600))
    assert not any(f"payload-{i}" in index_values(t, "payload") for i in range(n))
    pieces = [p for ix in t.manifest.indexes for run in ix.runs for p in run.pieces]
    assert all(p.min is None or int(p.min) >= n for p in pieces if "customer_id" in p.path)
    rec = t.erasure_status(r.request_id)
    collect(table_uri, s3=s3, retention="1v", erasure_grace="0s",
            now=datetime.now(UTC) + timedelta(hours=1))  # fmt: skip
    bucket = parse_s3_uri(table_uri)[0]
    gone = {f"c{i}": Needle.column("customer_id", i) for i in (0, n // 2, n - 1)}
    gone["p"] = Needle((f"payload-{n - 1}".encode(),))
    audit = audit_bucket(s3, bucket, gone)
    assert all(audit.found(k) == () for k in gone), {k: audit.found(k) for k in gone}
    assert rec.state == "removed"
    assert lethe.Table.open(table_uri, s3=s3).erasure_status(r.request_id).state == "complete"
    assert sorted(t.scan(["id"], [("customer_id", "<", 2 * n)])["id"].to_pylist()) == list(
        range(n, 2 * n)
    )


@pytest.mark.parametrize("keep", ["400", "400.5", 400, 12.0])
def test_seam09_a_retention_without_a_unit_is_refused(table_uri: str, s3: Any, keep: Any) -> None:
    """issue 35 item 9: ``("event_time", "400")`` was taken as 400 seconds (every row older
    than 6 minutes would go at the next GC): a duration needs a unit."""
    with pytest.raises(errors.InvalidRequest, match="unit"):
        lethe.Table.create(table_uri, EVENTS, key="id", s3=s3, retention=("event_time", keep))
    t = lethe.Table.create(table_uri, EVENTS, key="id", s3=s3)
    with pytest.raises(errors.InvalidRequest, match="unit"):
        t.set_retention("event_time", keep)
    assert t.refresh().retention is None
    for ok, seconds in (("400s", 400), ("400d", 400 * 86400), (timedelta(hours=2), 7200)):
        t.set_retention("event_time", ok)
        assert t.refresh().retention == RowRetention("event_time", seconds)


def test_seam09_a_drop_only_sweep_reads_no_dropped_file(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """issue 35 item 9: when another file lacks statistics the sweep reads that file's
    retention column; the files it drops whole by their statistics are never read."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "1000s"), **TINY
    )
    for k in range(3):
        t.append(events(k * 100, 100))
    buf = io.BytesIO()
    pq.write_table(events(1000, 10), buf, write_statistics=False)
    etag = s3.put_object(Bucket=bucket, Key="incoming/bare.parquet", Body=buf.getvalue())["ETag"]
    register_parquet(t, "incoming/bare.parquet", etag=etag.strip('"'), size=None)
    t.refresh()
    assert sum(1 for f in t.manifest.files if "event_time" not in f.columns) == 1
    dropped = {f.path for f in t.manifest.files[:2]}
    seen: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        seen.append(str(params.get("url_path", "")))

    with on_request(s3, ("GetObject", "HeadObject"), hook):
        r = t.sweep_retention(now=at(1200))  # files 0 and 1 expired whole
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (2, 0, 200)
    assert any("/data/" in k for k in seen)  # the file without statistics was read
    assert not [k for k in seen if any(k.endswith(p) for p in dropped)]


def test_seam09_an_all_null_time_file_is_not_reread_by_every_sweep(table_uri: str, s3: Any) -> None:
    """issue 35 item 9: a file whose retention column is NULL in every row never expires;
    no sweep reads it (its manifest statistics say so)."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "1000s"), **TINY
    )
    t.append(events(0, 100))
    straddle = events(100, 10).set_column(
        1, "event_time", pa.array([None] * 5 + [(T0 + 1) * 1_000_000] * 5,
                                  pa.timestamp("us", tz="UTC")),
    )  # fmt: skip
    t.append(straddle)  # its expired half is spliced away: the file left is all NULL
    t.append(events(1000, 10).set_column(
        1, "event_time", pa.array([None] * 10, pa.timestamp("us", tz="UTC"))))  # fmt: skip
    first = t.sweep_retention(now=at(1500))
    assert first.rows_expired == 105 and first.complete
    t.refresh()
    data: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        if "/data/" in str(params.get("url_path", "")):
            data.append(str(params["url_path"]))

    for later in (1600, 1700):
        with on_request(s3, ("GetObject", "HeadObject"), hook):
            r = t.sweep_retention(now=at(later))
        assert r.rows_expired == 0 and r.versions == ()
    assert data == []
    assert sorted(t.scan(["id"])["id"].to_pylist()) == [*range(100, 105), *range(1000, 1010)]


def test_seam09_receipts_say_dropped_and_a_noop_sweep_names_no_receipt(
    table_uri: str, s3: Any
) -> None:
    """issue 35 item 9: a file dropped whole is listed as ``dropped``, not ``spliced``; a
    sweep that expired nothing committed no request and must not point at a receipt."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "1000s"), **TINY
    )
    for k in range(3):
        t.append(events(k * 100, 100))
    r = t.sweep_retention(now=at(1250))  # file 0 and 1 dropped, file 2 spliced
    assert (r.files_dropped, r.files_spliced) == (2, 1)
    rec = t.erasure_status(r.request_id)
    hows = sorted(s.how for s in rec.splices)
    assert hows == ["dropped", "dropped", "spliced"]
    text = rec.describe()
    assert text.count("  dropped    ") == 2 and text.count("  spliced    ") == 1
    noop = lethe.erasure.retention.sweep(t.refresh(), now=at(1250), request_id="noop")  # none left
    assert noop.versions == () and not noop.duplicate
    assert "receipt" not in noop.describe() and "nothing expired" in noop.describe()
    assert t.erasure_status(noop.request_id).state == "unknown"
    dry = t.sweep_retention(now=at(1260), dry_run=True)
    assert "receipt" not in dry.describe()
    assert json.dumps(noop.request_hash)  # the id stays available to callers


def test_seam09_a_run_of_dropped_files_only_is_evidence_of_the_sweep(
    table_uri: str, s3: Any
) -> None:
    """issue 35 item 9: a run that covered only dropped files leaves with them; its pieces
    held the expired rows' values, so they join the sweep's superseded objects (GC must
    delete them before the receipt says complete)."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, indexes=("customer_id",),
        retention=("event_time", "1000s"), **TINY,
    )  # fmt: skip
    for k in range(3):
        t.append(events(k * 100, 100, customers=100_000))  # one run per append
    first = t.manifest.files[0]
    (run,) = [r for r in t.manifest.indexes[0].runs if r.covers_version(first.added_version)]
    assert len(t.manifest.files) == 3
    r = t.sweep_retention(now=at(1100))
    assert (r.files_dropped, r.files_spliced) == (1, 0)
    t.refresh()
    assert all(not r2.covers_version(first.added_version) for r2 in t.manifest.indexes[0].runs)
    (rec,) = t.manifest.erasures
    assert {p.path for p in run.pieces} <= set(t.manifest.superseded_of(rec))
