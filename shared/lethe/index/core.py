"""Secondary indexes on erasure keys (DESIGN §6b, docs/format.md §3c): build, probe, plan.

An index on column ``c`` is a list of *runs* in the manifest root
(:class:`~lethe.catalog.manifest.ColumnIndex`). A run is a sorted list of immutable Parquet
*pieces* under ``index/``, each holding entries ``(value, file, pos)`` sorted by value, with
disjoint value ranges whose min/max the root records. A run covers the live files whose
``added_version`` lies in its ``covers`` ranges; a live file no run covers is simply read
the unindexed way, so a writer that does not (yet) index its files stays correct.

The modules: :mod:`~lethe.index.pieces` (the piece format), :mod:`~lethe.index.runs`
(writing runs: over new files, catching up, merging), :mod:`~lethe.index.probe` (reading the
pieces that can hold values), :mod:`~lethe.index.origins` (a spliced file's entries name its
origin), :mod:`~lethe.index.erase` (erasure reaches the index), and this one: what an index
says about a filter (:func:`index_plans`), which the reads and the deletes plan with.

Entries are never trusted beyond the snapshot: hits on files that are no longer live are
dropped, and readers still apply each file's DV.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from lethe.catalog.manifest import ColumnIndex, DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.index.origins import from_origin, index_path
from lethe.index.pieces import piece_key, value_array
from lethe.index.probe import probe
from lethe.reading.filters import Dnf
from lethe.reading.reader import FileHandle
from lethe.reading.scan import candidate_files, plan_files
from lethe.storage.store import S3Store

__all__ = ["IndexPlan", "hit_rows", "index_plan", "index_plans", "row_groups_of", "usable"]


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """What the index says about one filter in one snapshot.

    ``hits``: per indexed candidate file, the positions whose value the filter pins (a
    superset of the matching rows when the filter has other predicates; exact when
    ``exact``). ``unindexed``: candidate files no run covers (read the unindexed way)."""

    column: str
    hits: dict[str, BitMap64]
    indexed: tuple[DataFile, ...]
    unindexed: tuple[DataFile, ...]
    exact: bool


def usable(m: Snapshot, dnf: Dnf | None) -> tuple[ColumnIndex, list[Any], bool] | None:
    """The index a filter can use (every clause pins the column by ``=``/``in``), the values
    it pins, and whether the filter is exactly "column in values"."""
    if dnf is None:
        return None
    for ix in m.indexes:
        if not ix.runs:
            continue
        vals = dnf.key_values(ix.column)
        if vals is None or any(v is None for v in vals):
            continue
        if any(p.has_null for c in dnf.clauses for p in c if p.column == ix.column):
            continue
        exact = all(len(c) == 1 for c in dnf.clauses)
        return ix, vals, exact
    return None


def index_plans(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    dnfs: Sequence[Dnf | None],
    *,
    physical: Sequence[bool] | None = None,
) -> list[IndexPlan | None]:
    """Per filter, its :class:`IndexPlan` (None: the index cannot serve it). Filters on the
    same column share one probe of all their values, sorted."""
    phys = list(physical) if physical is not None else [False] * len(dnfs)
    found = [usable(m, d) for d in dnfs]
    schema = m.arrow_schema()
    by_col: dict[str, set[Any]] = {}
    for u in found:
        if u is not None:
            by_col.setdefault(u[0].column, set()).update(u[1])
    probed: dict[str, pa.Table] = {}
    for col, all_vals in by_col.items():
        ix = m.index(col)
        assert ix is not None
        probed[col] = probe(store, prefix, ix, schema.field(col).type, all_vals)
    out: list[IndexPlan | None] = []
    for dnf, u, ph in zip(dnfs, found, phys, strict=True):
        if u is None or dnf is None:
            out.append(None)
            continue
        ix, vals, exact = u
        t = schema.field(ix.column).type
        files = candidate_files(m, dnf, physical=ph)
        indexed = tuple(f for f in files if ix.covers(f))
        entries = probed[ix.column]
        mine = entries.filter(pc.is_in(entries.column("value"), value_set=value_array(vals, t)))
        hits = _hits(mine, indexed)
        unindexed = tuple(f for f in files if not ix.covers(f))
        out.append(IndexPlan(ix.column, hits, indexed, unindexed, exact))
    return out


def _hits(entries: pa.Table, indexed: Sequence[DataFile]) -> dict[str, BitMap64]:
    """Per live file of ``indexed``, the positions ``entries`` name (a spliced file's
    through its origin: removed positions dropped, the others shifted down)."""
    by_path = {index_path(f): f for f in indexed}
    found: dict[str, list[int]] = {}
    for path, pos in zip(
        entries.column("file").to_pylist(), entries.column("pos").to_pylist(), strict=True
    ):
        if path in by_path:
            found.setdefault(path, []).append(pos)
    hits: dict[str, BitMap64] = {}
    for path, pos in found.items():
        f = by_path[path]
        at = from_origin(f, np.array(pos, dtype=np.int64))
        if len(at):
            hits[f.path] = BitMap64(at)
    return hits


def row_groups_of(f: DataFile, positions: BitMap64) -> list[tuple[int, int]]:
    """``(row group, first position)`` of the groups of ``f`` holding any of ``positions``."""
    starts: list[int] = []
    first = 0
    for rg in f.row_groups:
        starts.append(first)
        first += rg.rows
    out: dict[int, int] = {}
    for p in positions:
        i = bisect.bisect_right(starts, p) - 1
        if 0 <= i < len(starts):
            out[i] = starts[i]
    return sorted(out.items())


def index_plan(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    dnf: Dnf | None,
    *,
    physical: bool = False,
) -> tuple[list[tuple[FileHandle, int, int]], dict[str, BitMap64]] | None:
    """The scan plan of ``dnf`` through an index (None: no index serves it): the row groups
    of indexed files that hold a hit, and the unindexed files planned as usual; with the
    hits (file -> positions) that let a read fetch only the pages holding them."""
    ip = index_plans(store, prefix, m, [dnf], physical=[physical])[0]
    if ip is None:
        return None
    out: list[tuple[FileHandle, int, int]] = []
    for f in ip.indexed:
        bm = ip.hits.get(f.path)
        if not bm:
            continue
        h = FileHandle(store, piece_key(store, prefix, f.path), f)
        out.extend((h, rg, first) for rg, first in row_groups_of(f, bm))
    out.extend(plan_files(store, prefix, m, list(ip.unindexed), dnf))
    return out, ip.hits


def hit_rows(hits: Mapping[str, BitMap64]) -> Any:
    """A :class:`~lethe.reading.filtered.RowFilter` ``rows`` callback: the hit positions of a file in
    ``[start, start + n)`` as row ranges relative to ``start`` (None: file not indexed)."""

    def rows(f: DataFile, start: int, n: int) -> tuple[tuple[int, int], ...] | None:
        bm = hits.get(f.path)
        if bm is None:
            return None
        return tuple((p - start, p - start + 1) for p in bm if start <= p < start + n)

    return rows
