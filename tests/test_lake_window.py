"""Erasure windows and the archive of finished requests (issue 29): 500 requests in one
window splice each file once; ``lake.json`` stays flat however many requests came."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from faults import crash_in

import lethe
from lethe.gc import collect
from lethe.lake import ForgetRequest
from lethe.lake.core import Lake

SCHEMA = pa.schema([("id", pa.int64(), False), ("customer_id", pa.int64()), ("note", pa.string())])
PEOPLE = 600  # every file holds every one of them
FILES = 4
N = 1200


def _table(uri: str) -> lethe.Table:
    t = lethe.Table.create(uri, SCHEMA, key="id", gc_grace="60s", row_group_bytes=4 << 10)
    for f in range(FILES):
        ids = np.arange(f * N, (f + 1) * N, dtype=np.int64)
        t.append(
            pa.table(
                {
                    "id": ids,
                    "customer_id": ids % PEOPLE,
                    "note": [f"n{i}" for i in ids.tolist()],
                },
                schema=SCHEMA,
            )
        )
    return t


def _lake(bucket: str, *, window: timedelta | None = None, tables: int = 2) -> Lake:
    lake = Lake.create(f"s3://{bucket}/_lethe", erasure_window=window)
    for name in ("orders", "events")[:tables]:
        uri = f"s3://{bucket}/tables/{name}"
        _table(uri)
        lake.map_subject("customer", table=uri, column="customer_id")
    return lake


@pytest.mark.slow
def test_500_requests_in_one_window_splice_each_file_once(bucket: str) -> None:
    lake = _lake(bucket)  # the default window: one day
    assert lake.erasure_window == timedelta(days=1)
    asked = datetime.now(UTC) - timedelta(days=26)  # near the deadline already
    people = list(range(500))
    results = lake.forget_batch(
        [ForgetRequest("customer", [p], f"w-{p}", "erase", asked) for p in people]
    )
    assert all(r.complete for r in results)
    uris = lake.tables()
    versions = {u: lethe.Table.open(u).version for u in uris}
    # hidden at once, in one commit per table; no splice before the window closes
    for u in uris:
        assert lethe.Table.open(u).scan(filters=[("customer_id", "in", people)]).num_rows == 0
    assert all(t.files_spliced == 0 for r in results for t in r.tables)
    overdue = lake.erasures(pending=True, older_than=timedelta(days=25))
    assert len(overdue) == 500 and all(not r.done for r in overdue)

    now = datetime.now(UTC)
    early = lake.splice_due(now=now)
    assert (early.requests_due, early.requests_waiting, early.files_spliced) == (0, 500, 0)
    assert {u: lethe.Table.open(u).version for u in uris} == versions

    run = lake.splice_due(now=now + timedelta(days=1))
    assert run.complete and run.requests_due == 500 and run.requests_waiting == 0
    for t in run.tables:
        # every file held some of the 500: each spliced exactly once, in one commit
        assert (t.erasures, t.files_spliced, t.commits) == (500, FILES, 1)
        assert lethe.Table.open(t.table).version == versions[t.table] + 1
    again = lake.splice_due(now=now + timedelta(days=1))
    assert again.files_spliced == 0 and again.commits == 0
    # spliced, not yet collected: still pending (the overdue check keeps reporting it)
    receipt = lake.erasure_status("w-7")
    assert receipt.state == "removed" and all(t.files_spliced == FILES for t in receipt.tables)
    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    assert lake.backlog().pending == 0
    assert lake.erasures(pending=True, older_than=timedelta(days=25)) == []
    receipt = lake.erasure_status("w-7")
    assert receipt.done and receipt.state == "complete"
    assert all(t.gc_run for t in receipt.tables)


def test_window_run_is_bounded_and_continues(bucket: str) -> None:
    lake = _lake(bucket, tables=1)
    lake.forget_batch([ForgetRequest("customer", [p], f"b-{p}", "erase") for p in range(50)])
    later = datetime.now(UTC) + timedelta(days=1)
    first = lake.splice_due(now=later, max_bytes=1)  # one row group's worth, at least
    assert not first.complete and 0 < first.files_spliced < FILES
    backlog = lake.backlog()
    assert backlog.pending == 50 and 0 <= backlog.oldest_age_seconds < 600
    runs = [first]
    while not runs[-1].complete:
        runs.append(lake.splice_due(now=later))
        assert len(runs) < 10
    assert sum(r.files_spliced for r in runs) >= FILES
    (uri,) = lake.tables()
    assert (
        lethe.Table.open(uri).scan(filters=[("customer_id", "in", list(range(50)))]).num_rows == 0
    )


def test_a_zero_window_splices_at_once(bucket: str) -> None:
    lake = _lake(bucket, window=timedelta(0), tables=1)
    r = lake.forget("customer", [3], request_id="now-3")
    assert all(t.spliced and t.files_spliced == FILES for t in r.tables)
    lake.set_erasure_window(timedelta(hours=1))
    assert Lake.open(lake.uri).erasure_window == timedelta(hours=1)
    r = lake.forget("customer", [4], request_id="later-4")
    assert all(t.spliced is None and t.files_spliced == 0 for t in r.tables)


def test_lake_json_stays_flat_over_many_requests(bucket: str, s3: Any) -> None:
    lake = _lake(bucket, window=timedelta(0), tables=1)
    sizes = []
    for round_ in range(12):
        base = round_ * 20
        lake.forget_batch(
            [ForgetRequest("customer", [p], f"flat-{p}", "logical") for p in range(base, base + 20)]
        )
        assert lake.archive(older_than=timedelta(0)) == 20
        body = s3.get_object(Bucket=bucket, Key=f"{lake.prefix}/lake.json")["Body"].read()
        sizes.append(len(body))
    # the document keeps a count of archive objects, not the requests: flat
    assert max(sizes) - min(sizes) <= 2 and lake.refresh().requests == ()  # "archived": 9 -> 12
    assert lake.refresh().archived == 12
    keys = Counter(
        o["Key"].rsplit("/", 2)[-2]
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{lake.prefix}/")["Contents"]
    )
    assert keys["archive"] == 12
    first = lake.erasure_status("flat-0")  # found in the oldest archive
    assert first.done and first.mode == "logical" and first.values == 1
    assert len(lake.erasures()) == 240 and lake.erasures(pending=True) == []
    assert lake.archive(older_than=timedelta(0)) == 0


def test_archive_keeps_unfinished_and_adopts_a_crashed_archive(
    bucket: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _lake(bucket, tables=1)  # a one-day window: erase requests stay unfinished
    lake.forget("customer", [1], request_id="erase-1")
    lake.forget("customer", [2], request_id="logical-2", mode="logical")

    with crash_in(monkeypatch, Lake, "_update"):
        lake.archive(older_than=timedelta(0))
    assert len(lake.refresh().requests) == 2  # the archive object is written, not adopted
    assert lake.archive(older_than=timedelta(0)) == 1  # the next call adopts it
    doc = lake.refresh()
    assert [r.mode for r in doc.requests] == ["erase"] and doc.archived == 1
    assert lake.erasure_status("logical-2").done
    assert (
        lake.erasure_status("erase-1").state == "hidden" or not lake.erasure_status("erase-1").done
    )
