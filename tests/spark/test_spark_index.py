"""spark_jobs/index.py: a backfill spread over Spark tasks gives the same answers."""

from __future__ import annotations

from typing import Any

from conftest import EVENTS, SPARK_MARKS, events

import lethe
from spark_jobs.index import run_index

pytestmark = SPARK_MARKS


def test_spark_backfill_writes_one_run_per_task(table_uri: str, spark: Any) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=8_000, row_group_bytes=2_000
    )
    t.append(events(0, 900))
    plain = sorted(t.scan(["id"], [("customer_id", "in", [4, 5])])["id"].to_pylist())
    res = run_index(table_uri, "customer_id", tasks=3, spark=spark)
    t = lethe.Table.open(table_uri)
    assert t.indexes == ("customer_id",)
    (ix,) = t.manifest.indexes
    assert len(ix.runs) == min(3, len(t.manifest.files)) and res.version == t.version
    assert all(ix.covers(f) for f in t.manifest.files)
    assert sorted(t.scan(["id"], [("customer_id", "in", [4, 5])])["id"].to_pylist()) == plain
    assert t.delete([("customer_id", "=", 4)]).rows_deleted == 9


def test_spark_backfill_of_a_renamed_widened_column_reads_old_files_by_field_id(
    table_uri: str, spark: Any
) -> None:
    """Files written before ``customer_id`` was renamed ``cust`` (and widened to int64) hold
    it under the old name: the Spark tasks read it by field id, so the index covers them."""
    import pyarrow as pa

    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=8_000, row_group_bytes=2_000
    )
    t.append(events(0, 600))
    with t.update_schema() as u:
        u.rename_column("customer_id", "cust")
        u.widen_column("cust", pa.int64())
    new = events(600, 300)
    new = new.set_column(2, "cust", new.column("customer_id").cast(pa.int64()))
    t.append(new)
    assert {f.schema_id or 0 for f in t.manifest.files} == {0, 1}
    plain = sorted(t.scan(["id"], [("cust", "in", [4, 5])])["id"].to_pylist())
    assert len(plain) == 18
    run_index(table_uri, "cust", tasks=3, spark=spark)
    t = lethe.Table.open(table_uri)
    (ix,) = t.manifest.indexes
    assert ix.column == "cust" and all(ix.covers(f) for f in t.manifest.files)
    assert sum(r.entries for r in ix.runs) == 900  # every row of every file, none missed
    assert sorted(t.scan(["id"], [("cust", "in", [4, 5])])["id"].to_pylist()) == plain
    from lethe.audit.verify import verify

    report = verify(t, deep=True)
    assert report.ok, report.problems
    assert report.index_entries_checked == 900
    r = t.erase([("cust", "=", 4)])
    assert r.rows_erased == 9
    assert lethe.Table.open(table_uri).scan(filters=[("cust", "=", 4)]).num_rows == 0
