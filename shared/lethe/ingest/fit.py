"""Whether data offered in one schema fits a table's schema with nothing lost, and the data
fitted when it does.

A file brought to a table (``lethe append FILE``) either fits, and is cast to the table's
types, or is refused with a :class:`~lethe.errors.SchemaMismatch` that names every column that
differs. Nothing in between: a column the table lacks is never dropped, a value is never
narrowed, a type is never guessed down. Two kinds of input:

* **typed** (Parquet, Arrow): the file's types are what its writer declared. A type other than
  the table's fits only by the one promotion rule (:func:`lethe.catalog.schemas.fits`:
  ``int32`` -> ``int64``, ``float`` -> ``double``, ``date`` -> ``timestamp``, a wider decimal,
  Iceberg's promotions; and a finer timestamp unit, ``string`` <-> ``large_string``, a
  dictionary of the table's type, an all-null column). An int is not a float: an ``int32``
  column offered to a ``double`` one is refused (cast it first).
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
from lethe.catalog.schemas import fits
from lethe.ingest.conform import arrow_value, cast_slice, convert_values

__all__ = ["fit", "schema_problems"]


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
        if g is None or fits(g.type, f.type):
            continue
        why = "a narrowing" if fits(f.type, g.type) else "not a promotion: cast it first"
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
