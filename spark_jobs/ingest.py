"""Spark ingest job: raw uploads (CSV, JSON lines, Parquet) -> sorted Lethe data files, one commit.

    spark-submit spark_jobs/ingest.py --table s3://b/t --input s3://b/incoming/... \\
        [--format csv|json|parquet] [--rejects s3://b/rejects/run-7] [--request-id ID]
    python spark_jobs/ingest.py ...          # the same with a local Spark session

1. The driver lists the input objects with boto3 (one object or a prefix) and checks the
   request id (default: derived from the listed object versions) against the table's request
   log: an ingest that already landed is not repeated.
2. Executors read the objects themselves (``lethe_raw``: one partition per object, ETag-pinned
   ranged GETs, streamed in chunks) and validate each row against the table schema. Good rows
   and rejects travel in one staged DataFrame, persisted (memory and disk) so that S3 is read
   once. No ``s3a://``: Spark never touches S3 itself.
3. Rejects (with their reasons) are written as JSON lines to ``--rejects`` (default
   ``<table>/_staging/rejects/<run>/``); they are counted and reported, never dropped.
4. The good rows are range-partitioned and sorted by key into as many partitions as files of
   about ``target_file_bytes`` (estimated by encoding a sample in the table's layout); each task
   streams its partition through the lethe writer (``lethe_files``), so ingest, Lambdas and
   splices write the same file layout with row groups of about ``row_group_bytes``.
5. The driver commits all files with one CAS commit carrying the request id.

``run_ingest`` is the same job callable in-process with an existing SparkSession.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

try:
    from spark_jobs._session import build_session
except ImportError:  # run as a script from a checkout: python spark_jobs/ingest.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_jobs._session import build_session

import lethe
from lethe.ingest import (
    REJECT_SCHEMA,
    STAGED_PREFIX,
    Format,
    IngestReport,
    estimate_bytes_per_row,
    ingest_request_id,
    list_inputs,
    partitions_for,
    staged_schema,
)
from lethe.manifest import DataFile, request_hash
from lethe.process import run_main

__all__ = ["main", "run_ingest"]

log = logging.getLogger("lethe.spark_jobs.ingest")

SAMPLE_ROWS = 20_000
FILE_CAP = 1.5  # a partition larger than this many targets (a bad estimate) is split


def run_ingest(
    table_uri: str,
    input_uri: str,
    fmt: Format | None = None,
    spark: Any = None,
    *,
    rejects_uri: str | None = None,
    request_id: str | None = None,
    target_file_bytes: int | None = None,
    row_group_bytes: int | None = None,
) -> IngestReport:
    """Ingest the raw objects under ``input_uri`` into the table at ``table_uri``.

    Args:
        table_uri: ``s3://bucket/prefix`` of an existing table.
        input_uri: One object or a prefix of objects.
        fmt: ``csv``, ``json`` or ``parquet``; default from each object's extension.
        spark: A SparkSession (default: the active one, or a new local one).
        rejects_uri: Where rejected rows go (default ``<table>/_staging/rejects/<run>``).
        request_id: Idempotency id (default: derived from the object versions ingested).
        target_file_bytes: File size (default: the table's property).
        row_group_bytes: Row-group size (default: the table's property).

    Returns:
        What was committed, rejected and written.

    Example:
        >>> from spark_jobs.ingest import run_ingest                       # doctest: +SKIP
        >>> print(run_ingest("s3://b/t", "s3://b/incoming/2026-11-22/").describe())  # doctest: +SKIP
        version 3: 1,000,000 rows in 4 files (...) from 4 objects (...); no rejects in 21.0 s
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from spark_jobs._sources import register_data_sources

    t0 = time.perf_counter()
    table = lethe.Table.open(table_uri)
    objects = list_inputs(input_uri, fmt=fmt)
    rid = request_id or ingest_request_id(objects)
    rid_hash = request_hash(rid)
    in_bytes = sum(o.size for o in objects)
    earlier = table.manifest.find_request(rid_hash)
    if earlier is not None or not objects:
        return IngestReport(
            version=earlier.version if earlier else None,
            duplicate=earlier is not None,
            objects=len(objects),
            input_bytes=in_bytes,
            rows_read=0,
            rows_written=0,
            rows_rejected=0,
            files=0,
            bytes_written=0,
            rejects_uri=None,
            rejects_objects=0,
            request_id_hash=rid_hash,
            seconds=time.perf_counter() - t0,
        )
    spark = spark or build_session("lethe-ingest")
    register_data_sources(spark)
    schema = table.schema
    props = table.manifest.properties
    target = target_file_bytes or props.target_file_bytes
    rg_bytes = row_group_bytes or props.row_group_bytes
    run = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    rejects_uri = (rejects_uri or f"{table.uri}/_staging/rejects/{run}").rstrip("/")

    staged = (
        spark.read.format("lethe_raw")
        .schema(from_arrow_schema(staged_schema(schema)))
        .option("objects", json.dumps([o.to_json() for o in objects]))
        .option("schema", table.manifest.schema_b64)
        .load()
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    workdir = tempfile.mkdtemp(prefix="lethe-ingest-")
    try:
        reason = F.col(STAGED_PREFIX + "reason")
        counts = {
            bool(r["ok"]): int(r["count"])
            for r in staged.groupBy(reason.isNull().alias("ok")).count().collect()
        }
        good_rows, bad_rows = counts.get(True, 0), counts.get(False, 0)
        log.info(
            "read %s objects: %s good rows, %s rejects (%.1f s)",
            len(objects),
            good_rows,
            bad_rows,
            time.perf_counter() - t0,
        )

        reject_parts: list[list[Any]] = []
        if bad_rows:
            result = os.path.join(workdir, "rejects.json")
            (
                staged.filter(reason.isNotNull())
                .select(*[F.col(STAGED_PREFIX + n).alias(n) for n in REJECT_SCHEMA.names])
                .coalesce(max(1, min(64, bad_rows // 1_000_000)))
                .write.format("lethe_rejects")
                .mode("append")
                .option("location", rejects_uri)
                .option("result", result)
                .save()
            )
            with open(result, encoding="utf-8") as f:
                reject_parts = json.load(f)

        files: list[DataFile] = []
        written_at: float | None = None
        if good_rows:
            good = staged.filter(reason.isNull()).select(*schema.names)
            # The smallest keys: a contiguous run of rows, as dense as in a real output file
            # (a random sample is sparser in key space and compresses worse).
            sample = (
                good.orderBy(F.col(table.key))
                .limit(SAMPLE_ROWS)
                .toArrow()
                .select(schema.names)
                .cast(schema)
            )
            bpr = estimate_bytes_per_row(sample, table.write_options())
            parts = partitions_for(good_rows, bpr, target)
            log.info("%.1f B/row: %s partitions (%.1f s)", bpr, parts, time.perf_counter() - t0)
            rows_per_group = max(1, int(rg_bytes / bpr))
            batch = max(1_000, min(10_000, rows_per_group // 4))
            result = os.path.join(workdir, "files.json")
            key = table.key
            previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", None)
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
            written_at = time.time()  # before any executor uploads: the GC grace clock
            try:
                (
                    good.repartitionByRange(parts, F.col(key))
                    .sortWithinPartitions(F.col(key))
                    .write.format("lethe_files")
                    .mode("append")
                    .option("table", table.uri)
                    .option("schema", table.manifest.schema_b64)
                    .option("key", key)
                    .option("target_file_bytes", str(int(target * FILE_CAP)))
                    .option("row_group_bytes", str(rg_bytes))
                    .option("result", result)
                    .save()
                )
            finally:
                if previous is None:
                    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
                else:
                    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
            with open(result, encoding="utf-8") as f:
                files = [DataFile.model_validate_json(s) for s in json.load(f)]
            log.info("wrote %s files (%.1f s)", len(files), time.perf_counter() - t0)
    finally:
        staged.unpersist()
        shutil.rmtree(workdir, ignore_errors=True)

    version: int | None = None
    duplicate = False
    if files:
        res = table.commit_files(  # our files: removed if they are not committed
            files,
            kind="append",
            params={
                "source": "spark-ingest",
                "objects": len(objects),
                "input_bytes": in_bytes,
                "rows_rejected": bad_rows,
            },
            request_id=rid,
            written_at=written_at,
            own=True,
        )
        version = res.version
        if res.files_added == 0:  # a twin run committed first (our files are removed)
            duplicate = True
    return IngestReport(
        version=version,
        duplicate=duplicate,
        objects=len(objects),
        input_bytes=in_bytes,
        rows_read=good_rows + bad_rows,
        rows_written=sum(f.rows for f in files) if not duplicate else 0,
        rows_rejected=bad_rows,
        files=len(files) if not duplicate else 0,
        bytes_written=sum(f.size for f in files) if not duplicate else 0,
        rejects_uri=rejects_uri if bad_rows else None,
        rejects_objects=len(reject_parts),
        request_id_hash=rid_hash,
        seconds=time.perf_counter() - t0,
        data_files=tuple(files) if not duplicate else (),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ingest.py", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="s3://bucket/prefix of the table")
    p.add_argument("--input", required=True, help="an object or a prefix of raw uploads")
    p.add_argument("--format", choices=["csv", "json", "parquet"], default=None)
    p.add_argument("--rejects", default=None, help="s3:// prefix for rejected rows")
    p.add_argument("--request-id", default=None, help="idempotency id (default: from inputs)")
    p.add_argument("--target-file-bytes", type=int, default=None)
    p.add_argument("--row-group-bytes", type=int, default=None)
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    from pyspark.sql import SparkSession

    had_session = SparkSession.getActiveSession() is not None
    spark = build_session("lethe-ingest", master=args.master)
    try:
        report = run_ingest(
            args.table,
            args.input,
            args.format,
            spark,
            rejects_uri=args.rejects,
            request_id=args.request_id,
            target_file_bytes=args.target_file_bytes,
            row_group_bytes=args.row_group_bytes,
        )
    finally:
        if not had_session:  # stop only a session started here
            spark.stop()
    if args.json:
        d = asdict(report)
        d.pop("data_files")
        print(json.dumps(d))
    else:
        print(report.describe())
    return 0


if __name__ == "__main__":
    run_main(main)
