"""Which deleted rows a splice removes: the erased ones, not every deleted one (issue 39).

A splice is erasure: the rows it removes vanish from every version, old ones included (they
read through the lineage, docs/format.md §6b). A row a plain ``delete`` hid is not erased:
versions from before that delete still hold it. So a splice removes, of the rows its file's
DV hides, only those its pending erasures hid: the positions the DV of the erasure's commit
(``deleted_version``) added. A purge (its commit adds no DV) erases everything hidden when it
committed. Where that cannot be known exactly (the file was not live at the erasure's commit,
a compaction or splice moved its targets since, or the manifests were expired) every hidden
row is removed, as before: the conservative side loses history, never keeps a person.

The rows left hidden stay in the new file under its DV (mapped through the splice).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore

__all__ = ["erased_positions"]


def erased_positions(ctx: TableContext, files: Sequence[DataFile]) -> dict[str, BitMap64]:
    """For each of ``files`` (live in ``ctx.snapshot``), the hidden positions its pending
    erasures erased (see the module): the positions a splice of it removes."""
    store, prefix = ctx.store, ctx.prefix
    now = dvstore.load_many(store, prefix, {f.path: f.dv for f in files})
    versions: dict[str, set[int]] = {}
    for e in ctx.snapshot.erasures:
        if e.state == "pending":
            for t in e.targets:
                if t.path in now:
                    versions.setdefault(t.path, set()).add(e.deleted_version)
    snaps: dict[int, Snapshot | None] = {}
    out: dict[str, BitMap64] = {}
    for f in files:
        acc = BitMap64()
        for v in sorted(versions.get(f.path, ())):
            got = _hidden_by(ctx, snaps, f.path, v)
            if got is None:
                acc = now[f.path]
                break
            acc |= got
        acc &= now[f.path]
        out[f.path] = acc if len(acc) else now[f.path]
    return out


def _snapshot(ctx: TableContext, snaps: dict[int, Snapshot | None], v: int) -> Snapshot | None:
    if v not in snaps:
        try:
            snaps[v] = ctx.catalog.read_manifest(v) if v >= 0 else None
        except (errors.SnapshotNotFound, errors.StaleSnapshot, errors.NotFound):
            snaps[v] = None
    return snaps[v]


def _hidden_by(
    ctx: TableContext, snaps: dict[int, Snapshot | None], path: str, v: int
) -> BitMap64 | None:
    """The positions of ``path`` the commit of ``v`` hid (all hidden then when it hid none:
    a purge); None when unknown."""
    at, before = _snapshot(ctx, snaps, v), _snapshot(ctx, snaps, v - 1)
    if at is None or before is None:
        return None
    f_at, f_before = at.files_at([path]).get(path), before.files_at([path]).get(path)
    if f_at is None or f_before is None:
        return None
    store, prefix = ctx.store, ctx.prefix
    dv_at = dvstore.load(store, prefix, f_at.dv)
    added = dv_at - dvstore.load(store, prefix, f_before.dv)
    return added if len(added) else dv_at
