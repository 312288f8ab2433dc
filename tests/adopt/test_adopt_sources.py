"""The adoption core over the other source readers (issue 28): an Iceberg table PyIceberg
wrote (with the deletes it made) and a partitioned Delta table delta-rs wrote become Lethe
tables in place through ``Table.adopt`` (format detected), read back with their partition
columns, erasable, and their Iceberg view readable by PyIceberg."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

import lethe
from lethe.iceberg import publish
from tests.engines import (
    GLUE_PARQUET_SD,
    delta_options,
    glue_catalog,
    glue_database,
    glue_parquet_table,
    iceberg_view,
)


def _data(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "customer_id": pa.array((ids % 17).astype(np.int32)),
            "dt": pa.array([dt.date(2026, 1, 1 + int(i) % 3) for i in ids]),
        }
    )


def test_adopt_an_iceberg_table_in_place(aws: Any, s3: Any, bucket: str) -> None:
    cat = glue_catalog(aws, bucket)
    ice = cat.create_table(f"db.t{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    with ice.update_spec() as u:
        u.add_identity("dt")
    ice.append(_data(0, 300))
    ice.delete("id < 10")
    want = ice.scan().to_arrow()
    uri = f"s3://{bucket}/tables/from-iceberg"
    t = lethe.Table.adopt(uri, ice.metadata_location, key="id", indexes=("customer_id",))
    assert isinstance(t, lethe.Table)
    assert t.history()[0].operation == "adopt"
    paths = {f.path for f in t.manifest.files}
    assert paths == {task.file.file_path for task in ice.scan().plan_files()}
    got = t.scan().sort_by("id")
    assert got["id"].to_pylist() == want.sort_by("id")["id"].to_pylist()
    assert got["dt"].to_pylist() == want.sort_by("id")["dt"].to_pylist()
    n = pc.sum(pc.equal(got["customer_id"], 5)).as_py()
    assert t.erase([("customer_id", "=", 5)]).rows_deleted == n > 0
    assert t.scan().num_rows == got.num_rows - n


def test_adopt_a_partitioned_delta_table_and_read_its_view(aws: Any, s3: Any, bucket: str) -> None:
    so = delta_options(aws)
    src = f"s3://{bucket}/delta/events"
    write_deltalake(src, _data(0, 120), partition_by=["dt"], storage_options=so)
    DeltaTable(src, storage_options=so).delete("id < 6")
    uri = f"s3://{bucket}/tables/from-delta"
    t = lethe.Table.adopt(uri, src + "/", key="id")
    assert isinstance(t, lethe.Table)
    assert all(f.path.startswith(f"s3://{bucket}/delta/events/") for f in t.manifest.files)
    assert all(set(f.partition) == {"dt"} for f in t.manifest.files)
    got = t.scan().sort_by("id")
    assert got["id"].to_pylist() == list(range(6, 120))
    assert got["dt"].to_pylist() == [dt.date(2026, 1, 1 + i % 3) for i in range(6, 120)]
    assert t.scan(filters=[("dt", "=", dt.date(2026, 1, 2))]).num_rows == 38
    r = publish(t.catalog, t.manifest, format_version=3)
    view = iceberg_view(aws, r.uri).scan().to_arrow()
    assert sorted(zip(view["id"].to_pylist(), view["dt"].to_pylist(), strict=True)) == sorted(
        zip(got["id"].to_pylist(), got["dt"].to_pylist(), strict=True)
    )


@pytest.mark.parametrize("fmt", ["delta"])
def test_source_format_may_be_given(aws: Any, s3: Any, bucket: str, fmt: str) -> None:
    so = delta_options(aws)
    src = f"s3://{bucket}/d2"
    write_deltalake(src, _data(0, 10), storage_options=so)
    plan = lethe.Table.adopt(
        f"s3://{bucket}/tables/d2", src, key="id", source_format=fmt, dry_run=True
    )
    assert isinstance(plan, lethe.AdoptPlan) and plan.format == "delta" and plan.rows == 10


def test_adopt_a_glue_table_with_typed_partitions(aws: Any, s3: Any, bucket: str) -> None:
    import io

    import pyarrow.parquet as pq

    glue = aws.client("glue")
    db = glue_database(glue)
    cols = [{"Name": "id", "Type": "bigint"}, {"Name": "customer_id", "Type": "int"}]
    glue_parquet_table(glue, db, cols, f"s3://{bucket}/raw/g", [{"Name": "dt", "Type": "date"}])
    for i, day in enumerate(("2026-01-01", "2026-01-02")):
        buf = io.BytesIO()
        pq.write_table(_data(i * 100, 100).drop_columns(["dt"]), buf)
        key = f"raw/g/dt={day}/part-0.parquet"
        s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
        glue.create_partition(
            DatabaseName=db,
            TableName="events",
            PartitionInput={
                "Values": [day],
                "StorageDescriptor": {
                    **GLUE_PARQUET_SD,
                    "Location": f"s3://{bucket}/raw/g/dt={day}/",
                },
            },
        )
    t = lethe.Table.adopt(f"s3://{bucket}/tables/g", f"glue://{db}/events", key="id", glue=glue)
    assert isinstance(t, lethe.Table)
    assert t.schema.field("dt").type == pa.date32()
    got = t.scan(filters=[("dt", "=", dt.date(2026, 1, 2))])
    assert sorted(got["id"].to_pylist()) == list(range(100, 200))
