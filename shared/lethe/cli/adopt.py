"""Adopting existing data in place from a shell: ``lethe adopt URI SOURCE``."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.cli.common import add_command

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["register"]

#: ``--partition-type dt=date``: the type names a partition column may take (pyarrow's
#: aliases; ``date``, ``int`` and ``timestamp`` stand for date32, int64 and timestamp[us])
TYPES = ("string", "date", "int", "int64", "int32", "bool", "double", "timestamp")
_ALIASES = {"date": "date32", "int": "int64", "timestamp": "timestamp[us]"}


def partition_types(items: list[str] | None) -> dict[str, pa.DataType]:
    """``["dt=date", "hour=int"]`` as column -> type.

    >>> partition_types(["dt=date"])
    {'dt': DataType(date32[day])}
    """
    import pyarrow as pa

    out: dict[str, pa.DataType] = {}
    for item in items or ():
        name, sep, kind = item.partition("=")
        if not sep or not name or kind not in TYPES:
            raise errors.InvalidRequest(
                f"--partition-type {item!r}: want COLUMN=TYPE, TYPE one of {sorted(TYPES)}"
            )
        out[name] = pa.type_for_alias(_ALIASES.get(kind, kind))
    return out


def cmd_adopt(a: argparse.Namespace) -> int:
    from lethe.adopt.core import AdoptOptions
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
        progress=a.progress,
    )
    if a.emr_application:
        return _start_on_emr(a)
    got = Table.adopt_with(a.uri, a.source, opts)
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


def _start_on_emr(a: argparse.Namespace) -> int:
    """``--emr-application``: start ``spark_jobs/adopt.py`` on EMR Serverless (at most once)."""
    import boto3

    from lethe.ingest.emr import AdoptJobOptions, EmrJobSettings, start_adopt_job

    if not (a.emr_role and a.emr_entry_point) or a.dry_run or a.rewrite_unready:
        raise errors.InvalidRequest(
            "--emr-application needs --emr-role and --emr-entry-point (the stack outputs "
            "EmrApplicationId, EmrJobRoleArn and s3://<artifacts>/spark_jobs/adopt.py), and "
            "runs no --dry-run or --rewrite-unready (run those here)"
        )
    settings = EmrJobSettings(
        application_id=a.emr_application,
        execution_role_arn=a.emr_role,
        entry_point=a.emr_entry_point,
        archive=a.emr_archive,
    )
    run = start_adopt_job(
        boto3.client("emr-serverless"),
        settings,
        table_uri=a.uri,
        source=a.source,
        key=a.key,
        take_ownership=not a.no_ownership,
        options=AdoptJobOptions(
            indexes=tuple(a.index or ()),
            partition_types=tuple(a.partition_type or ()),
            batch_files=a.batch_files,
        ),
    )
    doc = {"job_run_id": run.job_run_id, "name": run.name, "duplicate": run.duplicate}
    if a.json:
        print(json.dumps(doc, sort_keys=True))
    else:
        state = "already started" if run.duplicate else "started"
        print(f"adoption job {run.name} {state}: job run {run.job_run_id}")
    return 0


def register(sub: Any) -> None:
    """Add ``lethe adopt`` to the ``lethe`` parser."""
    what = (
        "adopt existing Parquet files in place (no copy): a Hive-partitioned prefix, "
        "an Iceberg metadata.json, a Delta table or glue://db/table"
    )
    c = add_command(sub, "adopt", what, fn=cmd_adopt)
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
    c.add_argument(
        "--dry-run",
        action="store_true",
        help="check the whole plan (key, indexes, types, ownership) and print it; write nothing",
    )
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
    c.add_argument(
        "--emr-application",
        metavar="APP_ID",
        help="run spark_jobs/adopt.py on this EMR Serverless application instead (lake "
        "scale: footers read by Spark executors); started at most once",
    )
    c.add_argument("--emr-role", metavar="ARN", help="the job role (stack output EmrJobRoleArn)")
    c.add_argument("--emr-entry-point", metavar="URI", help="s3://<artifacts>/spark_jobs/adopt.py")
    c.add_argument("--emr-archive", metavar="URI", help="the job archive (output JobArchiveUri)")
