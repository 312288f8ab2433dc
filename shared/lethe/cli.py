"""The ``lethe`` command line: the public API from a shell.

Examples::

    lethe create s3://b/events --schema events.parquet --key id
    lethe append s3://b/events data.csv
    lethe scan s3://b/events --where "customer_id = 7" --columns id,payload
    lethe delete s3://b/events --where "id in [1,2,3]" --request-id r-1
    lethe history s3://b/events
    lethe inspect s3://b/events data/2026/11/22/16/ab.parquet
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lethe import errors
from lethe.process import run_main
from lethe.table import Table

__all__ = ["console_main", "main", "parse_where"]

_WHERE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(==|=|!=|<=|>=|<|>|not\s+in|in)\s*(.+?)\s*$", re.I)


def parse_where(expr: str) -> tuple[str, str, Any]:
    """Parse ``"col op value"``; the value is JSON when it parses as JSON, else a string.

    >>> parse_where("id in [1, 2]")
    ('id', 'in', [1, 2])
    >>> parse_where("name = bob")
    ('name', '=', 'bob')
    """
    m = _WHERE.match(expr)
    if not m:
        raise errors.InvalidRequest(f"cannot parse --where {expr!r}; use 'column op value'")
    col, op, raw = m.group(1), re.sub(r"\s+", " ", m.group(2).lower()), m.group(3)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.strip("'\"")
    return col, op, value


def _filters(args: argparse.Namespace) -> Any:
    if getattr(args, "filters", None):
        try:
            return json.loads(args.filters)
        except json.JSONDecodeError as e:
            raise errors.InvalidRequest(f"--filters is not JSON: {e}") from e
    if getattr(args, "where", None):
        return [parse_where(w) for w in args.where]
    return None


def _read_local(path: str) -> pa.Table:
    if path.endswith(".csv"):
        return pacsv.read_csv(path)
    return pq.read_table(path)


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    missing = [n for n in schema.names if n not in data.column_names]
    if missing:
        raise errors.SchemaMismatch(f"input lacks columns {missing}")
    try:
        return data.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.SchemaMismatch(f"input does not fit the table schema: {e}") from e


def _print_table(t: pa.Table, limit: int) -> None:
    shown = t.slice(0, limit)
    cols = shown.column_names
    rows = [[("" if v is None else str(v)) for v in r.values()] for r in shown.to_pylist()]
    widths = [max([len(c)] + [min(40, len(r[i])) for r in rows]) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(v[:40].ljust(w) for v, w in zip(r, widths, strict=True)))
    print(f"({t.num_rows} rows{', showing ' + str(limit) if t.num_rows > limit else ''})")


def cmd_create(a: argparse.Namespace) -> int:
    schema = (
        pq.read_schema(a.schema) if a.schema.endswith(".parquet") else _read_local(a.schema).schema
    )
    t = Table.create(
        a.uri,
        schema,
        key=a.key,
        target_file_bytes=a.target_file_bytes,
        row_group_bytes=a.row_group_bytes,
        gc_grace=a.gc_grace,
    )
    print(f"created {t.uri} version {t.version} key={a.key} columns={schema.names}")
    return 0


def cmd_append(a: argparse.Namespace) -> int:
    t = Table.open(a.uri)
    r = t.append(_conform(_read_local(a.file), t.schema))
    print(
        f"appended {r.rows_added} rows in {r.files_added} files -> version {r.version} ({r.io.describe()})"
    )
    return 0


def cmd_scan(a: argparse.Namespace) -> int:
    t = Table.open(a.uri, version=a.version)
    cols = a.columns.split(",") if a.columns else None
    out = t.scan(cols, _filters(a))
    if a.out:
        if a.out.endswith(".csv"):
            pacsv.write_csv(out, a.out)
        else:
            pq.write_table(out, a.out)
        print(f"wrote {out.num_rows} rows to {a.out}")
    else:
        _print_table(out, a.limit)
    return 0


def cmd_history(a: argparse.Namespace) -> int:
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


def cmd_inspect(a: argparse.Namespace) -> int:
    from lethe.writer import row_group_range

    t = Table.open(a.uri, version=a.version)
    files = [f for f in t.manifest.files if a.path in (None, f.path)]
    if a.path and not files:
        raise errors.InvalidRequest(f"{a.path} is not a live file of version {t.version}")
    for f in files:
        h = t._handle(f)
        md = h.footer().metadata
        print(
            f"{f.path}  size={f.size:,}  rows={f.rows}  deleted={f.deleted_rows}  row_groups={md.num_row_groups}  created_by={md.created_by}"
        )
        print(f"  {'rg':>3} {'offset':>12} {'bytes':>12} {'rows':>9}  key min .. max")
        for i, rg in enumerate(f.row_groups):
            s, e = row_group_range(md.row_group(i))
            print(f"  {i:>3} {s:>12,} {e - s:>12,} {rg.rows:>9}  {rg.key_min} .. {rg.key_max}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lethe", description="Parquet tables on S3 that can forget.")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("create", help="create a table")
    c.add_argument("uri")
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
    c.set_defaults(fn=cmd_create)

    c = sub.add_parser("append", help="append a local Parquet or CSV file")
    c.add_argument("uri")
    c.add_argument("file")
    c.set_defaults(fn=cmd_append)

    def add_filters(c: argparse.ArgumentParser) -> None:
        c.add_argument("--where", action="append", help="'column op value' (repeat to AND)")
        c.add_argument("--filters", help="pyarrow DNF filters as JSON")

    c = sub.add_parser("scan", help="print or export rows")
    c.add_argument("uri")
    c.add_argument("--version", type=int)
    c.add_argument("--columns")
    add_filters(c)
    c.add_argument("--out", help="write to .parquet or .csv instead of printing")
    c.add_argument("--limit", type=int, default=20)
    c.set_defaults(fn=cmd_scan)

    c = sub.add_parser("history", help="list versions, newest first")
    c.add_argument("uri")
    c.set_defaults(fn=cmd_history)

    c = sub.add_parser("inspect", help="a data file's row groups: offsets, sizes, rows, key range")
    c.add_argument("uri")
    c.add_argument("path", nargs="?", help="table-relative data file path (default: all files)")
    c.add_argument("--version", type=int)
    c.set_defaults(fn=cmd_inspect)

    _extend(sub, add_filters)
    return p


def _extend(sub: Any, add_filters: Any) -> None:
    """Commands of later features register here (delete, erase, verify, gc)."""
    from lethe import cli_ops

    cli_ops.register(sub, add_filters)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.fn(args))
    except errors.TableNotFound as e:
        uri = e.uri or getattr(args, "uri", None) or "s3://BUCKET/PREFIX"
        print(
            f"lethe: TableNotFound: no Lethe table at {uri}; create it with "
            f"`lethe create {uri} --schema FILE --key COLUMN`",
            file=sys.stderr,
        )
        return 2
    except errors.LetheError as e:
        print(f"lethe: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def console_main() -> NoReturn:
    """The ``lethe`` console script: :func:`main`, ended by :func:`lethe.process.run_main`
    (quiet on a closed pipe, immune to pyarrow's abort at interpreter exit)."""
    run_main(main)


if __name__ == "__main__":
    console_main()
