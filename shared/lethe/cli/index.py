"""``lethe index create|drop|list``: the table's secondary indexes (docs/format.md §3c).

``create`` declares an index and backfills it in process (it reads only that column's
chunks; ``spark_jobs/index.py`` does large tables on EMR Serverless); ``drop`` removes the
declaration (GC removes the pieces); ``list`` shows each index with its runs, pieces and
entries.
"""

from __future__ import annotations

import argparse
from typing import Any

from lethe.cli.common import add_command

__all__ = ["register"]


def cmd_index(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    if a.action == "list":
        if not t.manifest.indexes:
            print(f"version {t.version}: no indexes")
        for ix in t.manifest.indexes:
            pieces = sum(len(r.pieces) for r in ix.runs)
            entries = sum(r.entries for r in ix.runs)
            print(
                f"{ix.column}: since version {ix.created_version}, {len(ix.runs)} runs, "
                f"{pieces} pieces, {entries} entries"
            )
        return 0
    if a.column is None:
        raise SystemExit(f"lethe index {a.action}: a COLUMN is required")
    if a.action == "create":
        r = t.create_index(a.column, progress=a.progress)
        print(f"indexed {a.column!r} -> version {r.version} ({r.io.describe()})")
    else:
        r = t.drop_index(a.column)
        print(f"dropped the index on {a.column!r} -> version {r.version}")
    return 0


def register(sub: Any) -> None:
    """Add ``index`` to the ``lethe`` parser."""
    what = "secondary indexes on erasure keys: create (backfill), drop, list"
    about = (
        "Deletes, erasures, scans and lookups with = or in on an indexed column read a few "
        "index objects instead of the column of every row group."
    )
    c = add_command(
        sub, "index", what, "uri", actions=("create", "drop", "list"), description=about
    )
    c.add_argument("column", nargs="?")
    c.set_defaults(fn=cmd_index)
