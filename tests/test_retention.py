"""Row TTL as hard erasure (lethe.erasure.retention): whole expired files dropped by a metadata-only
commit, straddling files spliced, a receipt per sweep, the CLI, and GC running the sweep."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from faults import on_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.cli import main
from lethe.erasure.retention import RowRetention, cut_value, plan_sweep
from lethe.gc import collect

T0 = 1_700_000_000  # conftest.events: row i has event_time T0 + i seconds
DATA_OPS = (
    "GetObject",
    "PutObject",
    "UploadPart",
    "UploadPartCopy",
    "CreateMultipartUpload",
    "CopyObject",
)


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def time_ordered(uri: str, s3: Any, *, files: int = 6, rows: int = 100) -> lethe.Table:
    """``files`` appends of ``rows`` rows each, in time order: file k holds ids (and
    seconds after T0) ``[k*rows, (k+1)*rows)``; rows expire 1000 s after their time."""
    t = lethe.Table.create(
        uri, EVENTS, key="id", s3=s3, row_group_bytes=1024, retention=("event_time", "1000s")
    )
    for k in range(files):
        t.append(events(k * rows, rows))
    return t


@contextmanager
def data_requests(s3: Any) -> Iterator[list[str]]:
    """The data-file keys each request of :data:`DATA_OPS` names while the block runs."""
    seen: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        key = str(params.get("url_path", ""))  # before-call params: the request dict
        if "/data/" in key:
            seen.append(f"{op} {key}")

    with on_request(s3, DATA_OPS, hook):
        yield seen


def physical_ids(t: lethe.Table) -> list[int]:
    """Every id physically present in the live files (DVs not applied)."""
    out: list[int] = []
    for f in t.manifest.files:
        body = t.store.get(t.key_of(f.path)).body
        out += pq.read_table(io.BytesIO(body), columns=["id"]).column("id").to_pylist()
    return sorted(out)


def test_create_refuses_a_retention_column_that_is_not_a_time(table_uri: str, s3: Any) -> None:
    with pytest.raises(errors.InvalidRequest, match="timestamp or date"):
        lethe.Table.create(table_uri, EVENTS, key="id", s3=s3, retention=("payload", "400d"))
    with pytest.raises(errors.InvalidRequest, match="not in the schema"):
        lethe.Table.create(table_uri, EVENTS, key="id", s3=s3, retention=("nope", "400d"))
    with pytest.raises(errors.InvalidRequest, match="duration"):
        lethe.Table.create(table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "x"))
    t = lethe.Table.create(table_uri, EVENTS, key="id", s3=s3, retention=("event_time", "400d"))
    assert t.retention == RowRetention("event_time", 400 * 86400)
    assert lethe.Table.open(table_uri, s3=s3).manifest.properties.retention_seconds == 400 * 86400


def test_set_retention_and_properties_commit_and_refuse_fixed_fields(
    table_uri: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", s3=s3)
    assert t.retention is None
    r = t.set_retention("event_time", "30d")
    assert r.version == 1 and t.retention == RowRetention("event_time", 30 * 86400)
    assert t.history()[0].operation == "properties"
    with pytest.raises(errors.InvalidRequest, match="timestamp or date"):
        t.set_retention("customer_id", "30d")
    with pytest.raises(errors.InvalidRequest, match="fixed"):
        t.set_properties(key="payload")
    with pytest.raises(errors.InvalidRequest, match="fixed"):
        t.set_properties(gc_grace_seconds=1.0)
    with pytest.raises(errors.InvalidRequest, match="unknown"):
        t.set_properties(colour="blue")
    assert t.set_properties(iceberg_view=False).version == 1  # no change: no commit
    t.set_retention(None)
    assert t.version == 2 and lethe.Table.open(table_uri, s3=s3).retention is None


def test_a_sweep_without_retention_refuses(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", s3=s3)
    t.append(events(0, 10))
    with pytest.raises(errors.InvalidRequest, match="no row retention"):
        t.sweep_retention()
    assert t.refresh().version == 1


def test_whole_expired_files_drop_in_one_commit_moving_no_data_bytes(
    table_uri: str, s3: Any
) -> None:
    t = time_ordered(table_uri, s3)
    before, files = t.version, t.manifest.file_count
    first_two = {f.path for f in t.manifest.files[:2]}
    io0 = t.store.stats.snapshot()
    with data_requests(s3) as touched:
        r = t.sweep_retention(now=at(1200))  # cutoff T0+200: files 0 and 1 wholly expired
    io = t.store.stats.snapshot() - io0
    assert touched == []  # no data file read, written or copied
    assert io.bytes_copied == 0 and io.count("upload_part") == 0
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (2, 0, 200)
    assert r.data_bytes_moved == 0 and r.bytes_dropped > 0
    assert r.versions == (before + 1,) and t.version == before + 1
    assert t.manifest.file_count == files - 2
    assert t.scan(columns=["id"]).column("id").to_pylist() == list(range(200, 600))
    assert t.history()[0].operation == "retention"
    old = lethe.Table.open(table_uri, s3=s3, version=before)
    # issue 39: the old version reads the dropped files as gone (through the lineage)
    assert old.scan(columns=["id"]).num_rows == 400
    rec = t.erasure_status(r.request_id)
    assert rec.state == "removed" and rec.kind == "retention"
    assert {s.file for s in rec.splices} == first_two


def test_straddling_files_are_spliced_and_the_rows_physically_gone(table_uri: str, s3: Any) -> None:
    t = time_ordered(table_uri, s3)
    before = t.version
    straddler = t.manifest.files[2]
    assert len(straddler.row_groups) > 1
    r = t.sweep_retention(now=at(1250))  # cutoff T0+250: ids 0..249 expire
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (2, 1, 250)
    assert len(r.versions) == 2 and r.complete
    assert r.splice_bytes > 0 and r.data_bytes_moved >= r.splice_bytes
    assert sorted(t.scan(columns=["id"]).column("id").to_pylist()) == list(range(250, 600))
    assert physical_ids(t) == list(range(250, 600))  # not hidden: gone from the bytes
    new = next(f for f in t.manifest.files if f.columns["id"].min == 250)
    body = t.store.get(t.key_of(new.path)).body
    assert b"payload-249" not in body and b"payload-200" not in body
    assert b"payload-250" in body and b"payload-299" in body
    assert t.scan(filters=[("id", "=", 299)]).column("payload").to_pylist() == ["payload-299"]
    old = lethe.Table.open(table_uri, s3=s3, version=before)
    # issue 39: the old version reads through the splice and the drops (the expired rows)
    assert old.scan(columns=["id"]).num_rows == 600 - 250
    assert t.store.get(t.key_of(straddler.path)).body  # the old object stays until GC
    rec = t.erasure_status(r.request_id)
    assert rec.state == "removed" and not rec.pending_files
    assert len(t.retention_receipts()) == 1
    again = t.sweep_retention(now=at(1250))  # the same cutoff: its record, nothing new
    assert again.duplicate and again.versions == () and t.version == before + 2


def test_a_dry_run_commits_nothing(table_uri: str, s3: Any) -> None:
    t = time_ordered(table_uri, s3)
    before = t.version
    r = t.sweep_retention(now=at(1250), dry_run=True)
    assert r.dry_run and (r.files_dropped, r.files_spliced, r.rows_expired) == (2, 1, 250)
    assert r.versions == () and t.refresh().version == before
    assert t.scan(columns=["id"]).num_rows == 600


def test_files_without_stats_or_with_nulls_are_read(table_uri: str, s3: Any) -> None:
    t = time_ordered(table_uri, s3, files=2)
    f0 = t.manifest.files[0]
    cut = cut_value(EVENTS.field("event_time").type, at(500))
    # a file whose stats say nothing is read, not dropped nor kept blindly
    bare = f0.model_copy(update={"columns": {}})
    assert plan_sweep([bare], "event_time", EVENTS.field("event_time").type, cut).read == (bare,)
    plan = plan_sweep(t.manifest.files, "event_time", EVENTS.field("event_time").type, cut)
    assert len(plan.dropped) == 2
    with_nulls = events(1000, 10).set_column(
        1, "event_time", pa.array([None] * 5 + [T0] * 5, pa.timestamp("us", tz="UTC"))
    )
    t.append(with_nulls)  # max expired, but nulls never expire: the file is read
    r = t.sweep_retention(now=at(1500))
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (2, 1, 205)
    assert sorted(t.scan(columns=["id"]).column("id").to_pylist()) == list(range(1000, 1005))


def test_cli_retention_set_show_sweep_clear(
    table_uri: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    t = time_ordered(table_uri, s3, files=2)
    assert main(["retention", "set", table_uri, "--column", "event_time", "--keep", "400d"]) == 0
    assert t.refresh().retention == RowRetention("event_time", 400 * 86400)
    assert main(["retention", "show", table_uri]) == 0
    assert "event_time" in capsys.readouterr().out
    assert main(["retention", "sweep", table_uri, "--dry-run"]) == 0
    assert "would drop 2 file(s)" in capsys.readouterr().out  # 2023's rows are past 400 days
    assert t.refresh().scan(columns=["id"]).num_rows == 200
    assert main(["retention", "clear", table_uri]) == 0
    assert t.refresh().retention is None
    assert main(["retention", "show", table_uri]) == 0
    assert "no row retention" in capsys.readouterr().out
    # a refused retention is 'lethe: InvalidRequest: ...', exit 2, like every command
    assert main(["retention", "set", table_uri, "--column", "payload", "--keep", "1d"]) == 2
    assert main(["retention", "set", table_uri, "--column", "event_time", "--keep", "400"]) == 2
    assert "no unit" in capsys.readouterr().err


def test_gc_runs_the_sweep(table_uri: str, s3: Any) -> None:
    t = time_ordered(table_uri, s3, files=3)
    rep = collect(table_uri, s3=s3, retention="1000v", now=at(1250))
    assert not rep.dry_run
    t.refresh()
    assert t.scan(columns=["id"]).column("id").to_pylist() == list(range(250, 300))
    assert [h.operation for h in t.history()[:2]] == ["erase", "retention"]


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    times=st.lists(st.one_of(st.none(), st.integers(0, 10_000)), min_size=1, max_size=40),
    cuts=st.integers(0, 10_500),
    batches=st.integers(1, 4),
)
def test_rows_kept_are_exactly_those_at_or_after_the_cutoff(
    bucket: str, s3: Any, times: list[int | None], cuts: int, batches: int
) -> None:
    uri = f"s3://{bucket}/p/{uuid.uuid4().hex}"  # one table per example
    t = lethe.Table.create(
        uri, EVENTS, key="id", s3=s3, row_group_bytes=512, retention=("event_time", "100s")
    )
    stamps = [None if x is None else (T0 + x) * 1_000_000 for x in times]
    rows = events(0, len(times)).set_column(
        1, "event_time", pa.array(stamps, pa.timestamp("us", tz="UTC"))
    )
    for chunk in np.array_split(np.arange(len(times)), batches):
        if len(chunk):
            t.append(rows.take(pa.array(chunk)))
    r = t.sweep_retention(now=at(cuts + 100))
    assert r.cutoff == at(cuts)
    want = sorted(i for i, x in enumerate(times) if x is None or x >= cuts)
    assert sorted(t.scan(columns=["id"]).column("id").to_pylist()) == want
    assert physical_ids(t) == want  # never more (physically), never fewer
    assert r.rows_expired == len(times) - len(want)


def test_the_cutoff_is_in_whole_seconds_and_dates_expire_after_their_day() -> None:
    keep = RowRetention("t", 60)
    assert keep.cutoff(datetime(2026, 1, 1, 0, 1, 0, 999, tzinfo=UTC)) == datetime(
        2026, 1, 1, tzinfo=UTC
    )
    with pytest.raises(errors.InvalidRequest):
        keep.cutoff(datetime(2026, 1, 1))
    noon = datetime(2026, 1, 2, 12, tzinfo=UTC)
    day = (noon.date() - timedelta(days=1) - datetime(1970, 1, 1).date()).days
    assert cut_value(pa.date32(), noon) == day + 1  # 2026-01-01 has expired, 01-02 not


def test_an_indexed_table_stays_consistent_after_a_sweep(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, row_group_bytes=1024, indexes=("customer_id",),
        retention=("event_time", "1000s"),
    )  # fmt: skip
    for k in range(4):
        t.append(events(k * 100, 100, customers=10))
    r = t.sweep_retention(now=at(1150))
    assert (r.files_dropped, r.files_spliced, r.rows_expired) == (1, 1, 150)
    got = t.scan(columns=["id"], filters=[("customer_id", "=", 3)]).column("id").to_pylist()
    assert sorted(got) == [i for i in range(150, 400) if i % 10 == 3]
