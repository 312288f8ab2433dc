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

What the pending erasures name is read here too, for the serial splicer and the fanned-out
groups alike: their targets, files and edited row groups.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from pyroaring import BitMap64

from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile, ErasureTarget
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore
from lethe.dv.blob import bitmap_of

__all__ = ["edited_groups", "erased_positions", "pending_paths", "pending_targets"]


def pending_targets(m: Snapshot, id_hash: str | Collection[str]) -> tuple[ErasureTarget, ...]:
    """The pending targets of one erasure (or of several: every one of them, in order)."""
    wanted = {id_hash} if isinstance(id_hash, str) else set(id_hash)
    out: list[ErasureTarget] = []
    for e in m.erasures:
        if e.id_hash in wanted and e.state == "pending":
            out.extend(e.targets)
    return tuple(out)


def pending_paths(m: Snapshot, id_hash: str | Collection[str]) -> list[str]:
    """The files :func:`pending_targets` names, each once, in order."""
    return list(dict.fromkeys(t.path for t in pending_targets(m, id_hash)))


def edited_groups(m: Snapshot, paths: Iterable[str]) -> dict[str, list[int]]:
    """Per path (of those with any), the row groups to splice: every pending erasure on the
    file rides along."""
    groups: dict[str, set[int]] = {p: set() for p in paths}
    for e in m.erasures:
        if e.state == "pending":
            for t in e.targets:
                if t.path in groups:
                    groups[t.path].update(t.row_groups)
    return {p: sorted(g) for p, g in groups.items() if g}


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
