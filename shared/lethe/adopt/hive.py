"""The Parquet-prefix source: every Parquet object under an ``s3://`` prefix, with Hive-style
``key=value/`` directories read as partition columns.

Values are strings unless typed (``partition_types``: ``{"dt": pa.date32()}``); the null
directory ``__HIVE_DEFAULT_PARTITION__`` is a null value; URL-escaped values
(``city=S%C3%A3o%20Paulo``) are decoded.

>>> hive_values("raw/events/", "raw/events/dt=2026-01-01/city=S%C3%A3o/part-0.parquet")
{'dt': '2026-01-01', 'city': 'São'}
>>> hive_values("raw/", "raw/dt=__HIVE_DEFAULT_PARTITION__/a.parquet")
{'dt': None}
>>> typed_value("2026-01-01", pa.date32(), "dt", "x")
20454
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Literal
from urllib.parse import unquote

import pyarrow as pa

from lethe import errors
from lethe.adopt.source import SourceFile, SourceListing
from lethe.catalog.values import JsonScalar, to_json
from lethe.storage.store import S3Store, parse_s3_uri

__all__ = ["HIVE_NULL", "hive_values", "is_data_object", "list_parquet", "typed_value"]

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_SUFFIXES = (".parquet", ".parq", ".pq")


def is_data_object(rel: str) -> bool:
    """Whether a key under the prefix is a data file: ``*.parquet`` (or an extensionless part
    file), not a marker or a hidden/underscore file or directory (``_SUCCESS``,
    ``_delta_log/``, ``.crc``)."""
    parts = rel.split("/")
    if any(p.startswith(("_", ".")) for p in parts if p):
        return False
    name = parts[-1]
    return name.endswith(_SUFFIXES) or ("." not in name and name.startswith("part-"))


def hive_values(prefix: str, key: str) -> dict[str, str | None]:
    """The ``key=value`` directories of ``key`` below ``prefix``, in path order."""
    rel = key[len(prefix) :].lstrip("/") if prefix else key
    out: dict[str, str | None] = {}
    for seg in posixpath.dirname(rel).split("/"):
        if "=" not in seg:
            continue
        k, v = seg.split("=", 1)
        out[unquote(k)] = None if v == HIVE_NULL else unquote(v)
    return out


def typed_value(raw: str | None, t: pa.DataType, column: str, where: str) -> JsonScalar:
    """A directory's string value as the canonical JSON value of type ``t``.

    Raises:
        InvalidRequest: the string is not a value of ``t`` (naming the column and file).
    """
    if raw is None:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return raw
    try:
        return to_json(pa.array([raw], pa.string()).cast(t)[0])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.InvalidRequest(
            f"partition column {column!r} of {where}: its directory value is not a {t}"
        ) from e


def list_parquet(
    store: S3Store,
    uri: str,
    *,
    partitioning: Literal["hive"] | None = "hive",
    partition_types: Mapping[str, pa.DataType] | None = None,
    column_types: Mapping[str, pa.DataType] | None = None,
) -> SourceListing:
    """Every data object under ``uri`` (one LIST request per 1,000 keys, no GET), partition
    values typed by ``partition_types`` (each must name a partition column) or else by
    ``column_types`` (a table schema's types: only its partition columns are used).

    Raises:
        InvalidRequest: nothing to adopt, or files disagree on the partition columns.
    """
    bucket, prefix = parse_s3_uri(uri)
    src = (
        store if bucket == store.bucket else S3Store(bucket, client=store.client, stats=store.stats)
    )
    base = f"{prefix}/" if prefix else ""
    objs = sorted(
        (o for o in src.list(base) if is_data_object(o.key[len(base) :])), key=lambda o: o.key
    )
    if not objs:
        raise errors.InvalidRequest(f"no Parquet objects under {uri}")
    types = dict(column_types or {}) | dict(partition_types or {})
    names: tuple[str, ...] | None = None
    files: list[SourceFile] = []
    for o in objs:
        where = f"s3://{bucket}/{o.key}"
        raw = hive_values(base, o.key) if partitioning == "hive" else {}
        if names is None:
            names = tuple(raw)
        elif tuple(raw) != names:
            raise errors.InvalidRequest(
                f"{where} has partition directories {list(raw)}, other files {list(names)}: "
                "every file of a Hive layout needs the same key=value levels"
            )
        part = {k: typed_value(v, types.get(k, pa.string()), k, where) for k, v in raw.items()}
        files.append(SourceFile(where, o.size, o.etag, part))
    unknown = sorted(set(partition_types or {}) - set(names or ()))
    if unknown:
        raise errors.InvalidRequest(
            f"partition types given for unknown partition columns {unknown}"
        )
    pschema = (
        pa.schema([pa.field(n, types.get(n, pa.string()), nullable=True) for n in names])
        if names
        else None
    )
    return SourceListing("parquet", uri, tuple(files), partition_schema=pschema)
