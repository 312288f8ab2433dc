"""Spark jobs in local mode: ingest throughput against Spark's own Parquet writer, and compaction.

In one run, on the same rows (shuffled keys, uploaded as Parquet objects):

* **lethe ingest**: ``run_ingest`` end to end — executors read the uploads from moto's S3,
  validate every row, range-sort by key, stream files through the lethe writer to moto, and
  the driver commits once;
* **Spark native**: the same uploads read from local disk by ``spark.read.parquet``,
  range-sorted by key the same way and written by ``df.write.parquet`` to local disk (no
  validation, no S3, no commit): the ceiling for this machine;
* **compaction**: after deleting ~30% of the rows across every file, ``run_compaction``
  rewrites the files past the threshold (DVs applied) and commits.

Throughput is reported over the rows' in-memory (Arrow) size, so both writers are judged on
the same bytes; the input and output sizes are shown beside it. moto runs in its own process.
No asserts on time: these numbers depend on the machine and on moto.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import mib, moto_process, new_bucket
from devtools.datagen import SCHEMA, generate
from lethe.table import Table

MB = 1 << 20


def _rate(nbytes: float, seconds: float) -> float:
    return nbytes / MB / seconds if seconds > 0 else float("nan")


def run(rows: int | None = None, objects: int = 4) -> dict[str, Any]:
    """Run the benchmark and print its numbers (``LETHE_BENCH_SPARK_ROWS`` sets the size)."""
    from spark_jobs._session import build_session
    from spark_jobs.compact import run_compaction
    from spark_jobs.ingest import run_ingest

    rows = rows or int(os.environ.get("LETHE_BENCH_SPARK_ROWS", "1000000"))
    out: dict[str, Any] = {"rows": rows}
    data = generate(0, rows).take(np.random.default_rng(3).permutation(rows))
    arrow_bytes = data.nbytes
    out["arrow_mib"] = round(arrow_bytes / MB, 2)
    with moto_process() as aws:
        t0 = time.perf_counter()
        spark = build_session("lethe-bench", conf={"spark.sql.shuffle.partitions": "8"})
        out["session_seconds"] = round(time.perf_counter() - t0, 2)
        bucket = new_bucket(aws)
        s3 = aws.client("s3")
        local = tempfile.mkdtemp(prefix="lethe-bench-spark-")
        try:
            input_bytes = 0
            per = -(-rows // objects)
            os.makedirs(f"{local}/in")
            for i in range(objects):
                buf = io.BytesIO()
                pq.write_table(data.slice(i * per, per), buf)
                body = buf.getvalue()
                input_bytes += len(body)
                s3.put_object(Bucket=bucket, Key=f"incoming/part-{i}.parquet", Body=body)
                with open(f"{local}/in/part-{i}.parquet", "wb") as f:
                    f.write(body)
            uri = f"s3://{bucket}/events"
            target = 32 << 20
            Table.create(uri, SCHEMA, key="id", target_file_bytes=target, row_group_bytes=4 << 20)

            # warm the Python workers once (imports of pyarrow, boto3, lethe) on a tiny table
            warm = f"s3://{bucket}/warm"
            Table.create(warm, SCHEMA, key="id")
            s3.put_object(Bucket=bucket, Key="warm/x.parquet", Body=_parquet(generate(0, 100)))
            run_ingest(warm, f"s3://{bucket}/warm/x.parquet", spark=spark)

            t0 = time.perf_counter()
            report = run_ingest(uri, f"s3://{bucket}/incoming/", spark=spark)
            lethe_s = time.perf_counter() - t0
            assert report.rows_written == rows

            t0 = time.perf_counter()
            df = spark.read.parquet(f"{local}/in")
            parts = max(1, report.files)
            (
                df.repartitionByRange(parts, "id")
                .sortWithinPartitions("id")
                .write.mode("overwrite")
                .option("compression", "zstd")
                .parquet(f"{local}/out")
            )
            spark_s = time.perf_counter() - t0
            spark_out = sum(
                os.path.getsize(os.path.join(d, f))
                for d, _, fs in os.walk(f"{local}/out")
                for f in fs
                if f.endswith(".parquet")
            )

            out["ingest"] = {
                "input_mib": round(input_bytes / MB, 2),
                "lethe_seconds": round(lethe_s, 2),
                "lethe_mib_per_s": round(_rate(arrow_bytes, lethe_s), 1),
                "lethe_files": report.files,
                "lethe_output_mib": round(report.bytes_written / MB, 2),
                "spark_native_seconds": round(spark_s, 2),
                "spark_native_mib_per_s": round(_rate(arrow_bytes, spark_s), 1),
                "spark_native_output_mib": round(spark_out / MB, 2),
                "lethe_vs_native": round(spark_s / lethe_s, 2),
            }

            # compaction: ~30% of the rows deleted, spread over every file
            t = Table.open(uri)
            dr = t.delete([("customer_id", "<", 3_000)])
            t0 = time.perf_counter()
            res = run_compaction(uri, 0.2, spark=spark, coalesce_dv_containers=None)
            comp_s = time.perf_counter() - t0
            assert Table.open(uri).scan(["id"]).num_rows == rows - dr.rows_deleted
            out["compaction"] = {
                "rows_deleted_before": dr.rows_deleted,
                "files_rewritten": res.files_removed,
                "files_written": res.files_added,
                "input_mib": round(res.bytes_before / MB, 2),
                "output_mib": round(res.bytes_after / MB, 2),
                "rows_rewritten": res.rows_rewritten,
                "seconds": round(comp_s, 2),
                "input_mib_per_s": round(_rate(res.bytes_before, comp_s), 1),
                "rows_per_s": round(res.rows_rewritten / comp_s) if comp_s else None,
            }
        finally:
            spark.stop()
            shutil.rmtree(local, ignore_errors=True)

    i, c = out["ingest"], out["compaction"]
    print(f"rows: {rows:,} ({mib(arrow_bytes)} in Arrow), Spark session {out['session_seconds']} s")
    print(
        f"ingest, lethe (moto S3, validated, sorted, committed): {i['lethe_seconds']:>7} s "
        f"{i['lethe_mib_per_s']:>7} MiB/s  -> {i['lethe_files']} files, {i['lethe_output_mib']} MiB"
    )
    print(
        f"ingest, Spark df.write.parquet (local disk, sorted): {i['spark_native_seconds']:>7} s "
        f"{i['spark_native_mib_per_s']:>7} MiB/s  -> {i['spark_native_output_mib']} MiB"
    )
    print(f"lethe / native wall-time ratio: {1 / i['lethe_vs_native']:.2f}x")
    print(
        f"compaction: {c['files_rewritten']} files ({c['input_mib']} MiB, "
        f"{c['rows_deleted_before']:,} rows deleted) -> {c['files_written']} files "
        f"({c['output_mib']} MiB) in {c['seconds']} s: {c['input_mib_per_s']} MiB/s, "
        f"{c['rows_per_s']:,} rows/s"
    )
    return out


def _parquet(t: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


if __name__ == "__main__":
    run()
