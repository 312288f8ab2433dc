"""Whether data offered in one schema fits a table's schema with nothing lost, and the data
fitted when it does.

A file brought to a table (``lethe append FILE``) either fits, and is cast to the table's
types, or is refused with a :class:`~lethe.errors.SchemaMismatch` that names every column that
differs. Nothing in between: a column the table lacks is never dropped, a value is never
narrowed, a type is never guessed down. Two kinds of input:

* **typed** (Parquet, Arrow): the file's types are what its writer declared. A type other than
  the table's fits only as a lossless widening (``int32`` -> ``int64``, ``float`` ->
  ``double``, ``date`` -> ``timestamp``, a finer timestamp unit, a wider decimal, ``string`` <->
  ``large_string``, a dictionary of the table's type, an all-null column).
* **untyped** (CSV, JSON lines): the reader only guessed the types; every value is converted to
  the table's type with a checked cast, and the values that do not convert are counted per
  column (row numbers, never values: they may be keys of people).

>>> import pyarrow as pa
>>> table = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int32())])
>>> fit(pa.table({"id": pa.array([1], pa.int32()), "n": pa.array([2], pa.int32())}), table).schema
id: int64 not null
n: int32
>>> fit(pa.table({"id": [1], "n": [2], "country": ["NL"]}), table)
Traceback (most recent call last):
...
lethe.errors.SchemaMismatch: data does not fit the table schema: unknown columns ['country'] (the table has no such column; nothing was dropped); column 'n' is int64, the table has int32 (a narrowing)
"""

from __future__ import annotations

from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from lethe import errors
from lethe.ingest.conform import arrow_value, cast_slice, convert_values

__all__ = ["as_table_types", "fit", "same_type", "schema_problems", "widens"]

