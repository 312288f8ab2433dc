"""Row validation against the table schema: good rows, and rejects with reasons (never a
silent drop)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

REJECT_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("row", pa.int64()),
        pa.field("line", pa.int64()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("record", pa.string()),
    ]
)
"""One rejected row: its object, 0-based data row (when the row parsed), 1-based physical
line (CSV/JSON, when known), why it was rejected (every reason, one per line: each column
that does not fit), and the original record (JSON or raw text)."""

REASON_SEP = "\n"
"""Between the reasons of one reject (a reason is one line: values are quoted by ``repr``)."""


def reasons_of(reason: str) -> list[str]:
    """The reasons a reject's ``reason`` holds.

    >>> reasons_of("column 'a': required but missing\\nunknown column 'b' (not in the table schema)")
    ["column 'a': required but missing", "unknown column 'b' (not in the table schema)"]
    """
    return reason.split(REASON_SEP)


def add_reason(bad: dict[int, str], i: int, reason: str) -> None:
    """Record ``reason`` for row ``i`` after the ones it has (each once)."""
    have = bad.get(i)
    if have is None:
        bad[i] = reason
    elif reason not in reasons_of(have):
        bad[i] = have + REASON_SEP + reason


@dataclass(frozen=True, slots=True)
class Conformed:
    """Rows that fit the table schema (``good``, exactly that schema) and the rejected rest."""

    good: pa.Table
    rejects: pa.Table

    @property
    def rows(self) -> int:
        return int(self.good.num_rows + self.rejects.num_rows)


def short(e: Exception) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return msg if len(msg) <= 200 else msg[:197] + "..."


def _is_tz_timestamp(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) and t.tz is not None)


def _cast(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Safe cast; strings without a zone offset are read as UTC for zoned timestamp columns."""
    try:
        return pc.cast(arr, target, safe=True)
    except pa.ArrowInvalid:
        if _is_tz_timestamp(target) and (
            pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
        ):
            naive = pc.cast(arr, pa.timestamp(target.unit), safe=True)
            return pc.cast(naive, target, safe=True)
        raise


_CONVERSION_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)


def cast_slice(arr: pa.Array, target: pa.DataType, lo: int, hi: int) -> pa.Array:
    return _cast(arr.slice(lo, hi - lo), target)


def arrow_value(arr: pa.Array, i: int) -> Any:
    return arr[i].as_py()


def py_slice(values: list[Any], target: pa.DataType, lo: int, hi: int) -> pa.Array:
    return pa.array(values[lo:hi], type=target)


def _describe_value(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def convert_values(
    n: int,
    target: pa.DataType,
    name: str,
    make: Callable[[int, int], pa.Array],
    value_at: Callable[[int], Any],
    shown: pa.DataType | None = None,
) -> tuple[pa.Array, dict[int, str]]:
    """``n`` values converted to ``target``; values that do not convert become null + a reason.

    ``make(lo, hi)`` converts the slice ``[lo, hi)``. The whole column is converted at once;
    only when that fails is the failing range bisected (vectorized halves), so clean data costs
    one conversion and dirty data O(bad x log n) conversions. ``value_at(i)`` is used only to
    describe a bad value in its reason, which names ``shown`` (the column's type, when the
    reader converts to another first) or ``target``.
    """
    bad: dict[int, str] = {}

    def why(i: int, e: Exception) -> str:
        return (
            f"column {name!r}: cannot convert {_describe_value(value_at(i))} to "
            f"{shown or target} "
            f"({short(e)})"
        )

    def go(lo: int, hi: int) -> list[pa.Array]:
        try:
            return [make(lo, hi)]
        except _CONVERSION_ERRORS as e:
            if hi - lo == 1:
                bad[lo] = why(lo, e)
                return [pa.nulls(1, type=target)]
            if isinstance(e, pa.ArrowNotImplementedError):  # no conversion at all
                for i in range(lo, hi):
                    if value_at(i) is not None:
                        bad[i] = why(i, e)
                return [pa.nulls(hi - lo, type=target)]
            mid = (lo + hi) // 2
            return go(lo, mid) + go(mid, hi)

    if n == 0:
        return pa.array([], type=target), bad
    pieces = go(0, n)
    return (pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)), bad


@dataclass(frozen=True, slots=True)
class Lines:
    """Where the rows stand in a text object (JSON lines), for their rejects.

    Attributes:
        first: Physical line of the first row when each row is one line.
        each: Physical line of each row, when known (overrides ``first``).
        records: The original text of each row; otherwise rejects carry the raw row as JSON.
    """

    first: int | None = None
    each: Sequence[int | None] | None = None
    records: Sequence[str] | None = None

    def of(self, idx: Sequence[int]) -> list[int | None]:
        """The physical lines of the rows ``idx`` (None when not known)."""
        if self.each is not None:
            return [self.each[i] for i in idx]
        if self.first is not None:
            return [self.first + i for i in idx]
        return [None] * len(idx)


