"""Spark ingest job: raw uploads (CSV, JSON lines, Parquet) -> sorted Lethe data files, one commit.

    spark-submit spark_jobs/ingest.py --table s3://b/t --input s3://b/incoming/... \\
        [--format csv|json|parquet] [--rejects s3://b/rejects/run-7] [--request-id ID] \\
        [--evolve]
    python spark_jobs/ingest.py ...          # the same with a local Spark session

1. The driver lists the input objects with boto3 (one object or a prefix) and checks the
   request id (default: derived from the listed object versions) against the table's request
   log: an ingest that already landed is not repeated. The Parquet inputs' footers are checked
   against the table schema: a column the table lacks or a type that does not widen into the
   table's refuses the run (``SchemaMismatch`` listing every input and column; nothing is
   dropped or cast down), unless ``--evolve``: then the table takes the new columns and
   widenings first, in one schema commit (:func:`lethe.ingest.shapes.evolve_for_inputs`).
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
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

try:
    from spark_jobs._session import build_session, own_session
except ImportError:  # run as a script from a checkout: python spark_jobs/ingest.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_jobs._session import build_session, own_session

import pyarrow as pa

import lethe
from lethe.catalog.manifest import DataFile, request_hash, schema_to_b64
from lethe.ingest import (
    REJECT_SCHEMA,
    STAGED_PREFIX,
    Format,
    IngestReport,
    InputObject,
    estimate_bytes_per_row,
    ingest_request_id,
    list_inputs,
    partitions_for,
    staged_schema,
)
from lethe.ingest.shapes import evolve_for_inputs
from lethe.maintenance.clustering import ClusterSpec
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
    evolve: bool = False,
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
        evolve: Let Parquet inputs add columns or widen types (else they are refused).

    Raises:
        SchemaMismatch: an input does not fit the table (every input and column listed).

    Returns:
        What was committed, rejected and written.

    Example:
        >>> from spark_jobs.ingest import run_ingest                       # doctest: +SKIP
        >>> print(run_ingest("s3://b/t", "s3://b/incoming/2026-11-22/").describe())  # doctest: +SKIP
        version 3: 1,000,000 rows in 4 files (...) from 4 objects (...); no rejects in 21.0 s
    """
    t0 = time.perf_counter()
    table = lethe.Table.open(table_uri)
    objects = list_inputs(input_uri, fmt=fmt)
    rid = request_id or ingest_request_id(objects)
    if (done := _landed_before(table, objects, rid, t0)) is not None:
        return done
    if evolve_for_inputs(table, objects, evolve_=evolve):  # before Spark reads anything
        table.refresh()  # onto the evolved schema: the files are written under it
    spark = _session(spark)
    props = table.manifest.properties
    run = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    rejects_uri = (rejects_uri or f"{table.uri}/_staging/rejects/{run}").rstrip("/")
    target = target_file_bytes or props.target_file_bytes
    rg_bytes = row_group_bytes or props.row_group_bytes
    out = _read_and_write(
        spark, table, objects, rejects_uri=rejects_uri, target=target, rg_bytes=rg_bytes, t0=t0
    )
    version, duplicate = _commit(
        table, out.files, rid, out.written_at, objects=objects, rows_rejected=out.bad_rows
    )
    rejects = rejects_uri if out.bad_rows else None
    return _report(
        objects, rid, version=version, duplicate=duplicate, t0=t0, out=out, rejects=rejects
    )


def _session(spark: Any) -> Any:
    """``spark`` (default: the active or a new local session) with Lethe's data sources."""
    from spark_jobs._sources import register_data_sources

    spark = spark or build_session("lethe-ingest")
    register_data_sources(spark)
    return spark


def _landed_before(
    table: lethe.Table, objects: Sequence[InputObject], rid: str, t0: float
) -> IngestReport | None:
    """The report of a run with nothing to do: the request landed before, or no inputs."""
    earlier = table.manifest.find_request(request_hash(rid))
    if earlier is None and objects:
        return None
    version = earlier.version if earlier else None
    return _report(objects, rid, version=version, duplicate=earlier is not None, t0=t0)


@dataclass(frozen=True, slots=True)
class _Written:
    """What the executors read and wrote in one run (nothing committed yet)."""

    good_rows: int
    bad_rows: int
    files: list[DataFile]
    written_at: float | None  # before the first data file was uploaded (GC grace clock)
    rejects_objects: int