_EQUIVALENT = (
    (pa.string(), pa.large_string()),
    (pa.binary(), pa.large_binary()),
)
_UTC = {"UTC", "Etc/UTC", "+00:00", "Z"}
_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """The same type for Lethe's purposes: equal, ``string``/``large_string`` (and binary), or
    zoned timestamps of one unit whose zones both spell UTC.

    >>> same_type(pa.string(), pa.large_string()), same_type(pa.int32(), pa.int64())
    (True, False)
    """
    if a.equals(b):
        return True
    for x, y in _EQUIVALENT:
        if (a.equals(x) and b.equals(y)) or (a.equals(y) and b.equals(x)):
            return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.unit == b.unit:
        return (a.tz is None and b.tz is None) or (a.tz in _UTC and b.tz in _UTC)
    return False


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def as_table_types(file_schema: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """``file_schema`` with each type Lethe treats as the table's (``string`` and
    ``large_string``, UTC spellings) replaced by the table's, and a column the table lacks
    of a large string or binary type as ``string``/``binary`` (what a merge adds; polars
    writes large types), for :func:`lethe.catalog.evolution.merge_changes`.

    >>> got = pa.schema([("s", pa.large_string()), ("new", pa.large_string())])
    >>> as_table_types(got, pa.schema([("s", pa.string())])).types
    [DataType(string), DataType(string)]
    """
    out = []
    for f in file_schema:
        i = schema.get_field_index(f.name)
        if i < 0:
            t = next((x for x, y in _EQUIVALENT if f.type.equals(y)), None)
        else:
            t = schema.field(i).type if same_type(f.type, schema.field(i).type) else None
        out.append(f.with_type(t) if t is not None else f)
    return pa.schema(out)


def widens(got: pa.DataType, want: pa.DataType) -> bool:
    """Every value of ``got`` is exactly a value of ``want`` (a lossless widening).

    >>> widens(pa.int32(), pa.int64()), widens(pa.int64(), pa.int32())
    (True, False)
    >>> widens(pa.int32(), pa.float64()), widens(pa.int64(), pa.float64())
    (True, False)
    """
    if same_type(got, want) or pa.types.is_null(got):
        return True
    if pa.types.is_dictionary(got):
        return widens(got.value_type, want)
    if pa.types.is_integer(got) and pa.types.is_integer(want):
        lo, hi = _int_range(got)
        wlo, whi = _int_range(want)
        return wlo <= lo and hi <= whi
    if pa.types.is_integer(got) and pa.types.is_floating(want):
        mantissa = {16: 11, 32: 24, 64: 53}[want.bit_width]
        lo, hi = _int_range(got)
        return max(abs(lo), hi) <= 1 << mantissa
    if pa.types.is_floating(got) and pa.types.is_floating(want):
        return bool(got.bit_width <= want.bit_width)
    if pa.types.is_decimal(got) and pa.types.is_decimal(want):
        return bool(got.scale == want.scale and got.precision <= want.precision)
    if pa.types.is_date(got) and pa.types.is_timestamp(want):
        return want.tz is None
    if pa.types.is_timestamp(got) and pa.types.is_timestamp(want):
        zones_agree = (got.tz is None) == (want.tz is None)
        return zones_agree and _UNITS[got.unit] <= _UNITS[want.unit]
    return False


def schema_problems(got: pa.Schema, want: pa.Schema, *, typed: bool = True) -> list[str]:
    """Every way ``got`` does not fit ``want`` by name and type (empty: it fits).

    ``typed=False`` (CSV, JSON) checks names only: the types were guessed by a reader, so the
    values themselves are checked when they are converted (:func:`fit`).
    """
    problems: list[str] = []
    have = {f.name: f for f in got}
    missing = [f.name for f in want if f.name not in have]
    extra = [n for n in got.names if want.get_field_index(n) < 0]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(
            f"unknown columns {extra} (the table has no such column; nothing was dropped)"
        )
    if not typed:
        return problems
    for f in want:
        g = have.get(f.name)
        if g is None or widens(g.type, f.type):
            continue
        why = "a narrowing" if widens(f.type, g.type) else "not a lossless widening"
        problems.append(f"column {f.name!r} is {g.type}, the table has {f.type} ({why})")
    return problems


def _rows(idx: list[int], first: int = 0) -> str:
    shown = ", ".join(str(first + i) for i in idx[:5])
    return f"row {shown}" if len(idx) == 1 else f"rows {shown}{', ...' if len(idx) > 5 else ''}"


def fit(data: pa.Table, schema: pa.Schema, *, typed: bool = True, first_row: int = 0) -> pa.Table:
    """``data`` as the table's schema, or a :class:`~lethe.errors.SchemaMismatch` naming every
    column that does not fit (unknown, missing, narrowed, values that do not convert, nulls in
    a required column). Row numbers in the message count from ``first_row``; no value is
    quoted.
    """
    problems = schema_problems(data.schema, schema, typed=typed)
    if problems:
        raise errors.SchemaMismatch("data does not fit the table schema: " + "; ".join(problems))
    cols: list[pa.Array | pa.ChunkedArray] = []
    n = data.num_rows
    for f in schema:
        col = data.column(f.name)
        if not col.type.equals(f.type):
            arr = col.combine_chunks()
            if pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            conv, bad = convert_values(
                n, f.type, f.name, partial(cast_slice, arr, f.type), partial(arrow_value, arr)
            )
            if bad:
                problems.append(
                    f"column {f.name!r}: {len(bad)} values do not fit {f.type} ({_rows(sorted(bad), first_row)})"
                )
                continue
            col = conv
        if not f.nullable and col.null_count:
            idx = pc.indices_nonzero(pc.is_null(col)).to_pylist()
            problems.append(
                f"column {f.name!r} is required but has {len(idx)} nulls ({_rows(idx, first_row)})"
            )
            continue
        cols.append(col)
    if problems:
        raise errors.SchemaMismatch("data does not fit the table schema: " + "; ".join(problems))
    return pa.Table.from_arrays(cols, schema=schema)
