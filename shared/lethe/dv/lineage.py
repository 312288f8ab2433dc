"""Old versions read through later erasures (issue 39; docs/format.md §6b).

A splice commit extends the table's lineage (:mod:`lethe.catalog.lineage`) with the files it
replaced: :func:`extended` builds the new object from the base's (collapsing chains: a file
replaced twice maps straight to the newest replacement, its removed positions composed) and
:func:`write` stores it. A reader of version ``v`` older than the newest splice
(:func:`at_version`) maps every file of ``v`` the lineage names onto the file holding the rest
of its rows, with ``v``'s own DV mapped through the removed positions (removed rows vanish,
later ones shift down): ``v`` reads its rows minus those the splices removed, and the
replacement's statistics prune it. The mapped snapshot lists its files inline and has no
indexes (their pieces may be gone: lookups on it read the files, pruned by statistics).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.lineage import Lineage, LineageEntry, decode_lineage, encode_lineage, lineage_key
from lethe.catalog.manifest import DataFile, DVRef, LineageRef
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore
from lethe.dv.blob import b64_of, bitmap_of, dv_crc, encode_dv, rebase_positions

__all__ = [
    "at_version",
    "b64_of",
    "bitmap_of",
    "extended",
    "load",
    "map_snapshot",
    "origin_of",
    "record",
    "ref_of",
    "through",
    "write",
]


def origin_of(positions: BitMap64, removed: BitMap64) -> BitMap64:
    """Positions of a file spliced from an origin (which lost ``removed``) as positions of
    the origin: kept position ``p`` is origin position ``q = p + |{r in removed: r <= q}|``.

    >>> sorted(origin_of(BitMap64([0, 1, 2]), BitMap64([1, 2])))
    [0, 3, 4]
    """
    if not positions:
        return BitMap64()
    pos = np.fromiter(positions, dtype=np.int64, count=len(positions))
    rem = np.fromiter(removed, dtype=np.int64, count=len(removed))
    if not len(rem):
        return BitMap64(pos)
    shifted = rem - np.arange(len(rem), dtype=np.int64)
    return BitMap64(pos + np.searchsorted(shifted, pos, side="right"))


def extended(
    base: Lineage | None,
    table_uuid: str,
    version: int,
    splices: Sequence[tuple[str, DataFile | None, BitMap64]],
) -> Lineage:
    """``base`` with the splices ``(old path, new file or None, removed positions of old)``
    of the commit of ``version``: one entry per old path, and every entry that led to an old
    path now leads to its new file (its removed positions composed)."""
    entries = base.by_path() if base is not None else {}
    leads: dict[str, list[str]] = {}
    for e in entries.values():
        if e.file is not None:
            leads.setdefault(e.file.path, []).append(e.path)
    for old, new, removed in splices:
        newfile = new.model_copy(update={"dv": None}) if new is not None else None
        for p in leads.pop(old, []):
            e = entries[p]
            r = bitmap_of(e.removed)
            gone = r | origin_of(removed, r)
            entries[p] = LineageEntry(path=p, version=version, removed=b64_of(gone), file=newfile)
        entries[old] = LineageEntry(
            path=old, version=version, removed=b64_of(removed), file=newfile
        )
    ordered = tuple(entries[p] for p in sorted(entries))
    return Lineage(table_uuid=table_uuid, version=version, entries=ordered)


def ref_of(path: str, lin: Lineage) -> LineageRef:
    newest = max((e.version for e in lin.entries), default=lin.version)
    return LineageRef(path=path, newest=newest, entries=len(lin.entries))


def write(store: Any, prefix: str, lin: Lineage) -> LineageRef:
    """PUT a new lineage object (create-only) and return the root's reference to it."""
    path = lineage_key()
    key = f"{prefix}/{path}" if prefix else path
    store.put(key, encode_lineage(lin), if_none_match=True)
    _cache_put(store.bucket, key, lin)
    return ref_of(path, lin)


