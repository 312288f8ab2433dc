"""How other engines' clients reach moto's server in tests: PyIceberg (its S3 file IO and its
Glue catalog) and delta-rs (its object-store options). One home for their settings, so a test
names only what it does with them. The clients are imported when called: a test module that
never uses them does not pay for the import."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

REGION = "us-east-1"


def iceberg_props(aws: Any, *, glue: bool = False) -> dict[str, str]:
    """PyIceberg's properties for moto's S3 (and, with ``glue``, its Glue catalog)."""
    props = {
        "s3.endpoint": aws.endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": REGION,
    }
    if glue:
        props |= {
            "glue.endpoint": aws.endpoint,
            "glue.region": REGION,
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
        }
    return props


def iceberg_view(aws: Any, metadata_uri: str) -> Any:
    """PyIceberg's ``StaticTable`` of the Iceberg metadata at ``metadata_uri``."""
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata_uri, properties=iceberg_props(aws))


def glue_catalog(aws: Any, bucket: str) -> Any:
    """PyIceberg's ``GlueCatalog`` on moto, warehouse in ``bucket``, namespace ``db`` made."""
    from pyiceberg.catalog.glue import GlueCatalog

    cat = GlueCatalog("c", warehouse=f"s3://{bucket}/warehouse", **iceberg_props(aws, glue=True))
    cat.create_namespace_if_not_exists("db")
    return cat


@pytest.fixture
def catalog(aws: Any, bucket: str) -> Any:
    """:func:`glue_catalog` as a fixture (a test module binds it: ``catalog = engines.catalog``)."""
    return glue_catalog(aws, bucket)


def dated_rows(start: int, n: int, **more: Callable[[np.ndarray], Any]) -> pa.Table:
    """Rows ``id`` ``start..start+n`` and ``dt`` (one of three days by id), then a column per
    ``more`` computed from the ids."""
    ids = np.arange(start, start + n, dtype=np.int64)
    days = [dt.date(2026, 1, 1 + int(i) % 3) for i in ids]
    columns = {"id": pa.array(ids), "dt": pa.array(days)}
    return pa.table({**columns, **{name: pa.array(f(ids)) for name, f in more.items()}})


def delta_options(aws: Any) -> dict[str, str]:
    """delta-rs' ``storage_options`` for moto's S3 (plain HTTP, no locking provider)."""
    return {
        "AWS_ENDPOINT_URL": aws.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


# A Glue table's storage descriptor for Parquet files (what Athena and Spark write).
GLUE_PARQUET_SD = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {
        "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    },
}


def glue_database(glue: Any) -> str:
    """A new Glue database (a fresh name) through the boto3 ``glue`` client."""
    name = f"db_{uuid.uuid4().hex[:8]}"
    glue.create_database(DatabaseInput={"Name": name})
    return name


def glue_parquet_table(
    glue: Any, db: str, columns: list[dict[str, str]], location: str, keys: list[dict[str, str]]
) -> None:
    """An external Parquet table ``events`` in Glue database ``db``, partitioned by ``keys``."""
    glue.create_table(
        DatabaseName=db,
        TableInput={
            "Name": "events",
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"classification": "parquet"},
            "StorageDescriptor": {**GLUE_PARQUET_SD, "Columns": columns, "Location": location},
            "PartitionKeys": keys,
        },
    )
