"""Where a file's index entries are (DESIGN §6b, docs/format.md §3c): a spliced file keeps
its rows' entries; its :class:`~lethe.catalog.manifest.IndexOrigin` names the file the splices
started from and the positions they removed, entries name the origin, and hits are shifted
down past the removed positions (:func:`from_origin`)."""

from __future__ import annotations

import base64
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from lethe.catalog.manifest import DataFile, IndexOrigin

__all__ = [
    "as_array",
    "from_origin",
    "index_path",
    "origin_positions",
    "origin_removed",
    "spliced_origin",
]


def index_path(f: DataFile) -> str:
    """The path the index entries of ``f``'s rows name (its origin's, if spliced)."""
    return f.index_origin.path if f.index_origin is not None else f.path


def origin_removed(f: DataFile) -> BitMap64:
    """Positions of :func:`index_path` no row of ``f`` has any more."""
    o = f.index_origin
    if o is None or not o.removed:
        return BitMap64()
    return BitMap64.deserialize(base64.b64decode(o.removed))


def as_array(bm: BitMap64) -> npt.NDArray[np.int64]:
    """The positions of ``bm``, ascending."""
    return np.fromiter(bm, dtype=np.int64, count=len(bm))


def origin_positions(f: DataFile, positions: Iterable[int]) -> BitMap64:
    """Positions of ``f`` in the coordinates of its index entries (the origin's)."""
    pos = np.fromiter(positions, dtype=np.int64)
    removed = as_array(origin_removed(f))
    if not len(removed):
        return BitMap64(pos)
    # by rank: kept position p of f is origin position q = p + |{r in removed: r <= q}|, and
    # removed[i] - i kept positions lie before removed[i] (no pass over every row)
    shifted = removed - np.arange(len(removed), dtype=np.int64)
    return BitMap64(pos + np.searchsorted(shifted, pos, side="right"))


def from_origin(f: DataFile, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index entries' positions (origin coordinates) as positions of ``f``; positions a
    splice removed are dropped."""
    removed = as_array(origin_removed(f))
    if not len(removed):
        return positions
    pos = positions[~np.isin(positions, removed)]
    return pos - np.searchsorted(removed, pos, side="right")


def spliced_origin(f: DataFile, removed: BitMap64) -> IndexOrigin:
    """The index origin of the file a splice of ``f`` removing ``removed`` (positions of
    ``f``) writes: ``f``'s own origin (chains keep the first) with those rows added."""
    gone = origin_removed(f) | origin_positions(f, removed)
    return IndexOrigin(
        path=index_path(f),
        added_version=f.index_version,
        removed=base64.b64encode(gone.serialize()).decode("ascii") if gone else "",
    )
