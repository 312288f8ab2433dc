"""Transforms of a snapshot's indexes: runs added, merged, scrubbed; indexes declared and
dropped (pure; see :mod:`lethe.index.core` for building and probing them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lethe import errors
from lethe.catalog.manifest import ColumnIndex, IndexPiece, IndexRun
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms.files import upgrade
from lethe.catalog.values import JsonScalar, is_orderable

__all__ = [
    "Merge",
    "check_indexable",
    "dead_run_pieces",
    "declare",
    "piece_paths",
    "replace_pieces",
    "undeclare",
    "with_merges",
    "with_new_runs",
    "with_runs",
    "without_dead_runs",
]


def check_indexable(schema: pa.Schema, column: str) -> pa.DataType:
    """The type of ``column`` if it can be indexed, else :class:`InvalidRequest`."""
    idx = schema.get_field_index(column)
    if idx < 0:
        raise errors.InvalidRequest(
            f"cannot index {column!r}: not a column of the table; columns are {schema.names}"
        )
    t = schema.field(idx).type
    if not is_orderable(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        raise errors.InvalidRequest(
            f"cannot index {column!r} of type {t}: indexes take integer, string, binary, "
            "decimal, date and time columns"
        )
    return t


def piece_paths(m: Snapshot) -> set[str]:
    """Every index object the root of ``m`` references."""
    return {p.path for ix in m.indexes for r in ix.runs for p in r.pieces}


@dataclass(frozen=True, slots=True)
class Merge:
    """Runs of one index rewritten as one: applies only if ``old`` are unchanged in the base
    (an erasure's scrub may have rewritten one of them meanwhile)."""

    column: str
    old: tuple[IndexRun, ...]
    new: IndexRun


def with_new_runs(
    m: Snapshot, runs: Mapping[str, IndexRun], covers: tuple[tuple[int, int], ...] | None = None
) -> Snapshot:
    """``m`` (not yet committed) with ``runs`` added to the indexes still declared in it,
    each covering ``covers`` (default: the files ``m`` itself adds). Runs of indexes ``m``
    no longer declares are left out (their objects are garbage)."""
    if not runs:
        return m
    cov = covers if covers is not None else ((m.version, m.version),)
    indexes = tuple(
        ix.model_copy(
            update={"runs": (*ix.runs, runs[ix.column].model_copy(update={"covers": cov}))}
        )
        if ix.column in runs
        else ix
        for ix in m.indexes
    )
    return m.evolve(indexes=indexes)


def with_runs(m: Snapshot, runs: Mapping[str, IndexRun]) -> Snapshot:
    """``m`` (not yet committed) with ``runs`` (their ``covers`` set) added to the indexes
    still declared in it."""
    if not runs:
        return m
    indexes = tuple(
        ix.model_copy(update={"runs": (*ix.runs, runs[ix.column])}) if ix.column in runs else ix
        for ix in m.indexes
    )
    return m.evolve(indexes=indexes)


def dead_run_pieces(m: Snapshot, dropped: Iterable[str]) -> list[str]:
    """Paths of the pieces of ``m``'s runs that cover no file left live once ``dropped``
    leave (the commit drops those runs: their pieces are superseded whole)."""
    if not any(ix.runs for ix in m.indexes):
        return []
    gone = set(dropped)
    live = {f.index_version for f in m.files if f.path not in gone}
    return [
        p.path
        for ix in m.indexes
        for r in ix.runs
        if not any(r.covers_version(v) for v in live)
        for p in r.pieces
    ]


def without_dead_runs(m: Snapshot) -> Snapshot:
    """``m`` (not yet committed) without the index runs that cover no live file (every file
    they indexed was rewritten by a compaction or dropped by a retention sweep): their
    entries can only name files that are gone, so no reader needs them; their pieces become
    unreferenced objects for GC."""
    if not any(ix.runs for ix in m.indexes):
        return m
    live = {f.index_version for f in m.files}
    changed = False
    indexes = []
    for ix in m.indexes:
        kept = tuple(r for r in ix.runs if any(r.covers_version(v) for v in live))
        changed |= len(kept) != len(ix.runs)
        indexes.append(ix.model_copy(update={"runs": kept}) if len(kept) != len(ix.runs) else ix)
    return m.evolve(indexes=tuple(indexes)) if changed else m


def with_merges(m: Snapshot, merges: Sequence[Merge]) -> Snapshot:
    """``m`` (not yet committed) with each merge applied where its runs are unchanged."""
    if not merges:
        return m
    indexes = list(m.indexes)
    for mg in merges:
        for i, ix in enumerate(indexes):
            if ix.column != mg.column or not all(r in ix.runs for r in mg.old):
                continue
            rest = tuple(r for r in ix.runs if r not in mg.old)
            indexes[i] = ix.model_copy(update={"runs": (mg.new, *rest)})
    return m.evolve(indexes=tuple(indexes))


def replace_pieces(m: Snapshot, repl: Mapping[str, tuple[IndexPiece, ...]]) -> Snapshot | None:
    """``m`` (not yet committed) with pieces replaced; None if one of them is gone from
    ``m`` (another commit rewrote it: scrub again on the new base)."""
    if not repl:
        return m
    found = piece_paths(m)
    if any(p not in found for p in repl):
        return None

    def run(r: IndexRun) -> IndexRun:
        pieces = tuple(q for p in r.pieces for q in repl.get(p.path, (p,)))
        return r.model_copy(update={"pieces": pieces})

    indexes = tuple(ix.model_copy(update={"runs": tuple(map(run, ix.runs))}) for ix in m.indexes)
    return m.evolve(indexes=indexes)


def declare(base: Snapshot, column: str, runs: Sequence[IndexRun], through: int) -> Snapshot:
    """Snapshot N+1 declaring an index on ``column`` whose first ``runs`` (the backfill of
    the files live at version ``through``) cover added versions ``[0, through]``."""
    if base.index(column) is not None:
        raise errors.InvalidRequest(f"column {column!r} is already indexed")
    check_indexable(base.arrow_schema(), column)
    nxt = upgrade(base)
    first = tuple(r.model_copy(update={"covers": ((0, through),)}) for r in runs)
    ix = ColumnIndex(column=column, created_version=nxt.version, runs=first)
    params: dict[str, JsonScalar] = {"create": column, "entries": sum(r.entries for r in first)}
    op_ = nxt.operation.model_copy(update={"kind": "index", "params": params})
    return nxt.evolve(indexes=(*base.indexes, ix), operation=op_)


def undeclare(base: Snapshot, column: str) -> Snapshot:
    """Snapshot N+1 without the index on ``column`` (its pieces become garbage)."""
    if base.index(column) is None:
        raise errors.InvalidRequest(
            f"column {column!r} is not indexed; indexes: {[ix.column for ix in base.indexes]}"
        )
    nxt = upgrade(base)
    op_ = nxt.operation.model_copy(update={"kind": "index", "params": {"drop": column}})
    keep = tuple(ix for ix in base.indexes if ix.column != column)
    return nxt.evolve(indexes=keep, operation=op_)
