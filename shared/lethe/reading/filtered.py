"""Filtered reads of one row group: page level through the page index, else whole groups.

Selective filters read pages, not chunks (:func:`read_pages`): the page index (ColumnIndex
and OffsetIndex, :class:`~lethe.reading.footers.PageIndex`) names the pages of the filter
columns that can hold a match; those pages are fetched and decoded (see
:mod:`lethe.parquet.pages`), the DV and the filter applied, and only then the pages of the
other columns that hold the matching rows. A warm point lookup thus downloads a few pages
per column in two rounds of parallel GETs instead of the row group's chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lethe.catalog.manifest import DataFile
from lethe.dv.rowdrop import drop_rows
from lethe.parquet import model as pqm
from lethe.parquet import pages
from lethe.reading.filters import Dnf, Predicate
from lethe.reading.footers import PageIndex
from lethe.reading.reader import FileHandle, read_row_group

log = logging.getLogger(__name__)

__all__ = ["RowFilter", "read_filtered", "read_pages", "read_positions"]

PAGE_COALESCE_GAP = 256 << 10
"""Page reads merge ranges closer than this (smaller than for chunks: pages are small)."""
PAGE_READ_MAX_FRACTION = 0.5
"""Page-level reads only when the candidate rows are at most this share of the group."""


@dataclass(frozen=True, slots=True)
class RowFilter:
    """What a read keeps: rows not in the DV that match the filter.

    Attributes:
        dnf: The filter (pages are chosen by its predicates), or None for all rows.
        schema: The table's schema (column types for the page bounds).
        keep: DV keep mask of rows ``[start, start + n)`` of a file, None when none is deleted.
        expression: ``dnf``'s expression (rows are chosen by it).
        rows: Candidate rows ``[start, start + n)`` of a file known beforehand (from a
            secondary index), relative to ``start``; None: not known.
    """

    dnf: Dnf | None
    schema: pa.Schema
    keep: Callable[[DataFile, int, int], pa.Array | None]
    expression: pc.Expression | None = None
    rows: Callable[[DataFile, int, int], pages.Ranges | None] | None = None

    @classmethod
    def of(
        cls,
        dnf: Dnf | None,
        schema: pa.Schema,
        keep: Callable[[DataFile, int, int], pa.Array | None],
        rows: Callable[[DataFile, int, int], pages.Ranges | None] | None = None,
    ) -> RowFilter:
        return cls(dnf, schema, keep, dnf.expression() if dnf is not None else None, rows)


def read_filtered(
    handle: FileHandle,
    rg: int,
    first_row: int,
    columns: Sequence[str],
    rf: RowFilter,
    *,
    page_index: bool = True,
) -> pa.Table:
    """The rows of row group ``rg`` (whose first row is ``first_row`` of the file) that
    ``rf`` keeps, projected to ``columns``.

    With a filter and ``page_index``, only the pages that can hold matching rows are read
    (:func:`read_pages`); otherwise, or when that does not apply, the group's chunks.
    """
    if page_index and rf.dnf is not None:
        got = read_pages(handle, rg, first_row, columns, rf)
        if got is not None:
            return got
    cols = list(dict.fromkeys([*columns, *(rf.dnf.columns if rf.dnf else [])]))
    ft = handle.tail()
    t = read_row_group(handle, ft, rg, cols, handle.prefetch(ft, rg, cols))
    mask = rf.keep(handle.file, first_row, t.num_rows)
    if mask is not None:
        t = drop_rows(t, mask)
    if rf.expression is not None:
        t = t.filter(rf.expression)
    return t.select(list(columns))


@dataclass(frozen=True, slots=True)
class _PagePlan:
    layouts: dict[str, pages.ChunkLayout]
    candidates: pages.Ranges


def read_pages(
    handle: FileHandle, rg: int, first_row: int, columns: Sequence[str], rf: RowFilter
) -> pa.Table | None:
    """:func:`read_filtered` through the page index; None when page level does not apply.

    The filter columns' ColumnIndexes give the candidate rows; their pages overlapping
    those rows (with the dictionary page when one of them needs it) are fetched, decoded
    and filtered (DV, then expression); then the other columns' pages overlapping the
    matching rows. It does not apply without a page index, to nested or repeated columns,
    or when the candidates are more than :data:`PAGE_READ_MAX_FRACTION` of the group.
    """
    assert rf.dnf is not None
    pi = handle.page_index(handle.tail())
    if pi is None:
        return None
    known = rf.rows(handle.file, first_row, pi.num_rows(rg)) if rf.rows is not None else None
    plan = _plan_pages(pi, rg, columns, rf.dnf, rf.schema, known)
    if plan is None:
        return None
    try:
        return _read_planned(handle, pi, rg, first_row, columns, rf, plan)
    except (pqm.InvalidParquet, pa.ArrowException) as e:
        log.warning(
            "page-level read of %s row group %s fell back to the whole group (%s)",
            handle.key,
            rg,
            type(e).__name__,
        )
        return None


def _plan_pages(
    pi: PageIndex,
    rg: int,
    columns: Sequence[str],
    dnf: Dnf,
    schema: pa.Schema,
    known: pages.Ranges | None = None,
) -> _PagePlan | None:
    layouts: dict[str, pages.ChunkLayout] = {}
    for c in dict.fromkeys([*dnf.columns, *columns]):
        leaf = pi.leaf(c)
        layout = pi.layout(rg, leaf) if leaf is not None else None
        if layout is None:
            return None
        layouts[c] = layout
    n = pi.num_rows(rg)
    full: pages.Ranges = ((0, n),) if known is None else known
    cand: pages.Ranges = ()
    for clause in dnf.clauses:
        rows = full
        for p in clause:
            layout = layouts[p.column]
            bounds = pi.bounds(rg, layout.column, schema.field(p.column).type)
            if bounds is None or len(bounds) != len(layout.pages):
                continue
            hits = tuple(
                (s.first_row, s.end_row)
                for s, b in zip(layout.pages, bounds, strict=True)
                if _page_may_match(p, b)
            )
            rows = pages.intersect(rows, pages.union(hits))
        cand = pages.union(cand, rows)
    if pages.count(cand) > PAGE_READ_MAX_FRACTION * n:
        return None
    return _PagePlan(layouts, cand)


def _page_may_match(p: Predicate, b: pages.PageBound) -> bool:
    """Whether a page with bounds ``b`` may hold a row matching ``p`` (nulls included:
    pyarrow's ``not in`` keeps nulls, and ``in`` with a None member matches them)."""
    nulls_match = (p.op == "in" and p.has_null) or (p.op == "not in" and not p.has_null)
    if nulls_match and (b.all_null or b.null_count is None or b.null_count > 0):
        return True
    if b.all_null:
        return False
    return p.may_match((b.lo, b.hi, b.null_count))


def _row_name(names: Sequence[str]) -> str:
    name = "__lethe_row"
    while name in names:
        name += "_"
    return name


def _read_planned(
    handle: FileHandle,
    pi: PageIndex,
    rg: int,
    first_row: int,
    columns: Sequence[str],
    rf: RowFilter,
    plan: _PagePlan,
) -> pa.Table:
    assert rf.dnf is not None and rf.expression is not None
    out_schema = pa.schema([rf.schema.field(c) for c in columns])
    if not plan.candidates:
        return out_schema.empty_table()
    fcols = rf.dnf.columns
    # columns whose pages over the candidates are few come along now (one round fewer)
    cheap = [c for c in columns if c not in fcols and _cheap(plan.layouts[c], plan.candidates)]
    first = {c: plan.layouts[c] for c in [*fcols, *cheap]}
    got = _read_columns(handle, pi, rg, first, plan.candidates)
    row = _row_name(rf.schema.names)
    rows = _row_indices(plan.candidates)
    t = pa.table({**got, row: pa.array(rows)})
    mask = _dv_mask(rf, handle.file, first_row, plan.candidates)
    if mask is not None:
        t = t.filter(mask)
    t = t.filter(rf.expression)
    rest = [c for c in columns if c not in got]
    if not t.num_rows:
        return out_schema.empty_table()
    if rest:
        matched = t.column(row).to_numpy()
        more = _read_columns(
            handle, pi, rg, {c: plan.layouts[c] for c in rest}, pages.runs(matched)
        )
        return pa.table({c: more[c] if c in more else t.column(c) for c in columns})
    return t.select(list(columns))


def _cheap(layout: pages.ChunkLayout, rows: pages.Ranges) -> bool:
    """Whether reading a column's pages over ``rows`` costs little more than over a few of
    them (then it is read with the filter columns instead of in a second round)."""
    return sum(p.size for p in layout.overlapping(rows)) <= PAGE_COALESCE_GAP


def _row_indices(ranges: pages.Ranges) -> Any:
    return np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in ranges])


