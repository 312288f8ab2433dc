"""``spark.read.format("lethe")`` and ``df.write.format("lethe")`` (issue 40): real local
Spark reads a table with deletes, an erase and a rename at two versions, and appends with a
retried request id landing once; Spark, DuckDB and Polars read one adopted Hive table at two
versions (the issue's Done when)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pyarrow as pa
import pytest
from conftest import EVENTS, SPARK_MARKS, events

import lethe
import lethe.spark

pytestmark = SPARK_MARKS

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def test_spark_reads_a_table_with_deletes_erasures_and_renames(table_uri: str, spark: Any) -> None:
    lethe.spark.register(spark)
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 1_500))
    v1 = lethe.Table.open(table_uri).version
    t.delete([("customer_id", "in", [3, 4])], request_id="d")
    t.erase([("customer_id", "=", 5)], request_id="e")
    with lethe.Table.open(table_uri).update_schema() as u:
        u.rename_column("payload", "body")
    t = lethe.Table.open(table_uri)
    df = spark.read.format("lethe").load(table_uri)
    assert df.rdd.getNumPartitions() >= len(t.manifest.files) >= 2  # one file or less each
    assert df.columns == ["id", "event_time", "customer_id", "body"]
    assert _ids(df) == sorted(t.scan()["id"].to_pylist())
    got = {r["id"]: r["body"] for r in df.where("id < 20").collect()}
    assert got == {i: f"payload-{i}" for i in range(20) if i % 100 not in (3, 4, 5)}

    old = spark.read.format("lethe").option("version", str(v1)).load(table_uri)
    assert "payload" in old.columns and old.count() == 1_485  # minus the erased (issue 39)

    some = (
        spark.read.format("lethe")
        .option("filters", "customer_id = 7 or customer_id = 5")
        .option("columns", "id,customer_id")
        .load(table_uri)
    )
    assert some.columns == ["id", "customer_id"]
    assert _ids(some) == [i for i in range(1_500) if i % 100 == 7]


def test_spark_appends_once_per_request_id_and_refuses_overwrite(
    table_uri: str, spark: Any
) -> None:
    lethe.spark.register(spark)
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 10))
    rows = events(10, 400)
    df = spark.createDataFrame(
        rows.to_pylist(), schema="id long, event_time timestamp, customer_id int, payload string"
    ).repartition(3)
    for _ in range(2):  # a retried job: the second run commits nothing
        df.write.format("lethe").mode("append").option("request_id", "job-1").save(table_uri)
    t = lethe.Table.open(table_uri)
    assert sorted(t.scan()["id"].to_pylist()) == list(range(410))
    appends = [h for h in t.history() if h.operation == "append"]
    assert len(appends) == 2  # the first append, and the Spark job once
    left = {
        o["Key"]
        for o in t.store.client.list_objects_v2(
            Bucket=t.store.bucket, Prefix=t.catalog.prefix + "/data/"
        )["Contents"]
    }
    live = {t.key_of(f.path) for f in t.manifest.files}
    assert left == live  # the retry's own files were removed, none left behind

    with pytest.raises(Exception, match="overwrite"):
        df.write.format("lethe").mode("overwrite").save(table_uri)
    assert lethe.Table.open(table_uri).scan().num_rows == 410

    wide = rows.slice(0, 5).append_column("country", pa.array(["NL"] * 5))
    wdf = spark.createDataFrame(
        [{**r, "id": r["id"] + 10_000} for r in wide.to_pylist()],
        schema="id long, event_time timestamp, customer_id int, payload string, country string",
    )
    with pytest.raises(Exception, match="country"):
        wdf.write.format("lethe").mode("append").save(table_uri)
    wdf.write.format("lethe").mode("append").option("mergeSchema", "true").save(table_uri)
    t = lethe.Table.open(table_uri)
    assert "country" in t.schema.names and t.scan().num_rows == 415


# --- issue 40 "Done when": one table, three engines, two versions -----------------------------
def _same_rows(got: pa.Table, want: pa.Table) -> None:
    """``got`` (any engine's Arrow) holds exactly ``want``'s rows: same columns in order, values
    compared after casting to Lethe's types (engines differ in string width and tz naming)."""
    assert got.column_names == want.column_names
    got = got.cast(want.schema)
    assert got.sort_by("id").to_pylist() == want.sort_by("id").to_pylist()


def _adopted_hive_table(s3: Any, bucket: str) -> tuple[lethe.Table, int]:
    """Hive-style ``dt=YYYY-MM-DD/`` Parquet files adopted in place (``dt`` a date constant of
    each file), then a delete (the old version returned), an erase, a rename and an append."""
    import io

    import pyarrow.parquet as pq

    for d in (1, 2, 3):
        buf = io.BytesIO()
        pq.write_table(events(d * 1_000, 400), buf, row_group_size=100)
        s3.put_object(
            Bucket=bucket, Key=f"raw/ev/dt=2026-01-0{d}/part-0.parquet", Body=buf.getvalue()
        )
    uri = f"s3://{bucket}/tables/ev"
    t = lethe.Table.adopt(
        uri, f"s3://{bucket}/raw/ev/", key="id", partition_types={"dt": pa.date32()}
    )
    assert isinstance(t, lethe.Table)
    t.delete([("customer_id", "in", [3, 4])], request_id="d")
    old = lethe.Table.open(uri).version
    t.erase([("customer_id", "=", 5)], request_id="e")
    with lethe.Table.open(uri).update_schema() as u:
        u.rename_column("payload", "body")
    t = lethe.Table.open(uri)
    more = events(9_010, 50).rename_columns(["id", "event_time", "customer_id", "body"])
    t.append(more.append_column("dt", pa.array([date(2026, 1, 4)] * 50, pa.date32())))
    return lethe.Table.open(uri), old


def test_spark_duckdb_and_polars_read_one_adopted_table_at_two_versions(
    spark: Any, s3: Any, bucket: str
) -> None:
    """Issue 40, Done when: real local Spark, DuckDB (over ``to_arrow_reader``) and Polars
    read a table with deletes, an erase, a rename and an adopted Hive partition column, at an
    old version (time travel) and the current one, each exactly as ``t.scan()`` there."""
    import duckdb
    import polars as pl

    lethe.spark.register(spark)
    t, old = _adopted_hive_table(s3, bucket)
    assert t.version > old
    for v in (old, t.version):
        want = lethe.Table.open(t.uri, version=v).scan()
        assert "dt" in want.column_names and want.num_rows > 0
        assert set(want["customer_id"].to_pylist()).isdisjoint({3, 4})
        sdf = spark.read.format("lethe").option("version", str(v)).load(t.uri)
        _same_rows(sdf.toArrow(), want)
        reader = t.to_arrow_reader(version=v)  # noqa: F841 - DuckDB reads it by name
        got = duckdb.sql("select * from reader").arrow()
        _same_rows(got.read_all() if isinstance(got, pa.RecordBatchReader) else got, want)
        frame = pl.from_arrow(t.to_arrow_reader(version=v))
        assert isinstance(frame, pl.DataFrame)
        _same_rows(frame.to_arrow(), want)
    now = t.scan()
    assert "body" in now.column_names and 5 not in now["customer_id"].to_pylist()
    assert set(now["dt"].to_pylist()) == {date(2026, 1, d) for d in (1, 2, 3, 4)}
    before = lethe.Table.open(t.uri, version=old).scan()
    # the old version reads its own schema and rows, minus the person erased since (issue 39)
    assert "payload" in before.column_names and 5 not in before["customer_id"].to_pylist()
    assert before.num_rows == 3 * 400 - 3 * 4 * 3  # customers 3 and 4 deleted, 5 erased
