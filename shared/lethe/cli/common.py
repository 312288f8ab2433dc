"""What every ``lethe`` command shares: filter arguments, local files, table printing."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lethe import errors

__all__ = [
    "FORMATS",
    "add_filters",
    "filters",
    "parse_where",
    "print_table",
    "read_local",
    "write_rows",
]

_WHERE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(==|=|!=|<=|>=|<|>|not\s+in|in)\s*(.+?)\s*$", re.I)
_NULL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s+is\s+(not\s+)?null\s*$", re.I)


def parse_where(expr: str) -> tuple[str, str, Any]:
    """Parse ``"col op value"``; the value is JSON when it parses as JSON, else a string.

    >>> parse_where("id in [1, 2]")
    ('id', 'in', [1, 2])
    >>> parse_where("name = bob")
    ('name', '=', 'bob')

    ``is null`` and ``is not null`` become ``in [None]`` and ``not in [None]`` (pyarrow's
    ``isin`` matches a null member against null rows):

    >>> parse_where("email is null"), parse_where("email IS NOT NULL")
    (('email', 'in', [None]), ('email', 'not in', [None]))
    """
    n = _NULL.match(expr)
    if n:
        return n.group(1), ("not in" if n.group(2) else "in"), [None]
    m = _WHERE.match(expr)
    if not m:
        raise errors.InvalidRequest(
            f"cannot parse --where {expr!r}; use 'column op value' with op one of "
            "= != < <= > >= in, not in (a list: 'id in [1, 2]'), or 'column is [not] null'"
        )
    col, op, raw = m.group(1), re.sub(r"\s+", " ", m.group(2).lower()), m.group(3)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.strip("'\"")
    return col, op, value


def filters(args: argparse.Namespace) -> Any:
    if getattr(args, "filters", None):
        try:
            return json.loads(args.filters)
        except json.JSONDecodeError as e:
            raise errors.InvalidRequest(f"--filters is not JSON: {e}") from e
    if getattr(args, "where", None):
        return [parse_where(w) for w in args.where]
    return None


def read_local(path: str) -> pa.Table:
    if path.endswith(".csv"):
        return pacsv.read_csv(path)
    return pq.read_table(path)


FORMATS = ("table", "csv", "jsonl", "parquet")


def write_rows(t: pa.Table, fmt: str, out: Any) -> None:
    """``t`` to the binary stream ``out`` as CSV (with a header), JSON lines (one object per
    row; timestamps ISO 8601, bytes as base64) or Parquet."""
    if fmt == "csv":
        pacsv.write_csv(t, out)
    elif fmt == "parquet":
        pq.write_table(t, out)
    elif fmt == "jsonl":
        for batch in t.to_batches(max_chunksize=4096):
            lines = [
                json.dumps(r, default=_json_value, ensure_ascii=False) for r in batch.to_pylist()
            ]
            if lines:
                out.write(("\n".join(lines) + "\n").encode())
    else:
        raise errors.InvalidRequest(f"unknown format {fmt!r}; use one of {FORMATS}")


def _json_value(v: Any) -> Any:
    import base64
    import datetime as dt
    import decimal

    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    return str(v)


def print_table(t: pa.Table, limit: int) -> None:
    shown = t.slice(0, limit)
    cols = shown.column_names
    rows = [[("" if v is None else str(v)) for v in r.values()] for r in shown.to_pylist()]
    widths = [max([len(c)] + [min(40, len(r[i])) for r in rows]) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(v[:40].ljust(w) for v, w in zip(r, widths, strict=True)))
    print(f"({t.num_rows} rows{', showing ' + str(limit) if t.num_rows > limit else ''})")


def add_filters(c: argparse.ArgumentParser) -> None:
    c.add_argument("--where", action="append", help="'column op value' (repeat to AND)")
    c.add_argument("--filters", help="pyarrow DNF filters as JSON")
