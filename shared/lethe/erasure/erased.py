"""Which deleted rows a splice removes: the erased ones, not every deleted one (issue 39).

A splice is erasure: the rows it removes vanish from every version, old ones included (they
read through the lineage, docs/format.md §6b). A row a plain ``delete`` hid is not erased:
versions from before that delete still hold it. So a splice of a file removes, of the rows
its DV hides, only the positions its pending erasures name (``ErasureTarget.positions``:
what an erase matched, everything hidden for a purge, the expired rows for a TTL sweep).
Where a target names none (it moved with a compaction or a partial splice, or was written
before issue 39) every hidden row of the file's edited groups is removed, as before: the
conservative side loses history, never keeps a person.

The rows left hidden stay in the new file under its DV (mapped through the splice).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyroaring import BitMap64

from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile
from lethe.dv import store as dvstore
from lethe.dv.blob import bitmap_of

__all__ = ["erased_positions"]


def erased_positions(ctx: TableContext, files: Sequence[DataFile]) -> dict[str, BitMap64]:
    """For each of ``files`` (live in ``ctx.snapshot``), the hidden positions its pending
    erasures erase (see the module): the positions a splice of it removes."""
    now = dvstore.load_many(ctx.store, ctx.prefix, {f.path: f.dv for f in files})
    named: dict[str, BitMap64 | None] = {}  # None: a target names no positions
    for e in ctx.snapshot.erasures:
        if e.state != "pending":
            continue
        for t in e.targets:
            if t.path not in now:
                continue
            have = named.get(t.path, BitMap64())
            named[t.path] = (
                None if have is None or not t.positions else have | bitmap_of(t.positions)
            )
    out: dict[str, BitMap64] = {}
    for path, hidden in now.items():
        got = named.get(path)
        mine = got & hidden if got is not None else hidden
        out[path] = mine if len(mine) else hidden
    return out
