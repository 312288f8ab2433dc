"""Adopting existing data in place from a shell: ``lethe adopt URI SOURCE``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pyarrow as pa

from lethe import errors

__all__ = ["register"]

#: ``--partition-type dt=date``: the type names a partition column may take
TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "date": pa.date32(),
    "int": pa.int64(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "bool": pa.bool_(),
    "double": pa.float64(),
    "timestamp": pa.timestamp("us"),
}


def partition_types(items: list[str] | None) -> dict[str, pa.DataType]:
    """``["dt=date", "hour=int"]`` as column -> type.

    >>> partition_types(["dt=date"])
    {'dt': DataType(date32[day])}
    """
    out: dict[str, pa.DataType] = {}
    for item in items or ():
        name, sep, kind = item.partition("=")
        if not sep or not name or kind not in TYPES:
            raise errors.InvalidRequest(
                f"--partition-type {item!r}: want COLUMN=TYPE, TYPE one of {sorted(TYPES)}"
            )
        out[name] = TYPES[kind]
    return out


def cmd_adopt(a: argparse.Namespace) -> int:
    from lethe.adopt.core import AdoptOptions, adopt
    from lethe.adopt.plan import AdoptPlan
    from lethe.adopt.rewrite import rewrite_unready
    from lethe.table import Table

    opts = AdoptOptions(
        partitioning=None if a.partitioning == "none" else "hive",
        partition_types=partition_types(a.partition_type),
        key=a.key,
        take_ownership=not a.no_ownership,
        indexes=tuple(a.index or ()),
        dry_run=a.dry_run,
        source_format=a.format,
        batch_files=a.batch_files,
    )
    got = adopt(Table, a.uri, a.source, opts)
    if isinstance(got, AdoptPlan):
        print(got.to_json() if a.json else got.describe())
        return 0
    t = got
    io = t.store.stats.snapshot()
    adopted = [h for h in t.history() if h.operation == "adopt"]
    doc: dict[str, Any] = {
        "table": t.uri,
        "version": t.version,
        "files": sum(f.owned is not None for f in t.manifest.files),
        "rows": t.manifest.total_rows,
        "adopt_commits": len(adopted),
        "bytes_downloaded": io.bytes_downloaded,
        "data_bytes_written": io.bytes_copied,
        "requests": io.total_requests,
    }
    if a.rewrite_unready:
        r = rewrite_unready(t)
        doc["rewritten"] = r.files
        doc["rewrite_version"] = r.version
    if a.json:
        print(json.dumps(doc, sort_keys=True))
    else:
        print(
            f"adopted in place into {doc['table']} (version {doc['version']}): {doc['files']} "
            f"files, {doc['rows']:,} rows; {doc['bytes_downloaded']:,} bytes read, "
            f"{doc['data_bytes_written']:,} data bytes copied"
            + (f"; rewrote {doc['rewritten']} unready files" if a.rewrite_unready else "")
        )
    return 0


def register(sub: Any) -> None:
    """Add ``lethe adopt`` to the ``lethe`` parser."""
    c = sub.add_parser(
        "adopt",
        help="adopt existing Parquet files in place (no copy): a Hive-partitioned prefix, "
        "an Iceberg metadata.json, a Delta table or glue://db/table",
    )
    c.add_argument("uri", help="the table (created when missing: --key required)")
    c.add_argument("source", help="s3://bucket/prefix/, .../vN.metadata.json or glue://db/table")
    c.add_argument("--partitioning", choices=("hive", "none"), default="hive")
    c.add_argument("--key", help="the erasure key column (required to create the table)")
    c.add_argument("--index", action="append", metavar="COLUMN", help="index this column")
    c.add_argument(
        "--partition-type",
        action="append",
        metavar="COLUMN=TYPE",
        help=f"type a Hive partition column (default string): TYPE one of {', '.join(TYPES)}",
    )
    c.add_argument(
        "--no-ownership",
        action="store_true",
        help="read-only adoption: erase refuses (Lethe never rewrites or deletes the files)",
    )
    c.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.add_argument(
        "--rewrite-unready",
        action="store_true",
        help="rewrite the files the readiness report marks with Lethe's writer (one commit)",
    )
    c.add_argument(
        "--format",
        choices=("auto", "parquet", "iceberg", "delta", "glue"),
        default="auto",
        help="the source's format (default: detected)",
    )
    c.add_argument("--batch-files", type=int, default=1000, help="files per commit")
    c.set_defaults(fn=cmd_adopt)
