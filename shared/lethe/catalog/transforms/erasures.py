"""Transforms of a snapshot's erasure records: what a splice or a compaction of their files
leaves pending, what it met, and the objects that must go (``superseded``, for GC).

The transforms add superseded paths inline; :func:`externalize_superseded` (which the commit
loop applies to every commit) moves what a commit added into one new immutable
:class:`~lethe.catalog.manifest.SupersededList` per commit (holding every erasure it advanced), named
by each record's ``superseded_refs``, so the root never grows with them. :func:`archive_erasures` drops completed erasures."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from pyroaring import BitMap64

from lethe.catalog.manifest import ErasureRecord, ErasureTarget, SupersededList
from lethe.catalog.snapshot import Snapshot
from lethe.parquet.splice import GroupFate
from lethe.storage.layout import erasure_key

__all__ = [
    "archive_erasures",
    "externalize_superseded",
    "spliced_erasures",
    "superseding",
    "update_erasures",
    "with_erasures",
]


def spliced_erasures(
    erasures: Sequence[ErasureRecord],
    old: str,
    new: str | None,
    fates: Sequence[GroupFate],
    spliced: set[int],
    version: int,
    segment: str | None = None,
    also: Sequence[str] = (),
) -> tuple[ErasureRecord, ...]:
    """Targets on the spliced file: edited groups are done; others move to the new file.
    The old file (and ``segment``, the segment object whose entry describes it, stats of
    the erased values included, and ``also``: the index pieces the splice's commit
    scrubbed) join ``superseded``: GC must remove them."""
    index = {g.index: g.new_index for g in fates}
    out = []
    for e in erasures:
        if e.state != "pending" or not any(t.path == old for t in e.targets):
            out.append(e)
            continue
        targets: list[ErasureTarget] = []
        for t in e.targets:
            if t.path != old:
                targets.append(t)
                continue
            rest = tuple(
                i for i in (index.get(g) for g in t.row_groups if g not in spliced) if i is not None
            )
            if rest and new is not None:
                moved = _moved_positions(t, fates, spliced)
                targets.append(ErasureTarget(path=new, row_groups=rest, positions=moved))
        gone = ((old,) if segment is None else (old, segment)) + tuple(also)
        superseded = (*e.superseded, *(g for g in gone if g not in e.superseded))
        upd: dict[str, Any] = {"targets": tuple(targets), "superseded": superseded}
        if not targets:
            upd.update(state="spliced", spliced_version=version)
        out.append(e.model_copy(update=upd))
    return tuple(out)


def _moved_positions(t: ErasureTarget, fates: Sequence[GroupFate], spliced: set[int]) -> str:
    """The erased positions of ``t`` in its groups a partial splice copied unchanged, at their
    places in the new file (base64 portable Roaring; empty when ``t`` names none, so the
    later splice falls back to every hidden row): the later splice of those groups then
    removes only the erased rows, and history keeps the rows a plain delete hid (issue 39)."""
    if not t.positions:
        return ""
    bm = BitMap64.deserialize(base64.b64decode(t.positions))
    old_at, new_at, acc = {}, {}, 0
    for g in sorted(fates, key=lambda g: g.index):
        old_at[g.index], acc = acc, acc + g.rows_before
    acc = 0
    for g in sorted((g for g in fates if g.new_index is not None), key=lambda g: g.new_index or 0):
        new_at[g.index], acc = acc, acc + g.rows_after
    out = BitMap64()
    for g in fates:
        if g.index in spliced or g.index not in t.row_groups or g.index not in new_at:
            continue
        window = BitMap64()
        window.add_range(old_at[g.index], old_at[g.index] + g.rows_before)
        out |= (bm & window).shift(new_at[g.index] - old_at[g.index])
    return base64.b64encode(out.serialize()).decode("ascii") if out else ""


def superseding(
    before: Sequence[ErasureRecord], after: Sequence[ErasureRecord], path: str
) -> tuple[ErasureRecord, ...]:
    """``after`` with ``path`` superseded by every record a commit advanced (whose
    superseded objects grew since ``before``)."""
    had = {e.id_hash: len(e.superseded) for e in before}
    return tuple(
        e.model_copy(update={"superseded": (*e.superseded, path)})
        if len(e.superseded) > had.get(e.id_hash, 0) and path not in e.superseded
        else e
        for e in after
    )


def update_erasures(
    erasures: Sequence[ErasureRecord],
    removed: set[str],
    plan_version: int,
    moved: Mapping[str, Sequence[ErasureTarget]],
    new_version: int,
    *,
    segments: Mapping[str, str] | None = None,
) -> tuple[ErasureRecord, ...]:
    """Pending erasures after their files were compacted.

    Rows deleted by the plan snapshot are physically gone from the outputs: those targets are
    met (the old file joins ``superseded``, for GC, and so does ``segments[old file]``, the
    segment object whose entry described it). Rows deleted since were mapped onto the
    outputs: the target moves to the outputs' row groups that now hold them.
    """
    out: list[ErasureRecord] = []
    for e in erasures:
        if e.state != "pending" or not any(t.path in removed for t in e.targets):
            out.append(e)
            continue
        kept: list[ErasureTarget] = []  # targets on other files keep their positions
        targets: dict[str, set[int]] = {}
        superseded = list(e.superseded)
        for t in e.targets:
            if t.path not in removed:
                kept.append(t)
                continue
            for gone in (t.path, (segments or {}).get(t.path)):
                if gone is not None and gone not in superseded:
                    superseded.append(gone)
            if e.deleted_version > plan_version:
                for nt in moved.get(t.path, ()):
                    targets.setdefault(nt.path, set()).update(nt.row_groups)
        new_targets = (
            *kept,
            *(ErasureTarget(path=p, row_groups=tuple(sorted(rgs))) for p, rgs in targets.items()),
        )
        update: dict[str, Any] = {"targets": new_targets, "superseded": tuple(superseded)}
        if not new_targets:
            update |= {"state": "spliced", "spliced_version": new_version}
        out.append(e.model_copy(update=update))
    return tuple(out)


def with_erasures(m: Snapshot, erasures: Sequence[ErasureRecord]) -> Snapshot:
    """``m`` (not yet committed) with its erasure records replaced."""
    return m.evolve(erasures=tuple(erasures))


def externalize_superseded(base: Snapshot, new: Snapshot) -> Snapshot:
    """``new`` (built from ``base``) with the superseded paths it added inline to its
    erasure records moved into one new superseded list (pending: the commit writes it before
    its manifest) that each of those records references; inline paths ``base`` had stay.
    """
    before = {e.id_hash: e.superseded for e in base.erasures}
    added: dict[str, tuple[str, ...]] = {}
    for e in new.erasures:
        had = set(before.get(e.id_hash, ()))
        got = tuple(p for p in e.superseded if p not in had)
        if got:
            added[e.id_hash] = got
    if not added:
        return new
    # one object for the commit, whatever the number of erasures it advanced
    key = erasure_key(new.version, next(iter(added)) if len(added) == 1 else "several")
    listed = SupersededList.of(new.table_uuid, new.version, added)
    out = [
        e.model_copy(
            update={
                "superseded": before.get(e.id_hash, ()),
                "superseded_refs": (*e.superseded_refs, key),
            }
        )
        if e.id_hash in added
        else e
        for e in new.erasures
    ]
    return new.successor(
        new.manifest.model_copy(update={"erasures": tuple(out)}), None, {key: listed}
    )


def archive_erasures(base: Snapshot, id_hashes: frozenset[str]) -> tuple[ErasureRecord, ...]:
    """The erasure records of ``base`` without the spliced ones named in ``id_hashes``."""
    return tuple(e for e in base.erasures if not (e.state == "spliced" and e.id_hash in id_hashes))
