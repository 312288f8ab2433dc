"""Spark compaction job: rewrite files with many deleted rows, bin small files, coalesce DVs.

    spark-submit spark_jobs/compact.py --table s3://b/t [--min-deleted-fraction 0.2] [--dry-run]
    python spark_jobs/compact.py ...          # the same with a local Spark session

The driver plans with :func:`lethe.maintenance.compaction.plan_compaction` (``--dry-run`` prints the plan
and stops, without starting Spark); executors rewrite one group each (``lethe_rewrite``:
live rows in file and row order, DVs applied, through the lethe writer); the driver commits
by CAS with :func:`lethe.maintenance.compaction.commit_compaction`, which maps deletes that landed on the
sources while the job ran onto the new files (the rewrite is order-preserving), so no delete
is ever lost. ``run_compaction`` is the same job callable in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

try:
    from spark_jobs._session import build_session, own_session
except ImportError:  # run as a script from a checkout: python spark_jobs/compact.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_jobs._session import build_session, own_session

import lethe
from lethe.catalog.manifest import DataFile
from lethe.maintenance.compaction import CompactionOptions, CompactionResult, RewriteTask
from lethe.process import run_main

__all__ = ["main", "run_compaction", "spark_runner"]


def spark_runner(spark: Any) -> Callable[[Sequence[RewriteTask]], list[list[DataFile]]]:
    """Run rewrite tasks on ``spark``: one partition (task) per compaction group."""
    from spark_jobs._sources import register_data_sources

    register_data_sources(spark)

    def run(tasks: Sequence[RewriteTask]) -> list[list[DataFile]]:
        rows = (
            spark.read.format("lethe_rewrite")
            .option("tasks", json.dumps([t.model_dump_json() for t in tasks]))
            .load()
            .toArrow()
            .to_pylist()
        )
        by_group = {
            int(r["group"]): [DataFile.model_validate(d) for d in json.loads(r["files"])]
            for r in rows
        }
        missing = [t.group for t in tasks if t.group not in by_group]
        if missing:
            raise RuntimeError(f"compaction groups {missing} returned no result")
        return [by_group[t.group] for t in tasks]

    return run


def run_compaction(
    table_uri: str,
    min_deleted_fraction: float = 0.2,
    dry_run: bool = False,
    spark: Any = None,
    *,
    small_file_fraction: float = 0.5,
    target_file_bytes: int | None = None,
    coalesce_dv_containers: int | None = 8,
    master: str | None = None,
    cluster: bool | None = None,
) -> CompactionResult:
    """Compact the table at ``table_uri`` (see the module doc).

    Args:
        table_uri: ``s3://bucket/prefix`` of the table.
        min_deleted_fraction: Rewrite files with at least this fraction of rows deleted.
        dry_run: Only plan; ``result.describe()`` is the plan. Spark is not started.
        spark: A SparkSession (default: the active one, or a new local one).
        small_file_fraction: Files below this fraction of the target size are binned.
        target_file_bytes: Output size (default: the table's).
        coalesce_dv_containers: Coalesce untouched files' DVs once they are spread over this
            many containers (None: never).
        master: Spark master of a session built here (not under spark-submit).
        cluster: Re-cluster windows (:mod:`lethe.maintenance.clustering`; one Spark task per group of
            windows); None: when the table has ``cluster_by``.

    Example:
        >>> from spark_jobs.compact import run_compaction               # doctest: +SKIP
        >>> print(run_compaction("s3://b/t", 0.2, dry_run=True).describe())  # doctest: +SKIP
        compaction plan for s3://b/t at version 7 (...)
    """
    table = lethe.Table.open(table_uri)
    options = CompactionOptions(
        min_deleted_fraction=min_deleted_fraction,
        small_file_fraction=small_file_fraction,
        target_file_bytes=target_file_bytes,
        coalesce_dv_containers=coalesce_dv_containers,
        cluster=cluster,
    )
    if dry_run:
        return table.compact(options, dry_run=True)

    def run(tasks: Sequence[RewriteTask]) -> list[list[DataFile]]:
        # Spark starts only when there is something to rewrite
        return spark_runner(spark or build_session("lethe-compact", master=master))(tasks)

    return table.compact(options, run_tasks=run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compact.py", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="s3://bucket/prefix of the table")
    p.add_argument("--min-deleted-fraction", type=float, default=0.2)
    p.add_argument("--small-file-fraction", type=float, default=0.5)
    p.add_argument("--target-file-bytes", type=int, default=None)
    p.add_argument(
        "--coalesce-dv-containers",
        type=int,
        default=8,
        help="coalesce untouched DVs spread over at least this many containers (0: never)",
    )
    p.add_argument(
        "--no-cluster",
        action="store_true",
        help="bin by key even when the table has cluster_by (default: re-cluster windows)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit")
    args = p.parse_args(argv)
    with own_session():
        result = run_compaction(
            args.table,
            args.min_deleted_fraction,
            args.dry_run,
            small_file_fraction=args.small_file_fraction,
            target_file_bytes=args.target_file_bytes,
            coalesce_dv_containers=args.coalesce_dv_containers or None,
            master=args.master,
            cluster=False if args.no_cluster else None,
        )
    print(result.describe())
    return 0


if __name__ == "__main__":
    run_main(main)