def _read_and_write(
    spark: Any,
    table: lethe.Table,
    objects: Sequence[InputObject],
    *,
    rejects_uri: str,
    target: int,
    rg_bytes: int,
    t0: float,
) -> _Written:
    """Stage the objects, write the rejects and the good rows' data files (steps 2-4)."""
    staged = _stage(spark, table, objects)
    workdir = tempfile.mkdtemp(prefix="lethe-ingest-")
    files: list[DataFile] = []
    written_at: float | None = None
    reject_parts: list[list[Any]] = []
    try:
        good_rows, bad_rows = _count(staged)
        log.info(
            "read %s objects: %s good rows, %s rejects (%.1f s)",
            len(objects),
            good_rows,
            bad_rows,
            time.perf_counter() - t0,
        )
        if bad_rows:
            reject_parts = _write_rejects(staged, bad_rows, rejects_uri, workdir)
        if good_rows:
            files, written_at = _write_good_rows(
                spark,
                staged,
                table,
                good_rows,
                target=target,
                rg_bytes=rg_bytes,
                workdir=workdir,
                t0=t0,
            )
    finally:
        staged.unpersist()
        shutil.rmtree(workdir, ignore_errors=True)
    return _Written(good_rows, bad_rows, files, written_at, len(reject_parts))


