"""Where rows land after an order-preserving rewrite (pure: no I/O).

Compaction (:mod:`lethe.maintenance.compaction`) rewrites a group of source files, live rows in file and
row order, into output files. Row ``p`` of source ``s`` that was live when the plan was made
lands at ``offset(s) + p - |dv_at_plan(s) ∩ [0, p)|`` of the concatenated outputs, where
``offset(s)`` is the live-row count of the sources before ``s``. Through that map, deletes
that reached a source after the plan become DVs of the outputs (:func:`map_deletes`), and
pending erasures that named a source move to the outputs' row groups or are met
(:func:`update_erasures`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.manifest import DataFile, ErasureTarget
from lethe.catalog.snapshot import Snapshot
from lethe.dv.blob import b64_of, bitmap_from_positions, rebase_positions

__all__ = [
    "group_rows",
    "map_deletes",
    "mapped_positions",
    "positions_of",
    "row_groups_of",
    "split_positions",
    "targets_of",
]


def positions_of(bm: BitMap64) -> npt.NDArray[np.uint64]:
    """The positions of ``bm`` as a uint64 array, ascending."""
    return np.frombuffer(bm.to_array(), dtype=np.uint64)


def mapped_positions(
    sources: Sequence[tuple[int, BitMap64, BitMap64]], output_rows: Sequence[int]
) -> list[npt.NDArray[np.uint64]]:
    """Per source, the group-output positions of the rows deleted since the plan."""
    offset = 0
    out: list[npt.NDArray[np.uint64]] = []
    for rows, old, now in sources:
        if not old.issubset(now):
            raise errors.CommitConflict(
                "a deletion vector lost positions while compacting; refusing to map it"
            )
        if now and now.max() >= rows:
            raise errors.CommitConflict("a deletion vector names a row beyond its file")
        delta = now - old
        pos = positions_of(rebase_positions(delta, old)) if delta else np.empty(0, np.uint64)
        out.append(pos + np.uint64(offset))
        offset += rows - len(old)
    if offset != sum(output_rows):
        raise errors.CommitConflict(
            f"compaction outputs hold {sum(output_rows)} rows, the sources had {offset} live"
        )
    return out


def split_positions(pos: npt.NDArray[np.uint64], output_rows: Sequence[int]) -> list[BitMap64]:
    """Group-output positions ``pos`` (ascending) as one bitmap per output file."""
    out = [BitMap64() for _ in output_rows]
    if pos.size == 0:
        return out
    bounds = np.cumsum([0, *output_rows]).astype(np.uint64)
    which = np.searchsorted(bounds, pos, side="right") - 1
    for j in np.unique(which):
        out[int(j)] = bitmap_from_positions(pos[which == j] - bounds[j])
    return out


def map_deletes(
    sources: Sequence[tuple[int, BitMap64, BitMap64]], output_rows: Sequence[int]
) -> list[BitMap64]:
    """Map deletes that landed on a group's sources after the rewrite onto its outputs.

    The rewrite is order-preserving, so a row ``p`` of source ``s`` that was live at plan time
    is row ``offset(s) + p - |dv_at_plan(s) ∩ [0, p)|`` of the concatenated outputs, where
    ``offset(s)`` is the live-row count of the sources before ``s``.

    Args:
        sources: Per source, in group order: ``(rows, dv_at_plan, dv_now)``; ``dv_now`` must
            contain ``dv_at_plan`` (DVs only grow).
        output_rows: Rows of each output file, in order (their sum is the sources' live rows).

    Returns:
        The DV of each output file.

    Raises:
        CommitConflict: a DV shrank, a position lies outside its file, or the row counts
            do not add up.

    Example:
        >>> from pyroaring import BitMap64
        >>> # source A: 4 rows, row 1 deleted at plan time, row 3 deleted since;
        >>> # source B: 3 rows, row 0 deleted since. Outputs of 4 and 2 rows.
        >>> out = map_deletes(
        ...     [(4, BitMap64([1]), BitMap64([1, 3])), (3, BitMap64(), BitMap64([0]))], [4, 2]
        ... )
        >>> [sorted(b) for b in out]
        [[2, 3], []]
    """
    per_source = mapped_positions(sources, output_rows)
    return split_positions(
        np.concatenate(per_source) if per_source else np.empty(0, np.uint64), output_rows
    )


def row_groups_of(f: DataFile, positions: BitMap64) -> tuple[int, ...]:
    """The row groups of ``f`` that hold ``positions``."""
    bounds = np.cumsum([0, *(rg.rows for rg in f.row_groups)])
    pos = positions_of(positions).astype(np.int64)
    return tuple(int(x) for x in np.unique(np.searchsorted(bounds, pos, side="right") - 1))


def group_rows(f: DataFile | None, bm: BitMap64, row_groups: Sequence[int]) -> BitMap64:
    """The positions of ``bm`` in the given row groups of ``f`` (what a splice of those
    groups removes, ``bm`` being ``f``'s DV)."""
    out = BitMap64()
    if f is None or not bm:
        return out
    bounds = np.cumsum([0, *(rg.rows for rg in f.row_groups)])
    for g in row_groups:
        window = BitMap64()
        window.add_range(int(bounds[g]), int(bounds[g + 1]))
        out |= bm & window
    return out


def targets_of(base: Snapshot, found: Mapping[str, BitMap64]) -> tuple[ErasureTarget, ...]:
    """Row groups (by index) of each file that hold the given positions, and the positions
    (what the erasure's splice removes, :mod:`lethe.erasure.erased`)."""
    out = []
    for path in sorted(found):
        f = base.file(path)
        if f is None:
            continue
        bounds = np.cumsum([0, *(rg.rows for rg in f.row_groups)])
        pos = np.fromiter(found[path], dtype=np.int64, count=len(found[path]))
        rgs = np.unique(np.searchsorted(bounds, pos, side="right") - 1)
        rg = tuple(int(x) for x in rgs)
        out.append(ErasureTarget(path=path, row_groups=rg, positions=b64_of(found[path])))
    return tuple(out)