def conform(
    raw: pa.Table,
    schema: pa.Schema,
    *,
    source: str,
    first_row: int = 0,
    lines: Lines = Lines(),
    pre_bad: Mapping[int, str] | None = None,
    unparsed: Mapping[int, str] | None = None,
) -> Conformed:
    """Validate ``raw`` against ``schema``: convert every column, reject what does not fit.

    A row is rejected when a value does not convert to its column's type, when a required
    (non-nullable) column is null or missing, or when it has a value in a column the table does
    not have. Missing nullable columns are filled with nulls. Each reject carries every reason
    found for it (:func:`reasons_of`): each column of the row that does not fit.

    Args:
        raw: The rows as read (any column types; CSV gives strings).
        schema: The table schema.
        source: The object URI, recorded with each reject.
        first_row: Data-row number of ``raw``'s first row within its object.
        lines: Where the rows stand in a text object, and their original text (JSON lines).
        pre_bad: Rows already known to be bad (index -> reason), e.g. a value the reader
            could not convert.
        unparsed: Rows the reader could not parse (index -> reason, e.g. not valid JSON):
            that reason alone.
    """
    n = raw.num_rows
    bad: dict[int, str] = dict(pre_bad or {})
    cols, column_reasons = _columns(raw, schema, bad)
    for reasons in (column_reasons, _unknown_columns(raw, schema)):
        for i, r in reasons.items():
            add_reason(bad, i, r)
    bad |= unparsed or {}
    good = pa.Table.from_arrays(cols, schema=schema) if n else schema.empty_table()
    if not bad:
        return Conformed(good, REJECT_SCHEMA.empty_table())
    idx = sorted(bad)
    keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=pa.array(idx, pa.int64())))
    rejects = _rejects(raw, {i: bad[i] for i in idx}, source, first_row, lines)
    return Conformed(good.filter(keep), rejects)


def _columns(
    raw: pa.Table, schema: pa.Schema, known: Mapping[int, str]
) -> tuple[list[pa.Array], dict[int, str]]:
    """Every column of ``schema`` from ``raw``, converted (a missing one as nulls), and the
    reasons of each row that does not fit (one per column, schema order; ``known``: reasons
    found by the reader, a value it could not convert)."""
    n = raw.num_rows
    bad: dict[int, str] = {}
    cols: list[pa.Array] = []
    present = set(raw.column_names)
    for f in schema:
        if f.name not in present:
            if not f.nullable:
                for i in range(n):
                    add_reason(bad, i, f"column {f.name!r}: required but missing")
            cols.append(pa.nulls(n, type=f.type))
            continue
        arr = raw.column(f.name).combine_chunks()
        why: dict[int, str] = {}
        if arr.type.equals(f.type):
            conv = arr
        else:
            conv, why = convert_values(
                n, f.type, f.name, partial(cast_slice, arr, f.type), partial(arrow_value, arr)
            )
        for i, r in why.items():
            add_reason(bad, i, r)
        if not f.nullable and conv.null_count:
            said = f"column {f.name!r}: "
            for i in pc.indices_nonzero(pc.is_null(conv)).to_pylist():
                if i not in why and said not in known.get(i, ""):  # a value did not convert
                    add_reason(bad, i, f"column {f.name!r}: required but missing")
        cols.append(conv)
    return cols, bad


def _unknown_columns(raw: pa.Table, schema: pa.Schema) -> dict[int, str]:
    """Rows with a value in a column the table does not have."""
    bad: dict[int, str] = {}
    for name in raw.column_names:
        if schema.get_field_index(name) >= 0:
            continue
        arr = raw.column(name)
        if arr.null_count < raw.num_rows:
            for i in pc.indices_nonzero(pc.is_valid(arr)).to_pylist():
                add_reason(bad, i, f"unknown column {name!r} (not in the table schema)")
    return bad


def _rejects(
    raw: pa.Table, reasons: Mapping[int, str], source: str, first_row: int, lines: Lines
) -> pa.Table:
    """The rejected rows (``reasons``: row index -> reason, ascending) as :data:`REJECT_SCHEMA`."""
    idx = list(reasons)
    if lines.records is not None:
        recs: list[str | None] = [lines.records[i] for i in idx]
    else:
        rows = raw.take(pa.array(idx, pa.int64())).to_pylist()
        recs = [json.dumps(r, default=str, ensure_ascii=False) for r in rows]
    return _reject_table(
        source,
        pa.array([first_row + i for i in idx], pa.int64()),
        lines.of(idx),
        [reasons[i] for i in idx],
        recs,
    )


def _reject_table(
    source: str,
    rows: pa.Array,
    lines: Sequence[int | None],
    reasons: Sequence[str],
    records: Sequence[str | None],
) -> pa.Table:
    return pa.table(
        {
            "source": pa.array([source] * len(reasons), pa.string()),
            "row": rows,
            "line": pa.array(lines, pa.int64()),
            "reason": pa.array(reasons, pa.string()),
            "record": pa.array(records, pa.string()),
        },
        schema=REJECT_SCHEMA,
    )


def structural_rejects(source: str, items: Sequence[tuple[int | None, str, str]]) -> pa.Table:
    """Rejects for rows that could not even be split into fields (line, reason, text)."""
    return _reject_table(
        source,
        pa.nulls(len(items), pa.int64()),
        [i[0] for i in items],
        [i[1] for i in items],
        [i[2] for i in items],
    )
