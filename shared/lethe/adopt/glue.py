"""The Glue source reader: a Glue Data Catalog table over Parquet as a :class:`SourceListing`.

:func:`list_glue` reads the table (its location, columns and partition keys, Hive types via
:mod:`lethe.adopt.hive_types`) and all its partitions (``GetPartitions``, paginated), each with
its own location, which need not follow ``key=value`` naming: the values come from the
catalog, typed by the partition keys' types (``__HIVE_DEFAULT_PARTITION__`` is null). The
Parquet objects under each location are listed with their ETags; Hadoop/Spark markers
(``_SUCCESS``, ``*.crc``, ``_temporary/``, any ``_``/``.``-prefixed name, zero-byte objects)
are skipped, and an object whose extension names another format is refused.

A Glue table of ``table_type=ICEBERG`` delegates to :func:`lethe.adopt.iceberg.list_iceberg`
on its ``metadata_location``, and one of ``table_type=DELTA`` (or Spark's
``spark.sql.sources.provider=delta``) to :func:`lethe.adopt.delta.list_delta` on its location.
A table whose input format or SerDe is not Parquet is refused.

>>> is_data_key("raw/t/dt=1/part-0.parquet", 10), is_data_key("raw/t/_SUCCESS", 0)
(True, False)
>>> is_data_key("raw/t/_temporary/0/part-0.parquet", 10), is_data_key("raw/t/.part-0.crc", 8)
(False, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from lethe import errors
from lethe.adopt.delta import list_delta
from lethe.adopt.delta_format import partition_value
from lethe.adopt.hive_types import hive_type
from lethe.adopt.iceberg import list_iceberg
from lethe.adopt.objects import SourceObjects, s3_uri
from lethe.adopt.source import SourceFile, SourceListing
from lethe.catalog.values import JsonScalar
from lethe.storage.store import S3Store
from lethe.storage.wire import translate_error

__all__ = ["HIVE_NULL", "is_data_key", "list_glue"]

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_OTHER_FORMATS = (".csv", ".json", ".jsonl", ".orc", ".avro", ".txt", ".gz", ".tsv")
_T = TypeVar("_T")


def is_data_key(key: str, size: int) -> bool:
    """Whether an object (``key`` relative to the location listed) is a data file rather than
    a marker, checksum or temporary: Hive and Spark skip every ``_``/``.``-prefixed name."""
    if size == 0:
        return False
    return not any(part.startswith(("_", ".")) for part in key.split("/"))


def _glue(what: str, fn: Callable[[], _T]) -> _T:
    try:
        return fn()
    except Exception as e:
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        if code == "EntityNotFoundException":
            raise errors.NotFound(f"{what}: not found in the Glue Data Catalog") from e
        raise translate_error(e, what) from e


def _check_parquet(name: str, sd: Mapping[str, Any], params: Mapping[str, str]) -> None:
    declared = [
        v
        for v in (
            sd.get("InputFormat"),
            (sd.get("SerdeInfo") or {}).get("SerializationLibrary"),
            params.get("classification"),
        )
        if v
    ]
    if not declared:
        raise errors.UnsupportedSource(
            f"Glue table {name} declares no input format, SerDe or classification"
        )
    other = [v for v in declared if "parquet" not in v.lower()]
    if other:
        raise errors.UnsupportedSource(
            f"Glue table {name} is not Parquet ({other[0]}); only Parquet is adopted"
        )


def _columns(name: str, cols: Sequence[Mapping[str, Any]]) -> list[pa.Field]:
    out = []
    for c in cols:
        try:
            out.append(pa.field(c["Name"], hive_type(c["Type"])))
        except errors.UnsupportedSource as e:
            raise errors.UnsupportedSource(f"Glue table {name}, column {c['Name']!r}: {e}") from e
    return out


def _partitions(glue: Any, database: str, table: str) -> Iterator[Mapping[str, Any]]:
    what = f"GetPartitions {database}.{table}"
    pages = _glue(
        what,
        lambda: iter(
            glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=table)
        ),
    )
    while True:
        page = _glue(what, lambda: next(pages, None))
        if page is None:
            return
        yield from page.get("Partitions", [])


def _files(
    objects: SourceObjects, location: str, partition: Mapping[str, JsonScalar]
) -> list[SourceFile]:
    prefix = s3_uri(location, what="Glue location").rstrip("/") + "/"
    bucket, base = prefix.removeprefix("s3://").split("/", 1)
    out = []
    for o in objects.list(prefix):
        if not is_data_key(o.key[len(base) :], o.size):
            continue
        if o.key.lower().endswith(_OTHER_FORMATS):
            raise errors.UnsupportedSource(
                f"s3://{bucket}/{o.key} is not a Parquet file (by its name)"
            )
        out.append(SourceFile(f"s3://{bucket}/{o.key}", o.size, o.etag, dict(partition)))
    return out


def _located(
    name: str, keys: Sequence[pa.Field], p: Mapping[str, Any], sd: Mapping[str, Any]
) -> tuple[str, dict[str, JsonScalar]]:
    """A partition's location and typed values."""
    psd = p.get("StorageDescriptor") or {}
    values = p.get("Values") or []
    if len(values) != len(keys):
        raise errors.UnsupportedSource(
            f"Glue table {name}: partition {values} has {len(values)} values for {len(keys)} keys"
        )
    if psd.get("InputFormat") or (psd.get("SerdeInfo") or {}).get("SerializationLibrary"):
        _check_parquet(f"{name} partition {values}", psd, {})
    part: dict[str, JsonScalar] = {}
    for k, raw in zip(keys, values, strict=True):
        try:
            part[k.name] = partition_value(None if raw == HIVE_NULL else raw, k.type)
        except errors.UnsupportedSource as e:
            raise errors.UnsupportedSource(f"Glue table {name}, partition {k.name}: {e}") from e
    return str(psd.get("Location") or sd["Location"]), part


