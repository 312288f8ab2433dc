"""Spark index job: declare a secondary index on a large table and backfill it in parallel.

    spark-submit spark_jobs/index.py --table s3://b/t --column customer_id [--tasks 8]
    python spark_jobs/index.py ...            # the same with a local Spark session

The driver lists the live files of the latest version and splits them into ``--tasks``
shares; each Spark task reads only the indexed column of its files, by field id (a file
written before a rename holds the column under its old name) and writes one sorted
run of index pieces (:func:`lethe.index.runs.backfill_task`); the driver commits the index with
those runs by CAS (:meth:`lethe.Table.create_index`). Pieces of a commit that does not land
are removed; later appends merge the runs down (docs/format.md §3c). ``run_index`` is the
same job callable in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

try:
    from spark_jobs._session import build_session, own_session
except ImportError:  # run as a script from a checkout: python spark_jobs/index.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_jobs._session import build_session, own_session

import lethe
from lethe.catalog.manifest import DataFile, IndexRun
from lethe.process import run_main
from lethe.table import CommitResult

__all__ = ["main", "run_index"]


def _task(payload: str) -> str:
    """One Spark task: a run over its share of the files (JSON in, JSON out)."""
    from lethe.index.runs import backfill_task

    p = json.loads(payload)
    files = [DataFile.model_validate(f) for f in p["files"]]
    return backfill_task(
        p["table"],
        p["column"],
        p["schema"],
        files,
        schemas=[(int(i), b) for i, b in p.get("schemas", ())],
        current_schema_id=int(p.get("current_schema_id", 0)),
    ).model_dump_json()


def run_index(
    table_uri: str, column: str, *, tasks: int = 8, spark: Any = None, master: str | None = None
) -> CommitResult:
    """Create the index on ``column`` of the table at ``table_uri`` (see the module doc)."""
    table = lethe.Table.open(table_uri)
    schema_b64 = table.manifest.schema_b64
    # the history: files of older schemas are read by field id (an index on a renamed
    # column reads each file under the name it was written with)
    history = [(s.schema_id, s.schema_b64) for s in table.manifest.manifest.schemas]
    current = table.manifest.current_schema_id

    def build(files: list[DataFile]) -> list[IndexRun]:
        if not files:
            return []
        n = max(1, min(tasks, len(files)))
        payloads = [
            json.dumps(
                {
                    "table": table_uri,
                    "column": column,
                    "schema": schema_b64,
                    "schemas": history,
                    "current_schema_id": current,
                    "files": [f.model_dump(mode="json") for f in files[i::n]],
                }
            )
            for i in range(n)
        ]
        session = spark or build_session("lethe-index", master=master)
        out = session.sparkContext.parallelize(payloads, n).map(_task).collect()
        return [IndexRun.model_validate_json(r) for r in out]

    return table.create_index(column, build=build)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="index.py", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="s3://bucket/prefix of the table")
    p.add_argument("--column", required=True, help="the column to index")
    p.add_argument("--tasks", type=int, default=8, help="Spark tasks (sorted runs) to write")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit")
    args = p.parse_args(argv)
    with own_session():
        result = run_index(args.table, args.column, tasks=args.tasks, master=args.master)
    print(f"index on {args.column!r} committed as version {result.version}")
    return 0


if __name__ == "__main__":
    run_main(main)
