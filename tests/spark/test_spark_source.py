"""``spark.read.format("lethe")`` and ``df.write.format("lethe")`` (issue 40): real local
Spark reads a table with deletes, an erase and a rename at two versions, and appends with a
retried request id landing once."""

from __future__ import annotations

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
