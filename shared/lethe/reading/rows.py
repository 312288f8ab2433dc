"""A snapshot's rows: the read path behind ``Table.scan``, ``to_batches`` and ``lookup``.

:func:`plan_rows` picks the row groups that may hold matching rows (through a secondary
index when one serves the filter, else by the manifest's statistics, :func:`lethe.reading.scan.plan`);
:func:`batches` reads them (:func:`rows_reader` as a stream) (only the needed column chunks, or pages with a selective
filter) with each file's DV applied, prefetching a few row groups ahead. Compaction reads
its sources through the same path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from lethe import errors
from lethe.catalog.context import TableContext
from lethe.catalog.schemas import Projection
from lethe.catalog.snapshot import Snapshot
from lethe.dv.lineage import at_version
from lethe.index.core import hit_rows, index_plan
from lethe.reading.filtered import RowFilter, read_filtered
from lethe.reading.filters import Dnf, normalize
from lethe.reading.reader import FileHandle, iter_row_groups
from lethe.reading.scan import DVCache, Projections, plan
from lethe.reading.where import parse_dnf
from lethe.storage.store import S3Store

__all__ = [
    "arrow_reader",
    "batches",
    "handles",
    "plan_rows",
    "projected",
    "read_planned",
    "rows_reader",
    "units_of",
]

Planned = list[tuple[FileHandle, int, int]]


def plan_rows(
    store: S3Store, prefix: str, snap: Snapshot, dnf: Dnf | None, *, physical: bool = False
) -> tuple[Planned, Callable[..., Any] | None]:
    """``(file, row group, first row position)`` that may hold rows matching ``dnf``, and the
    :class:`~lethe.reading.filtered.RowFilter` ``rows`` callback of an index's hits (None: no index
    served ``dnf``)."""
    via = index_plan(store, prefix, snap, dnf, physical=physical)
    if via is not None:
        return via[0], hit_rows(via[1])
    return plan(store, prefix, snap, dnf, physical=physical), None


def batches(
    store: S3Store,
    prefix: str,
    snap: Snapshot,
    out_schema: pa.Schema,
    dnf: Dnf | None,
    *,
    page_index: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``snap`` matching ``dnf`` (DVs applied), as ``out_schema``."""
    items, rows = plan_rows(store, prefix, snap, dnf)  # lazily: on the first batch asked for
    yield from read_planned(
        store, prefix, snap, items, out_schema, dnf, rows, page_index=page_index
    )


def projected(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """``schema`` projected to ``columns`` (all when None).

    Raises:
        InvalidRequest: a column is not in ``schema``.
    """
    if columns is None:
        return schema
    bad = [c for c in columns if schema.get_field_index(c) < 0]
    if bad:
        raise errors.InvalidRequest(f"unknown columns {bad}; columns are {schema.names}")
    return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)


def rows_reader(
    ctx: TableContext,
    columns: Sequence[str] | None = None,
    filters: Any = None,
    *,
    page_index: bool = True,
) -> pa.RecordBatchReader:
    """The rows of ``ctx``'s snapshot (DVs applied) projected to ``columns`` and matching
    ``filters`` (DNF, :func:`lethe.reading.filters.normalize`), as a stream."""
    schema = ctx.schema
    out = projected(schema, columns)
    dnf = normalize(filters, schema) if filters is not None else None
    rows = batches(ctx.store, ctx.prefix, ctx.snapshot, out, dnf, page_index=page_index)
    return pa.RecordBatchReader.from_batches(out, rows)


