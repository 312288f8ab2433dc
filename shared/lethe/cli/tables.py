"""Table commands: create, append, scan, history, inspect."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.cli.common import (
    FORMATS,
    add_at_version,
    add_command,
    add_filters,
    filters,
    non_negative,
    open_out,
    out_format,
    print_table,
    read_schema_file,
    write_rows,
)

if TYPE_CHECKING:  # the heavy modules load with the command that needs them
    from lethe.table import Table

__all__ = ["register"]

MERGE = (
    "strict (default): files must fit the table schema; merge: Parquet files may add columns "
    "and widen types (the table evolves in a schema commit, then the append; anything else "
    "is refused)"
)


def cmd_create(a: argparse.Namespace) -> int:
    from lethe.table import Table

    schema = read_schema_file(a.schema)
    t = Table.create(
        a.uri,
        schema,
        key=a.key,
        target_file_bytes=a.target_file_bytes,
        row_group_bytes=a.row_group_bytes,
        gc_grace=a.gc_grace,
        iceberg_view=a.iceberg_view,
        iceberg_format_version=a.iceberg_format_version,
        indexes=tuple(a.index or ()),
        cluster_by=tuple(a.cluster_by.split(",")) if a.cluster_by else None,
        cluster_window=_window(a.cluster_window),
    )
    print(f"created {t.uri} version {t.version} key={a.key} columns={schema.names}")
    return 0


def _window(arg: str | None) -> str | tuple[str, str] | None:
    """``--cluster-window 1d`` or ``event_time=1d``."""
    if arg is None or "=" not in arg:
        return arg
    column, duration = arg.split("=", 1)
    return (column, duration)


def cmd_append(a: argparse.Namespace) -> int:
    from lethe.catalog.transforms.schema import aliases
    from lethe.cli.inputs import fitted_batches, list_sources, merged_append
    from lethe.table import Table

    t = Table.open(a.uri)
    sources = list_sources(a.file)
    if a.schema_mode == "merge":  # the schema changes and the rows in one commit
        r = merged_append(sources, t, a.progress)
    else:
        reader = fitted_batches(sources, t.schema, aliases(t.manifest))
        # local files are read whole (progress then knows the total); S3 inputs stream
        local = not any(s.uri.startswith("s3://") for s in sources)
        r = t.append(reader.read_all() if local else reader, progress=a.progress)
    print(
        f"appended {r.rows_added} rows in {r.files_added} files -> version {r.version} ({r.io.describe()})"
    )
    return 0


def cmd_scan(a: argparse.Namespace) -> int:
    from lethe.table import Table

    fmt = a.format
    sink = None
    if a.out:  # checked before the scan: a bad name or folder fails in a second, not after it
        fmt = out_format(a.out, fmt)
        sink = open_out(a.out)
    try:
        t = Table.open(a.uri, version=a.version)
        cols = a.columns.split(",") if a.columns else None
        out = t.scan(cols, filters(a))
    except BaseException:
        if sink is not None:  # nothing read: leave no empty file behind
            sink.close()
            os.unlink(a.out)
        raise
    if sink is not None:
        with sink as f:
            write_rows(out, fmt, f)
        print(f"wrote {out.num_rows} rows to {a.out}")
    elif fmt is None or fmt == "table":
        print_table(out, a.limit)
    else:  # every row, to stdout, for a pipe (`lethe scan ... --format jsonl | jq`)
        sys.stdout.flush()
        write_rows(out, fmt, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    return 0


def cmd_history(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    print(
        f"{'version':>7}  {'created_at':<26} {'operation':<9} {'+rows':>9} {'-rows':>9} {'erased':>7} {'live rows':>10} {'files':>6}"
    )
    for h in t.history():
        print(
            f"{h.version:>7}  {h.created_at.isoformat(timespec='seconds'):<26} {h.operation:<9} "
            f"{h.rows_added:>9} {h.rows_deleted:>9} {h.rows_erased:>7} {h.live_rows:>10} {h.live_files:>6}"
        )
    return 0


def cmd_upgrade(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    before = t.manifest.format_version
    r = t.upgrade()
    m = t.manifest
    if before == m.format_version:
        print(f"{t.uri} version {t.version} is already format {m.format_version} ({m.layout})")
    elif not r.committed:
        print(
            f"{t.uri} was upgraded to format {m.format_version} ({m.layout}) by another process "
            f"meanwhile; it is now at version {r.version}"
        )
    else:
        print(
            f"upgraded {t.uri} to format {m.format_version} ({m.layout}) at version {r.version}: "
            f"{m.file_count} files in {len(m.segments)} segments"
        )
    return 0


def _print_segments(t: Table) -> None:

    m = t.manifest
    print(
        f"version {m.version}: format {m.format_version} ({m.layout}), {m.file_count} files, "
        f"{len(m.segments)} segments, {len(m.dv_overlay)} DV overlay entries"
    )
    if not m.segmented:
        return
    print(
        f"  {'segment':<60} {'files':>6} {'rows':>11} {'deleted':>9} {'data bytes':>14}  key range"
    )
    key = m.key
    for s in m.segments:
        k = s.columns.get(key)
        rng = f"{k.min} .. {k.max}" if k is not None else "?"
        print(
            f"  {s.path:<60} {s.files:>6} {s.rows:>11,} {s.deleted_rows:>9,} {s.data_bytes:>14,}  {rng}"
        )


def cmd_inspect(a: argparse.Namespace) -> int:
    from lethe.table import Table
    from lethe.writing.writer import row_group_range

    t = Table.open(a.uri, version=a.version)
    if a.segments:
        _print_segments(t)
        return 0
    files = [f for f in t.manifest.files if a.path in (None, f.path)]
    if a.path and not files:
        raise errors.InvalidRequest(f"{a.path} is not a live file of version {t.version}")
    for f in files:
        h = t._handle(f)
        md = h.tail().arrow
        print(
            f"{f.path}  size={f.size:,}  rows={f.rows}  deleted={f.deleted_rows}  row_groups={md.num_row_groups}  created_by={md.created_by}"
        )
        print(f"  {'rg':>3} {'offset':>12} {'bytes':>12} {'rows':>9}  key min .. max")
        for i, rg in enumerate(f.row_groups):
            s, e = row_group_range(md.row_group(i))
            print(f"  {i:>3} {s:>12,} {e - s:>12,} {rg.rows:>9}  {rg.key_min} .. {rg.key_max}")
    return 0


def _register_append(sub: Any) -> None:
    what = "append Parquet, CSV or JSON-lines files (a file, a folder, an S3 object or prefix)"
    c = add_command(
        sub,
        "append",
        what,
        "uri",
        description="Append files to the table in one commit. Every file must fit the table "
        "schema: an unknown column, a missing one, a narrowing type (int64 into int32) or a "
        "value that does not convert refuses the whole append, listing every file and column; "
        "nothing is dropped or narrowed silently.",
        fn=cmd_append,
    )
    c.add_argument("file", help="local file or folder, or s3://bucket/key or prefix")
    c.add_argument("--schema-mode", choices=("strict", "merge"), default="strict", help=MERGE)
    c.add_argument(
        "--evolve",
        dest="schema_mode",
        action="store_const",
        const="merge",
        help="the same as --schema-mode merge",
    )


def _register_create(sub: Any) -> None:
    c = add_command(sub, "create", "create a table", "uri", fn=cmd_create)
    c.add_argument("--schema", required=True, help="a Parquet or CSV file whose schema to use")
    c.add_argument("--key", default="id")
    c.add_argument("--target-file-bytes", type=int, default=256 << 20)
    c.add_argument("--row-group-bytes", type=int, default=16 << 20)
    c.add_argument(
        "--gc-grace",
        default="7d",
        help="how long GC keeps objects no manifest references yet; writers commit within it "
        "(default %(default)s, fixed for the table's life)",
    )
    c.add_argument(
        "--iceberg-view",
        action="store_true",
        help="publish the table's Iceberg view after every commit (lethe iceberg publish)",
    )
    c.add_argument("--iceberg-format-version", type=int, choices=(2, 3), default=3)
    c.add_argument(
        "--index", action="append", metavar="COLUMN", help="a secondary index (repeatable)"
    )
    c.add_argument(
        "--cluster-by",
        metavar="COLUMNS",
        help="subject columns (comma-separated): compaction sorts each time window by them",
    )
    c.add_argument(
        "--cluster-window",
        metavar="[COLUMN=]DURATION",
        help="time windows of clustering, e.g. 1d (of the only timestamp column) or event_time=1d",
    )


def _register_scan(sub: Any) -> None:
    c = add_command(sub, "scan", "print or export rows", "uri", fn=cmd_scan)
    add_at_version(c, "read this table version (time travel; default: the latest)")
    c.add_argument("--columns")
    add_filters(c)
    c.add_argument(
        "--format",
        choices=FORMATS,
        help="table (default: aligned, the first --limit rows), or every row as csv, jsonl or "
        "parquet to stdout (or to --out)",
    )
    c.add_argument(
        "--out", help="write every row to a file (format from --format, else its extension)"
    )
    c.add_argument("--limit", type=non_negative, default=20, help="rows shown by --format table")


def register(sub: Any) -> None:
    """Add the table commands to the ``lethe`` parser."""
    _register_create(sub)
    _register_append(sub)
    _register_scan(sub)
    add_command(sub, "history", "list versions, newest first", "uri", fn=cmd_history)
    what = "a data file's row groups: offsets, sizes, rows, key range"
    c = add_command(sub, "inspect", what, "uri", fn=cmd_inspect)
    c.add_argument("path", nargs="?", help="table-relative data file path (default: all files)")
    add_at_version(c, "inspect the file in this table version (default: the latest)")
    c.add_argument(
        "--segments", action="store_true", help="list the manifest's segments and summaries instead"
    )
    what = "rewrite the latest manifest in format 2 (segmented)"
    add_command(sub, "upgrade", what, "uri", fn=cmd_upgrade)
