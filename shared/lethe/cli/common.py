"""What every ``lethe`` command shares: filter arguments, local files, table printing."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.reading.where import Dnf, and_dnf, parse_dnf

if TYPE_CHECKING:  # pyarrow loads with the first command that reads or writes rows
    import pyarrow as pa

    from lethe.ingest.inputs import Format

__all__ = [
    "FORMATS",
    "add_at_version",
    "add_filters",
    "filters",
    "local_format",
    "non_negative",
    "open_out",
    "out_format",
    "parse_where",
    "print_receipts",
    "print_table",
    "read_schema_file",
    "write_rows",
]


def parse_where(expr: str) -> tuple[str, str, Any]:
    """Parse one comparison ``"col op value"`` (see :mod:`lethe.reading.where` for the grammar).

    >>> parse_where("id in [1, 2]")
    ('id', 'in', [1, 2])
    >>> parse_where("name = bob")
    ('name', '=', 'bob')

    ``is null`` and ``is not null`` become ``in [None]`` and ``not in [None]`` (pyarrow's
    ``isin`` matches a null member against null rows):

    >>> parse_where("email is null"), parse_where("email IS NOT NULL")
    (('email', 'in', [None]), ('email', 'not in', [None]))
    """
    dnf = parse_dnf(expr)
    if len(dnf) != 1 or len(dnf[0]) != 1:
        raise errors.InvalidRequest(
            f"--where {expr!r} is more than one comparison; parse it with lethe.reading.where.parse_dnf"
        )
    return dnf[0][0]


def filters(args: argparse.Namespace) -> Any:
    if getattr(args, "filters", None):
        try:
            return json.loads(args.filters)
        except json.JSONDecodeError as e:
            raise errors.InvalidRequest(f"--filters is not JSON: {e}") from e
    if getattr(args, "where", None):
        dnf: Dnf = [[]]  # repeated --where: ANDed
        for w in args.where:
            dnf = and_dnf(dnf, parse_dnf(w))
        return dnf[0] if len(dnf) == 1 else dnf
    return None


def local_format(path: str) -> Format:
    """The format a local file's name says; InvalidRequest when it says none."""
    from lethe.ingest.inputs import detect_format

    fmt = detect_format(path)
    if fmt is None:
        raise errors.InvalidRequest(
            f"cannot tell the format of {path} from its name; use .parquet, .csv or .jsonl"
        )
    return fmt


def read_schema_file(path: str) -> pa.Schema:
    """The schema of a local Parquet, CSV or JSON-lines file (CSV and JSON types inferred as
    pyarrow infers them).

    Raises:
        InvalidRequest: a missing or unreadable file, an unknown extension, or bytes that are
            not of the format the name says (with the reader's first line of reason).
    """
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    fmt = local_format(path)
    if not Path(path).is_file():
        raise errors.InvalidRequest(f"no such file: {path}")
    try:
        if fmt == "parquet":
            return pq.read_schema(path)
        if fmt == "csv":
            return pacsv.read_csv(path).schema
        import pyarrow.json as pajson

        return pajson.read_json(path).schema
    except (pa.ArrowException, OSError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise errors.InvalidRequest(f"cannot read {path} as {fmt}: {reason}") from e


OUT_FORMATS = {"csv": "csv", "jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl"} | {
    "parquet": "parquet",
    "pq": "parquet",
}


def out_format(path: str, fmt: str | None) -> str:
    """The format ``--out path`` is written in: ``--format`` when given, else the extension;
    an extension that names no format is refused (``x.txt`` once got Parquet bytes)."""
    if fmt is not None:
        if fmt == "table":
            raise errors.InvalidRequest(
                "--format table prints; use csv, jsonl or parquet with --out"
            )
        return fmt
    ext = path.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in path else ""
    if ext not in OUT_FORMATS:
        raise errors.InvalidRequest(
            f"cannot tell the format of --out {path} from its name; name it .csv, .jsonl or "
            ".parquet, or give --format csv|jsonl|parquet"
        )
    return OUT_FORMATS[ext]


def open_out(path: str) -> Any:
    """``path`` opened for writing, or a clear error (no such folder, not writable)."""
    try:
        return open(path, "wb")
    except OSError as e:
        raise errors.InvalidRequest(
            f"cannot write --out {path}: {e.strerror or type(e).__name__}"
        ) from e


def non_negative(text: str) -> int:
    """An argparse type: an integer >= 0 (``--limit -1`` once printed "showing -1")."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative; give 0 or more")
    return n


FORMATS = ("table", "csv", "jsonl", "parquet")


def write_rows(t: pa.Table, fmt: str, out: Any) -> None:
    """``t`` to the binary stream ``out`` as CSV (with a header), JSON lines (one object per
    row; timestamps ISO 8601, bytes as base64) or Parquet."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

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


def print_receipts(receipts: Sequence[Any], as_json: bool) -> None:
    """Print receipts (a table's or a lake's): a JSON list, or each one described."""
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in receipts], indent=2))
        return
    for r in receipts:
        print(r.describe())
    if not receipts:
        print("no matching requests")


def print_table(t: pa.Table, limit: int) -> None:
    shown = t.slice(0, limit)
    cols = shown.column_names
    rows = [[("" if v is None else str(v)) for v in r.values()] for r in shown.to_pylist()]
    widths = [max([len(c)] + [min(40, len(r[i])) for r in rows]) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(v[:40].ljust(w) for v, w in zip(r, widths, strict=True)))
    print(f"({t.num_rows} rows{', showing ' + str(limit) if t.num_rows > limit else ''})")


def add_at_version(c: argparse.ArgumentParser, what: str) -> None:
    """``--at-version N`` (a table version; ``--version`` kept as its old spelling)."""
    c.add_argument("--at-version", "--version", dest="version", type=int, help=what)


def add_filters(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--where",
        action="append",
        help="'column op value', joined by and / or with parentheses "
        "(\"email = 'a@x.com' or customer_id = 601\"); repeat to AND; quote values with spaces",
    )
    c.add_argument("--filters", help="pyarrow DNF filters as JSON")


def add_command(
    sub: Any,
    name: str,
    help: str,
    *positionals: str,
    actions: Sequence[str] = (),
    description: str | None = None,
    fn: Any = None,
) -> argparse.ArgumentParser:
    """The (sub)command ``name`` of a ``lethe`` parser, run by ``fn``: an ``action`` among
    ``actions`` first when given, then the ``positionals``."""
    c: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    if actions:
        c.add_argument("action", choices=actions)
    for p in positionals:
        c.add_argument(p)
    if fn is not None:
        c.set_defaults(fn=fn)
    return c