def arrow_reader(
    ctx: TableContext, columns: Sequence[str] | None, filters: Any, version: int | None
) -> pa.RecordBatchReader:
    """:func:`rows_reader` for other engines (``Table.to_arrow_reader``): ``filters`` may be
    ``--where`` text (:mod:`lethe.reading.where`), ``version`` another snapshot of the
    table, and the stream holds at least one batch (``pl.from_arrow`` needs one)."""
    if isinstance(filters, str):
        filters = parse_dnf(filters)
    if version is not None and version != ctx.snapshot.version:
        ctx = TableContext(ctx.catalog, at_version(ctx.catalog, version))
    reader = rows_reader(ctx, columns, filters)

    def at_least_one() -> Iterator[pa.RecordBatch]:
        seen = False
        for b in reader:
            seen = True
            yield b
        if not seen:
            yield pa.RecordBatch.from_pylist([], schema=reader.schema)

    return pa.RecordBatchReader.from_batches(reader.schema, at_least_one())


def units_of(items: Planned) -> list[tuple[str, int, int]]:
    """``(DataFile JSON, row group, first position)`` of planned row groups: a plan that
    travels (to Spark executors) and comes back through :func:`handles`."""
    return [(h.file.model_dump_json(), rg, first) for h, rg, first in items]


def handles(store: S3Store, prefix: str, units: list[tuple[str, int, int]]) -> Planned:
    """The planned row groups :func:`units_of` described, as handles (no manifest read)."""
    from lethe.catalog.manifest import DataFile
    from lethe.storage.layout import object_key

    made: dict[str, FileHandle] = {}
    out: Planned = []
    for raw, rg, first in units:
        h = made.get(raw)
        if h is None:
            f = DataFile.model_validate_json(raw)
            h = made[raw] = FileHandle(store, object_key(prefix, f.path), f)
        out.append((h, rg, first))
    return out


def read_planned(
    store: S3Store,
    prefix: str,
    snap: Snapshot,
    items: Planned,
    out_schema: pa.Schema,
    dnf: Dnf | None,
    rows: Callable[..., Any] | None = None,
    *,
    page_index: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The rows of the planned row groups ``items`` of ``snap`` matching ``dnf`` (DVs
    applied), as ``out_schema``; ``rows``: an index's hit callback (:func:`plan_rows`)."""
    out_cols = out_schema.names
    dvs = DVCache(store, prefix)
    dvs.prefetch({h.file.path: h.file for h, _, _ in items}.values())
    rf = RowFilter.of(dnf, snap.arrow_schema(), dvs.keep_mask, rows)
    starts = {(h.file.path, rg): first for h, rg, first in items}
    projections = Projections(snap)
    unfiltered = RowFilter.of(None, rf.schema, dvs.keep_mask, rows)
    wanted = list(dict.fromkeys([*out_cols, *(dnf.columns if dnf else [])]))

    def read(h: FileHandle, rg: int) -> pa.Table:
        first = starts[(h.file.path, rg)]
        p = projections.of(h.file)
        if p is None:
            return read_filtered(h, rg, first, out_cols, rf, page_index=page_index)
        if h.file.file_names:  # adopted: a union schema's columns it may not hold
            p = p.within(h.tail().schema)
        # a file of another schema: its columns by id, renamed, widened, missing ones filled
        if dnf is not None and _same(p, dnf.columns):  # the filter reads as written: pages
            own = RowFilter.of(dnf, projections.file_schema(h.file), dvs.keep_mask, rows)
            got = read_filtered(h, rg, first, p.file_columns(out_cols), own, page_index=page_index)
            return p.apply(got, out_cols)
        t = p.apply(read_filtered(h, rg, first, p.file_columns(wanted), unfiltered), wanted)
        return (t.filter(rf.expression) if rf.expression is not None else t).select(out_cols)

    pairs = [(h, rg) for h, rg, _ in items]
    for _h, _rg, t in iter_row_groups(pairs, out_cols, read=read):
        if t.num_rows == 0:
            continue
        if t.schema != out_schema:
            t = t.cast(out_schema)
        yield from t.to_batches()


def _same(p: Projection, columns: list[str]) -> bool:
    """Whether every column of ``columns`` is in the file under its name and type."""
    return all(
        p.file_column(c) == c
        and (t := p.file_type(c)) is not None
        and t.equals(p.target.field(c).type)
        for c in columns
    )