def _stage(spark: Any, table: lethe.Table, objects: Sequence[InputObject]) -> Any:
    """Executors read the objects and validate every row: good rows and rejects in one
    DataFrame, persisted so that S3 is read once."""
    from pyspark import StorageLevel
    from pyspark.sql.pandas.types import from_arrow_schema

    return (
        spark.read.format("lethe_raw")
        .schema(from_arrow_schema(staged_schema(table.schema)))
        .option("objects", json.dumps([o.to_json() for o in objects]))
        .option("schema", table.manifest.schema_b64)
        .load()
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


def _reason() -> Any:
    from pyspark.sql import functions as F

    return F.col(STAGED_PREFIX + "reason")


def _count(staged: Any) -> tuple[int, int]:
    """Good rows and rejects of the staged DataFrame."""
    counts = {
        bool(r["ok"]): int(r["count"])
        for r in staged.groupBy(_reason().isNull().alias("ok")).count().collect()
    }
    return counts.get(True, 0), counts.get(False, 0)


def _write_rejects(staged: Any, bad_rows: int, rejects_uri: str, workdir: str) -> list[list[Any]]:
    """Write the rejects (with their reasons) as JSON lines under ``rejects_uri``; the parts
    written."""
    from pyspark.sql import functions as F

    result = os.path.join(workdir, "rejects.json")
    (
        staged.filter(_reason().isNotNull())
        .select(*[F.col(STAGED_PREFIX + n).alias(n) for n in REJECT_SCHEMA.names])
        .coalesce(max(1, min(64, bad_rows // 1_000_000)))
        .write.format("lethe_rejects")
        .mode("append")
        .option("location", rejects_uri)
        .option("result", result)
        .save()
    )
    with open(result, encoding="utf-8") as f:
        parts: list[list[Any]] = json.load(f)
    return parts


def _order(table: lethe.Table) -> list[Any]:
    """The order of the files ingest writes: by key; for a table with ``cluster_by``, by time
    window then subject (:mod:`lethe.maintenance.clustering`), so a person's rows of a batch sit in few
    files and pages before compaction clusters the windows."""
    from pyspark.sql import functions as F

    spec = ClusterSpec.of(table.manifest.properties)
    if spec is None:
        return [F.col(table.key)]
    order: list[Any] = []
    if spec.time_column is not None and spec.window_seconds is not None:
        col = F.col(spec.time_column)
        if pa.types.is_date(table.schema.field(spec.time_column).type):
            seconds = F.unix_date(col).cast("long") * 86_400
        else:
            seconds = F.floor(F.unix_micros(col) / 1_000_000)
        order.append(F.floor(seconds / spec.window_seconds))
    return [*order, *(F.col(c) for c in spec.columns)]


def _write_good_rows(
    spark: Any,
    staged: Any,
    table: lethe.Table,
    good_rows: int,
    *,
    target: int,
    rg_bytes: int,
    workdir: str,
    t0: float,
) -> tuple[list[DataFile], float]:
    """Range-partition and sort the good rows by key into files of about ``target`` bytes,
    written by the executors with the lethe writer: the files (not committed), and the time
    before the first upload (the GC grace clock)."""
    from pyspark.sql import functions as F

    schema, key = table.schema, table.key
    good = staged.filter(_reason().isNull()).select(*schema.names)
    # The smallest keys: a contiguous run of rows, as dense as in a real output file
    # (a random sample is sparser in key space and compresses worse).
    sample = good.orderBy(F.col(key)).limit(SAMPLE_ROWS).toArrow().select(schema.names).cast(schema)
    bpr = estimate_bytes_per_row(sample, table.write_options())
    parts = partitions_for(good_rows, bpr, target)
    log.info("%.1f B/row: %s partitions (%.1f s)", bpr, parts, time.perf_counter() - t0)
    rows_per_group = max(1, int(rg_bytes / bpr))
    result = os.path.join(workdir, "files.json")
    with _arrow_batch_rows(spark, max(1_000, min(10_000, rows_per_group // 4))):
        written_at = time.time()  # before any executor uploads: the GC grace clock
        order = _order(table)
        (
            good.repartitionByRange(parts, *order)
            .sortWithinPartitions(*order)
            .write.format("lethe_files")
            .mode("append")
            .option("table", table.uri)
            .option("schema", schema_to_b64(schema))  # with field ids, written into files
            .option("schema_id", str(table.manifest.current_schema_id))
            .option("key", key)
            .option("target_file_bytes", str(int(target * FILE_CAP)))
            .option("row_group_bytes", str(rg_bytes))
            .option("result", result)
            .save()
        )
    with open(result, encoding="utf-8") as f:
        files = [DataFile.model_validate_json(s) for s in json.load(f)]
    log.info("wrote %s files (%.1f s)", len(files), time.perf_counter() - t0)
    return files, written_at


@contextlib.contextmanager
def _arrow_batch_rows(spark: Any, rows: int) -> Iterator[None]:
    """Spark's Arrow batches of ``rows`` rows while the block runs (the setting restored)."""
    name = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(name, None)
    spark.conf.set(name, str(rows))
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(name)
        else:
            spark.conf.set(name, previous)


def _commit(
    table: lethe.Table,
    files: list[DataFile],
    rid: str,
    written_at: float | None,
    *,
    objects: Sequence[InputObject],
    rows_rejected: int,
) -> tuple[int | None, bool]:
    """Commit the files with the request id: the version, and whether a twin run committed
    first (our files are then removed)."""
    if not files:
        return None, False
    res = table.commit_files(  # our files: removed if they are not committed
        files,
        kind="append",
        params={
            "source": "spark-ingest",
            "objects": len(objects),
            "input_bytes": sum(o.size for o in objects),
            "rows_rejected": rows_rejected,
        },
        request_id=rid,
        written_at=written_at,
        own=True,
    )
    return res.version, res.files_added == 0


def _report(
    objects: Sequence[InputObject],
    rid: str,
    *,
    version: int | None,
    duplicate: bool,
    t0: float,
    out: _Written | None = None,
    rejects: str | None = None,
) -> IngestReport:
    """The run's report (a duplicate wrote nothing that stays; no ``out``: nothing read)."""
    out = out or _Written(good_rows=0, bad_rows=0, files=[], written_at=None, rejects_objects=0)
    kept = () if duplicate else tuple(out.files)
    return IngestReport(
        version=version,
        duplicate=duplicate,
        objects=len(objects),
        input_bytes=sum(o.size for o in objects),
        rows_read=out.good_rows + out.bad_rows,
        rows_written=sum(f.rows for f in kept),
        rows_rejected=out.bad_rows,
        files=len(kept),
        bytes_written=sum(f.size for f in kept),
        rejects_uri=rejects,
        rejects_objects=out.rejects_objects,
        request_id_hash=request_hash(rid),
        seconds=time.perf_counter() - t0,
        data_files=kept,
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
    p.add_argument(
        "--evolve",
        action="store_true",
        help="Parquet inputs may add columns and widen types (the table's schema evolves "
        "first); without it they are refused",
    )
    args = p.parse_args(argv)
    with own_session():
        spark = build_session("lethe-ingest", master=args.master)
        report = run_ingest(
            args.table,
            args.input,
            args.format,
            spark,
            rejects_uri=args.rejects,
            request_id=args.request_id,
            target_file_bytes=args.target_file_bytes,
            row_group_bytes=args.row_group_bytes,
            evolve=args.evolve,
        )
    if args.json:
        d = asdict(report)
        d.pop("data_files")
        print(json.dumps(d))
    else:
        print(report.describe())
    return 0


if __name__ == "__main__":
    run_main(main)