def list_glue(
    store: S3Store, glue_client: Any, database: str, table: str, *, history: bool = False
) -> SourceListing:
    """The Parquet files of Glue table ``database.table`` (all partitions), in place.

    Args:
        store: gives the S3 client and counters.
        glue_client: a boto3 Glue client.
        database: the Glue database.
        table: the table's name.

    Raises:
        NotFound: no such table.
        UnsupportedSource: not Parquet, a type Lethe does not read, a partition value that is
            not of its key's type.
    """
    name = f"{database}.{table}"
    t = _glue(f"GetTable {name}", lambda: glue_client.get_table(DatabaseName=database, Name=table))[
        "Table"
    ]
    params = {k: str(v) for k, v in (t.get("Parameters") or {}).items()}
    sd = t.get("StorageDescriptor") or {}
    kind = params.get("table_type", "").upper()
    if kind == "ICEBERG":
        return list_iceberg(store, params["metadata_location"], history=history)
    if kind == "DELTA" or params.get("spark.sql.sources.provider", "").lower() == "delta":
        return list_delta(store, sd["Location"], history=history)
    _check_parquet(name, sd, params)
    columns = _columns(name, sd.get("Columns") or [])
    keys = _columns(name, t.get("PartitionKeys") or [])
    objects = SourceObjects(store)
    if keys:
        located = [_located(name, keys, p, sd) for p in _partitions(glue_client, database, table)]
    else:
        located = [(sd["Location"], {})]
    found = objects.map(lambda lp: _files(objects, lp[0], lp[1]), located)
    files = [f for part in found for f in part]
    return SourceListing(
        "glue",
        f"glue://{database}/{table}",
        tuple(sorted(files, key=lambda f: f.uri)),
        schema=pa.schema(columns + keys),
        partition_schema=pa.schema(keys) if keys else None,
    )