def _dv_mask(rf: RowFilter, f: DataFile, first_row: int, ranges: pages.Ranges) -> pa.Array | None:
    parts = [rf.keep(f, first_row + s, e - s) for s, e in ranges]
    if all(m is None for m in parts):
        return None
    return pa.concat_arrays(
        [
            m if m is not None else pa.array(np.ones(e - s, dtype=bool))
            for m, (s, e) in zip(parts, ranges, strict=True)
        ]
    )


def _read_columns(
    handle: FileHandle,
    pi: PageIndex,
    rg: int,
    layouts: dict[str, pages.ChunkLayout],
    rows: pages.Ranges,
) -> dict[str, pa.ChunkedArray]:
    """The values of ``rows`` (in order) of each column, read from the pages holding them."""
    chosen = {c: layout.overlapping(rows) for c, layout in layouts.items()}
    spans: list[tuple[int, int]] = []
    for c, ps in chosen.items():
        spans += [(p.offset, p.offset + p.size) for p in ps]
        d = layouts[c].dictionary
        if d is not None and layouts[c].predicts_dictionary(ps):
            spans.append((d.start, d.end))
    sparse = handle.fetch_ranges(handle.tail(), spans, gap=PAGE_COALESCE_GAP)
    wanted = _row_indices(rows)
    out: dict[str, pa.ChunkedArray] = {}
    for c, ps in chosen.items():
        layout = layouts[c]
        raw = [sparse.read_at(p.offset, p.size) for p in ps]
        d = layout.dictionary
        dictionary = None
        if d is not None and (layout.predicts_dictionary(ps) or pages.dictionary_needed(raw)):
            dictionary = sparse.read_at(d.start, d.length)  # a GET only if mispredicted
        file = pages.chunk_file(
            pi.schema(layout.column),
            pi.chunk(rg, layout.column),
            dictionary,
            raw,
            [p.rows for p in ps],
        )
        values = pages.decode_chunk(file)
        pos = pages.positions(ps, wanted)
        out[c] = values if len(pos) == len(values) else values.take(pa.array(pos))
    return out


