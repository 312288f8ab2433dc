"""Adoption in place of a Hive-partitioned prefix Spark wrote (``partitionBy("dt")``): the
files are adopted with ``dt`` typed as a date, read back, a customer erased and the
originals deleted by GC (issue 28)."""

from __future__ import annotations

import pathlib
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from conftest import SPARK_MARKS

import lethe
from lethe.gc import collect

pytestmark = SPARK_MARKS


def test_adopt_a_prefix_spark_partitioned_by_dt(
    spark: Any, s3: Any, bucket: str, tmp_path: pathlib.Path
) -> None:
    rows = [(i, i % 50, f"payload-{i}", f"2026-01-0{1 + i % 3}") for i in range(300)]
    df = spark.createDataFrame(rows, "id long, customer_id int, payload string, dt string")
    out = tmp_path / "events"
    df.write.option("compression", "none").partitionBy("dt").parquet(str(out))
    for p in sorted(out.rglob("*")):
        if p.is_file():
            key = f"raw/events/{p.relative_to(out).as_posix()}"
            s3.put_object(Bucket=bucket, Key=key, Body=p.read_bytes())
    uri = f"s3://{bucket}/tables/events"
    t = lethe.Table.adopt(
        uri,
        f"s3://{bucket}/raw/events/",
        key="id",
        partition_types={"dt": pa.date32()},
    )
    assert isinstance(t, lethe.Table)
    assert all(f.path.startswith(f"s3://{bucket}/raw/events/dt=") for f in t.manifest.files)
    got = t.scan()
    assert got.num_rows == 300
    assert set(got["dt"].to_pylist()) == {date(2026, 1, d) for d in (1, 2, 3)}
    n42 = pc.sum(pc.equal(got["customer_id"], 42)).as_py()
    assert t.erase([("customer_id", "=", 42)]).rows_deleted == n42 > 0
    collect(t, now=datetime.now(UTC) + timedelta(days=30))
    left = s3.list_objects_v2(Bucket=bucket, Prefix="raw/events/").get("Contents", [])
    assert all(not o["Key"].endswith(".parquet") for o in left)  # _SUCCESS stays, data gone
    again = lethe.Table.open(uri).scan()
    assert again.num_rows == 300 - n42
    assert pc.sum(pc.equal(again["customer_id"], 42)).as_py() == 0


def test_spark_job_reads_footers_in_tasks_and_commits_per_batch(
    spark: Any, s3: Any, bucket: str
) -> None:
    import io

    import pyarrow.parquet as pq

    from lethe.adopt.core import AdoptOptions
    from spark_jobs.adopt import run_adopt

    for i in range(5):
        t = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())})
        buf = io.BytesIO()
        pq.write_table(t, buf)
        s3.put_object(
            Bucket=bucket, Key=f"raw/s/dt=2026-01-0{i + 1}/p.parquet", Body=buf.getvalue()
        )
    uri = f"s3://{bucket}/tables/s"
    opts = AdoptOptions(key="id", partition_types={"dt": pa.date32()}, batch_files=2)
    t = run_adopt(uri, f"s3://{bucket}/raw/s/", opts, tasks=2, spark=spark)
    assert isinstance(t, lethe.Table)
    assert [h.operation for h in t.history()][:3] == ["adopt"] * 3  # 5 files, 2 per commit
    got = t.scan()
    assert sorted(got["id"].to_pylist()) == list(range(50))
    assert len(set(got["dt"].to_pylist())) == 5
    again = run_adopt(uri, f"s3://{bucket}/raw/s/", opts, tasks=2, spark=spark)
    assert again.version == t.version  # idempotent
