"""Versions kept through an erasure (issue 39; docs/format.md §6b).

Once an erasure's splice commit is older than the erasure grace, GC deletes what it
superseded whatever the retention. A retained version from before the splice then reads
through the table's lineage (:mod:`lethe.dv.lineage`): GC checks that it can (:func:`mappable`)
and writes its root anew with its files mapped (:func:`mapped_root`: the replacements'
entries and statistics, the version's DVs inline, no index), so that no object it names
holds or describes an erased row. A version that cannot be mapped (one of its files was
replaced before the erasure by a compaction, and may hold the erased rows) is where the
retention window is cut, as before.

A file ``f`` of version ``v`` maps to ``t``, the file holding the rest of its rows (``f`` itself
when no splice replaced it). ``v`` can be mapped when, for every such ``t`` (None: no row left),
``t`` is not superseded by an erasure (only splices have a lineage), and, for every spliced
erasure whose rows were hidden after ``v`` (``deleted_version > v``), ``t`` was still live at
``deleted_version``: the erase then looked for the rows in it, and spliced it if it held
any (so ``t`` would not be the end of the chain).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from lethe.catalog.commit import Catalog
from lethe.catalog.lineage import LineageEntry
from lethe.catalog.manifest import ErasureRecord
from lethe.catalog.snapshot import Snapshot
from lethe.dv import lineage

__all__ = ["History", "mappable", "mapped_root"]


class History:
    """The head's lineage and what GC's walk saw: the newest version naming each path."""

    def __init__(self, catalog: Catalog, top: Snapshot) -> None:
        self.catalog = catalog
        ref = top.manifest.lineage
        self.lineage = (
            lineage.load(catalog.store, catalog.prefix, ref, top.table_uuid)
            if ref is not None
            else None
        )
        self.by_path: dict[str, LineageEntry] = self.lineage.by_path() if self.lineage else {}
        self.newest_seen: dict[str, int] = {}
        self.mapped: dict[int, Snapshot] = {}

    def saw(self, version: int, refs: Iterable[str]) -> None:
        """The walk (newest first) found ``refs`` referenced by ``version``."""
        for p in refs:
            self.newest_seen.setdefault(p, version)

    def end_of(self, path: str) -> str | None:
        e = self.by_path.get(path)
        if e is None:
            return path
        return e.file.path if e.file is not None else None

    def map(self, snap: Snapshot, erasures: Iterable[ErasureRecord]) -> Snapshot | None:
        """``snap`` read through the lineage, or None when it cannot be (see the module)."""
        recs = list(erasures)
        if not mappable(snap, recs, self.end_of, self.newest_seen):
            return None
        if self.lineage is None:
            return snap
        return mapped_root(
            lineage.map_snapshot(snap, self.lineage, self.catalog.store, self.catalog.prefix)
        )


def mappable(
    snap: Snapshot,
    erasures: Iterable[ErasureRecord],
    end_of: Callable[[str], str | None],
    newest_seen: Mapping[str, int],
) -> bool:
    """Whether every file of ``snap`` ends (through the lineage ``end_of``) in a file no
    erasure superseded and that was live when each later erasure hid its rows."""
    recs = [e for e in erasures if e.state == "spliced"]
    superseded = {p for e in recs for p in e.superseded}
    later = [e.deleted_version for e in recs if e.deleted_version > snap.version]
    for f in snap.files:
        t = end_of(f.path)
        if t is None:
            continue
        if t in superseded:
            return False
        if any(newest_seen.get(t, -1) < d for d in later):
            return False
    return True


def mapped_root(snap: Snapshot) -> Snapshot:
    """The root GC writes for a version kept through an erasure: its files mapped (inline,
    DVs inline), no index, no lineage of its own (readers use the head's)."""
    op = snap.operation
    params = {**op.params, "mapped": True}
    return snap.evolve(lineage=None, indexes=(), operation=op.model_copy(update={"params": params}))