def read_positions(handle: FileHandle, columns: Sequence[str], positions: Any) -> pa.Table:
    """The values of ``columns`` at ``positions`` (sorted, distinct; deleted rows included)
    of the file, in position order: per row group holding some, only the pages holding them
    when the page index allows, else the group's chunks."""
    tail, pos = handle.tail(), np.asarray(positions, dtype=np.int64)
    pi, parts, first = handle.page_index(tail), [], 0
    full = tail.arrow.schema.to_arrow_schema()
    schema = pa.schema([full.field(c) for c in columns])
    for rg in range(tail.arrow.num_row_groups):
        n = tail.arrow.row_group(rg).num_rows
        mine = pos[(pos >= first) & (pos < first + n)] - first
        first += n
        if not len(mine):
            continue
        leaves = {c: pi.leaf(c) for c in columns} if pi is not None else {}
        lay = {c: pi.layout(rg, lf) for c, lf in leaves.items() if pi and lf is not None}
        if pi is not None and len(lay) == len(columns) and all(lay.values()):
            try:
                got = _read_columns(handle, pi, rg, lay, pages.runs(mine))  # type: ignore[arg-type]
                parts.append(pa.table({c: got[c] for c in columns}).cast(schema))
                continue
            except (pqm.InvalidParquet, pa.ArrowException):
                pass  # the group's chunks below
        t = read_row_group(handle, tail, rg, columns, handle.prefetch(tail, rg, columns))
        parts.append(t.take(pa.array(mine)).cast(schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()
