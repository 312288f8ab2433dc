"""Spark adoption job: adopt a lake's existing Parquet files in place at scale (issue 28).

    spark-submit spark_jobs/adopt.py --table s3://b/tables/events --source s3://b/raw/events/ \\
        --key id [--partition-type dt=date] [--index customer_id] [--batch-files 1000] [--tasks 64]
    python spark_jobs/adopt.py ...            # the same with a local Spark session

The driver lists the source (a Hive-partitioned prefix, an Iceberg ``metadata.json``, a Delta
table, ``glue://db/table``); Spark tasks read the files' footers (suffix GETs pinned to the
ETag, one per file once the task saw a footer) and return them; the driver makes the schema and commits once per batch of
``--batch-files`` files (:func:`lethe.adopt.core.adopt`), idempotent by path and ETag, so a
failed job is resumed by running it again. ``run_adopt`` is the same job callable in-process.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

try:
    from spark_jobs._session import build_session, own_session
except ImportError:  # run as a script from a checkout: python spark_jobs/adopt.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_jobs._session import build_session, own_session

from lethe.adopt.core import AdoptOptions
from lethe.adopt.footers import Footer, footer_of
from lethe.adopt.source import SourceFile
from lethe.process import run_main
from lethe.storage.store import S3Store
from lethe.table import Table

__all__ = ["main", "run_adopt"]


def _task(payload: str) -> list[str]:
    """One Spark task: the footers of its share of the files (JSON in, JSON lines out)."""
    from lethe.adopt.footers import FooterGuess, tail_bytes
    from lethe.storage.store import make_s3_client

    client = make_s3_client()
    guess = FooterGuess()  # one GET per file once the task saw a footer
    out = []
    for f in json.loads(payload):
        sf = SourceFile(f["uri"], f["size"], f["etag"])
        etag, size, tail = tail_bytes(S3Store(sf.bucket, client=client), sf, guess=guess())
        guess.saw(len(tail))
        out.append(
            json.dumps({"etag": etag, "size": size, "tail": base64.b64encode(tail).decode()})
        )
    return out


def spark_footers(tasks: int, spark: Any = None, master: str | None = None) -> Any:
    """A footer reader for :class:`~lethe.adopt.core.AdoptOptions` that reads in Spark tasks."""

    def read(store: S3Store, files: Sequence[SourceFile]) -> list[Footer]:
        if not files:
            return []
        n = max(1, min(tasks, len(files)))
        shares = [files[i::n] for i in range(n)]
        payloads = [
            json.dumps([{"uri": f.uri, "size": f.size, "etag": f.etag} for f in share])
            for share in shares
        ]
        session = spark or build_session("lethe-adopt", master=master)
        got = session.sparkContext.parallelize(payloads, n).map(_task).collect()
        by_uri: dict[str, Footer] = {}
        for share, lines in zip(shares, got, strict=True):
            for f, line in zip(share, lines, strict=True):
                d = json.loads(line)
                by_uri[f.uri] = footer_of(f, d["etag"], d["size"], base64.b64decode(d["tail"]))
        return [by_uri[f.uri] for f in files]

    return read


def run_adopt(
    table_uri: str,
    source: str,
    opts: AdoptOptions,
    *,
    tasks: int = 64,
    spark: Any = None,
    master: str | None = None,
) -> Any:
    """Adopt ``source`` into ``table_uri`` with footers read by Spark (see the module doc);
    the open table, or the plan with ``opts.dry_run``."""
    from dataclasses import replace

    return Table.adopt_with(
        table_uri, source, replace(opts, footers=spark_footers(tasks, spark, master))
    )


def main(argv: list[str] | None = None) -> int:
    from lethe.cli.adopt import partition_types

    p = argparse.ArgumentParser(prog="adopt.py", description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="s3://bucket/prefix of the table")
    p.add_argument("--source", required=True, help="the prefix, metadata.json or glue://db/t")
    p.add_argument("--key", help="the erasure key column (required to create the table)")
    p.add_argument("--partition-type", action="append", metavar="COLUMN=TYPE")
    p.add_argument("--index", action="append", metavar="COLUMN")
    p.add_argument("--no-ownership", action="store_true")
    p.add_argument("--batch-files", type=int, default=1000)
    p.add_argument("--tasks", type=int, default=64, help="Spark tasks reading footers")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit")
    args = p.parse_args(argv)
    opts = AdoptOptions(
        partition_types=partition_types(args.partition_type),
        key=args.key,
        take_ownership=not args.no_ownership,
        indexes=tuple(args.index or ()),
        batch_files=args.batch_files,
    )
    with own_session():
        t = run_adopt(args.table, args.source, opts, tasks=args.tasks, master=args.master)
    print(f"adopted in place into {t.uri}: version {t.version}, {len(t.manifest.files)} files")
    return 0


if __name__ == "__main__":
    run_main(main)
