"""The Glue source reader (issue 28): Glue databases, tables and partitions created through
boto3 against moto's Glue, over Parquet files **pyarrow** wrote to moto's S3 (partition
locations in ``key=value`` naming and not, markers Spark and Hadoop leave beside data)."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lethe import errors
from lethe.adopt.glue import list_glue
from lethe.adopt.iceberg import list_iceberg
from lethe.iceberg.glue import register
from lethe.storage.store import S3Store
from lethe.table import Table
from tests.conftest import events
from tests.engines import GLUE_PARQUET_SD, glue_database, glue_parquet_table

COLUMNS = [
    {"Name": "id", "Type": "bigint"},
    {"Name": "amount", "Type": "decimal(10,2)"},
    {"Name": "tags", "Type": "array<string>"},
]
KEYS = [{"Name": "dt", "Type": "date"}, {"Name": "country", "Type": "string"}]


def _put(s3: Any, bucket: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=body)


def _parquet(start: int, n: int) -> bytes:
    from decimal import Decimal

    t = pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "amount": pa.array(
                [Decimal(i) / 4 for i in range(start, start + n)], pa.decimal128(10, 2)
            ),
            "tags": pa.array([[f"t{i}"] for i in range(start, start + n)]),
        }
    )
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


@pytest.fixture
def glue(aws: Any) -> Any:
    return aws.client("glue")


def test_partitioned_table_with_own_locations(s3: Any, bucket: str, glue: Any) -> None:
    db = glue_database(glue)
    root = f"s3://{bucket}/raw/events"
    glue_parquet_table(glue, db, COLUMNS, root, KEYS)
    parts = {
        ("2026-01-01", "de"): "raw/events/dt=2026-01-01/country=de",  # Hive naming
        ("2026-01-02", "fr"): "raw/events/2026/01/02/fr",  # a location of its own
        ("2026-01-02", "__HIVE_DEFAULT_PARTITION__"): "raw/events/2026/01/02/unknown",
    }
    rows = 0
    for i, (values, prefix) in enumerate(parts.items()):
        _put(s3, bucket, f"{prefix}/part-00000.snappy.parquet", _parquet(i * 100, 100))
        _put(s3, bucket, f"{prefix}/part-00001.snappy.parquet", _parquet(i * 100 + 50_000, 7))
        rows += 107
        _put(s3, bucket, f"{prefix}/_SUCCESS", b"")
        _put(s3, bucket, f"{prefix}/.part-00000.snappy.parquet.crc", b"crc!")
        _put(s3, bucket, f"{prefix}/_temporary/0/part-00009.parquet", b"half")
        glue.create_partition(
            DatabaseName=db,
            TableName="events",
            PartitionInput={
                "Values": list(values),
                "StorageDescriptor": {**GLUE_PARQUET_SD, "Location": f"s3://{bucket}/{prefix}/"},
            },
        )
    _put(
        s3, bucket, "raw/events/2026/01/03/orphan.parquet", _parquet(0, 1)
    )  # no partition names it
    store = S3Store(bucket, client=s3)
    listing = list_glue(store, glue, db, "events")
    assert listing.format == "glue" and listing.source == f"glue://{db}/events"
    assert listing.schema is not None and listing.schema.names == [
        "id",
        "amount",
        "tags",
        "dt",
        "country",
    ]
    assert listing.schema.field("amount").type == pa.decimal128(10, 2)
    assert listing.partition_schema == pa.schema([("dt", pa.date32()), ("country", pa.string())])
    assert len(listing.files) == 6
    assert all(
        f.uri.endswith(".snappy.parquet") and f.etag and f.etag.startswith('"')
        for f in listing.files
    )
    by_prefix = {f.uri.rsplit("/", 1)[0]: dict(f.partition) for f in listing.files}
    assert by_prefix == {
        f"s3://{bucket}/raw/events/dt=2026-01-01/country=de": {"dt": 20454, "country": "de"},
        f"s3://{bucket}/raw/events/2026/01/02/fr": {"dt": 20455, "country": "fr"},
        f"s3://{bucket}/raw/events/2026/01/02/unknown": {"dt": 20455, "country": None},
    }
    total = 0
    for f in listing.files:
        body = s3.get_object(Bucket=bucket, Key=f.key)["Body"].read()
        assert len(body) == f.size
        total += pq.read_metadata(io.BytesIO(body)).num_rows
    assert total == rows
    assert listing.bytes == sum(f.size for f in listing.files)


def test_unpartitioned_and_refusals(s3: Any, bucket: str, glue: Any) -> None:
    db = glue_database(glue)
    _put(s3, bucket, "raw/flat/a.parquet", _parquet(0, 10))
    _put(s3, bucket, "raw/flat/b.parquet", _parquet(10, 10))
    _put(s3, bucket, "raw/flat/_SUCCESS", b"")
    glue.create_table(
        DatabaseName=db,
        TableInput={
            "Name": "flat",
            "StorageDescriptor": {
                **GLUE_PARQUET_SD,
                "Columns": COLUMNS,
                "Location": f"s3://{bucket}/raw/flat/",
            },
        },
    )
    listing = list_glue(S3Store(bucket, client=s3), glue, db, "flat")
    assert [f.uri for f in listing.files] == [
        f"s3://{bucket}/raw/flat/a.parquet",
        f"s3://{bucket}/raw/flat/b.parquet",
    ]
    assert listing.partition_schema is None and all(not f.partition for f in listing.files)

    glue.create_table(
        DatabaseName=db,
        TableInput={
            "Name": "csv",
            "StorageDescriptor": {
                "Columns": COLUMNS,
                "Location": f"s3://{bucket}/raw/csv/",
                "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
                "SerdeInfo": {
                    "SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
                },
            },
        },
    )
    with pytest.raises(
        errors.UnsupportedSource,
        match=r"csv is not Parquet \(org.apache.hadoop.mapred.TextInputFormat",
    ):
        list_glue(S3Store(bucket, client=s3), glue, db, "csv")
    glue.create_table(
        DatabaseName=db,
        TableInput={
            "Name": "odd",
            "StorageDescriptor": {
                **GLUE_PARQUET_SD,
                "Columns": [{"Name": "u", "Type": "uniontype<int,string>"}],
                "Location": f"s3://{bucket}/raw/flat/",
            },
        },
    )
    with pytest.raises(errors.UnsupportedSource, match="column 'u'"):
        list_glue(S3Store(bucket, client=s3), glue, db, "odd")
    with pytest.raises(errors.NotFound, match="not found in the Glue Data Catalog"):
        list_glue(S3Store(bucket, client=s3), glue, db, "missing")


def test_iceberg_table_in_glue_delegates(s3: Any, bucket: str, glue: Any, table_uri: str) -> None:
    t = Table.create(table_uri, events(0, 1).schema, key="id")
    t.append(events(0, 500))
    t.delete([("id", "<", 10)])
    uri = t.publish_iceberg()
    db = glue_database(glue)
    register(glue, database=db, table="ev", metadata_uri=uri)
    store = S3Store(bucket, client=s3)
    via_glue = list_glue(store, glue, db, "ev")
    assert via_glue == list_iceberg(store, uri)
    assert via_glue.format == "iceberg" and via_glue.deleted_rows == 10