def record(
    store: Any,
    prefix: str,
    base: Snapshot,
    splices: Sequence[tuple[str, DataFile | None, BitMap64]],
) -> LineageRef:
    """Write the lineage of a splice commit on ``base``: ``base``'s extended with
    ``splices`` (``(old path, new file or None, removed positions)``)."""
    ref = base.manifest.lineage
    prev = load(store, prefix, ref, base.table_uuid) if ref is not None else None
    return write(store, prefix, extended(prev, base.table_uuid, base.version + 1, splices))


_CACHE: dict[tuple[str, str], Lineage] = {}


def _cache_put(bucket: str, key: str, lin: Lineage) -> None:
    _CACHE[(bucket, key)] = lin
    while len(_CACHE) > 16:
        del _CACHE[next(iter(_CACHE))]


def load(store: Any, prefix: str, ref: LineageRef, table_uuid: str | None = None) -> Lineage:
    """The lineage object ``ref`` names (immutable: cached per process)."""
    key = f"{prefix}/{ref.path}" if prefix else ref.path
    got = _CACHE.get((store.bucket, key))
    if got is not None:
        return got
    try:
        raw = store.get(key).body
    except errors.NotFound as e:
        raise errors.StaleSnapshot(
            f"lineage object s3://{store.bucket}/{key} is gone: a newer splice replaced it; "
            "open the table again"
        ) from e
    lin = decode_lineage(raw, where=f"s3://{store.bucket}/{key}", table_uuid=table_uuid)
    _cache_put(store.bucket, key, lin)
    return lin


def _inline(bm: BitMap64) -> DVRef | None:
    if not bm:
        return None
    blob = encode_dv(bm)
    return DVRef(
        inline=base64.b64encode(blob).decode("ascii"),
        length=len(blob),
        cardinality=len(bm),
        crc32=dv_crc(blob),
    )


def map_snapshot(snap: Snapshot, lin: Lineage, store: Any, prefix: str) -> Snapshot:
    """``snap`` read through ``lin``: each file the lineage names becomes the file holding
    the rest of its rows, with ``snap``'s DV of it mapped (inline); unchanged when the
    lineage names none of its files."""
    by_path = lin.by_path()
    files = snap.files
    hit = [f for f in files if f.path in by_path]
    if not hit:
        return snap
    dvs = dvstore.load_many(store, prefix, {f.path: f.dv for f in hit})
    out: list[DataFile] = []
    for f in files:
        e = by_path.get(f.path)
        if e is None:
            out.append(f)
        elif e.file is not None:
            dv = rebase_positions(dvs[f.path], bitmap_of(e.removed))
            out.append(e.file.model_copy(update={"dv": _inline(dv), "schema_id": f.schema_id}))
    m = snap.manifest.model_copy(
        update={
            "layout": "inline",
            "format_version": 1,
            "inline_files": tuple(out),
            "segments": (),
            "dv_overlay": (),
            "indexes": (),
        }
    )
    return Snapshot(m, snap.source)


def at_version(catalog: Catalog, version: int | None) -> Snapshot:
    """:meth:`Catalog.snapshot_at` read through the table's lineage: the latest snapshot,
    or ``version`` with the files later splices replaced mapped onto their replacements."""
    if version is None or version < 0:
        return catalog.snapshot_at(version)
    head, _ = catalog.read_head()
    if version > head.version:
        return catalog.snapshot_at(version)  # raises SnapshotNotFound, naming the latest
    # read again: GC may have written it anew since this catalog cached it
    return through(catalog, catalog.read_manifest(version, fresh=True), head.version)


def through(catalog: Catalog, snap: Snapshot, head_version: int) -> Snapshot:
    """``snap`` read through the lineage of version ``head_version``."""
    if snap.version >= head_version:
        return snap
    ref = catalog.read_manifest(head_version).manifest.lineage
    if ref is None or ref.newest <= snap.version:
        return snap
    lin = load(catalog.store, catalog.prefix, ref, snap.table_uuid)
    return map_snapshot(snap, lin, catalog.store, catalog.prefix)
