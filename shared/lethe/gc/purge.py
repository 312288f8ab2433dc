"""Purge (versioned buckets): every version and delete marker of every object that may have
held an incomplete erasure's rows, so that ``complete`` is true of the bytes, not only of
the current objects. The table's areas when its bucket keeps versions; adopted originals in
another bucket always (that bucket's versioning is not the table's; listing the versions of
an unversioned bucket shows its current objects only).

What may hold the rows, per key (:func:`held_by`): a manifest older than the erasure's splice;
any other object of the value areas (data files, staged uploads, DV containers, index
pieces, segments and superseded lists, the Iceberg view's metadata) or adopted original
outside the table prefix (in its own bucket) with a version written before the splice
commit, or with delete markers only. Of a *deleted* key (its latest entry a delete marker)
every version and marker goes; of a live key, the noncurrent versions written before the
splice (the current one is what the table reads).

:func:`versions_left` reads the same listing again after the purge: the report counts what a
listing still shows, never what the purge meant to delete.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lethe.catalog.commit import Catalog
from lethe.gc.areas import MANIFESTS, manifest_version
from lethe.gc.marking import relative
from lethe.gc.models import CategoryStats, ErasurePlan, PlanDocument, StepResult
from lethe.gc.policy import as_utc
from lethe.gc.present import bucket_store, key_versions, split
from lethe.storage.layout import (
    DATA_PREFIX,
    INDEX_PREFIX,
    METADATA_PREFIX,
    STAGING_PREFIX,
    TOMBSTONE_PREFIX,
    is_external,
)
from lethe.storage.store import S3Store

__all__ = ["PURGED", "held_by", "pending_erasures", "purge", "versions_left"]

#: The table's areas whose objects can hold a value (segments and superseded lists live under
#: ``manifest/``, the view's data manifests under ``metadata/``).
PURGED = (DATA_PREFIX, STAGING_PREFIX, TOMBSTONE_PREFIX, INDEX_PREFIX, MANIFESTS, METADATA_PREFIX)

Versions = Sequence[S3Store.ObjectVersion]


@dataclass(frozen=True, slots=True)
class _Key:
    """One key's versions: its bucket, the path the report names it by, who it may hold."""

    bucket: str
    path: str
    versions: Versions
    held: tuple[str, ...]


def pending_erasures(plan: PlanDocument) -> list[ErasurePlan]:
    """The spliced erasures not complete yet (what a purge works for)."""
    return [
        e
        for e in plan.erasures
        if e.state == "spliced"
        and e.spliced_version is not None
        and e.previously_completed_at is None
    ]


def held_by(path: str, versions: Versions, pending: Sequence[ErasurePlan]) -> tuple[str, ...]:
    """Id hashes of the ``pending`` erasures whose rows a key's versions may hold."""
    mv = manifest_version(path)
    if mv is not None:
        return tuple(
            e.id_hash for e in pending if e.spliced_version is not None and mv < e.spliced_version
        )
    written = [t for v in versions if not v.is_delete_marker and (t := as_utc(v.last_modified))]
    return tuple(
        e.id_hash
        for e in pending
        if not written or e.spliced_at is None or any(t <= e.spliced_at for t in written)
    )


def _doomed(k: _Key, pending: Sequence[ErasurePlan]) -> list[S3Store.ObjectVersion]:
    """The versions of a held key to delete: all of a deleted key; of a live key, the
    noncurrent ones written before a splice (and stray delete markers)."""
    latest = [v for v in k.versions if v.is_latest]
    if not latest or latest[0].is_delete_marker:
        return list(k.versions)
    cut = max((e.spliced_at for e in pending if e.id_hash in k.held and e.spliced_at), default=None)
    return [
        v
        for v in k.versions
        if not v.is_latest
        and (v.is_delete_marker or cut is None or ((t := as_utc(v.last_modified)) and t <= cut))
    ]


def _keys(catalog: Catalog, pending: Sequence[ErasurePlan], versioned: bool) -> list[_Key]:
    """Every key that may hold a pending erasure's rows, with its versions: the table's value
    areas (one listing each, when its bucket is ``versioned``) and the adopted originals the
    erasures superseded (in another bucket whatever the table's: its versioning is its own)."""
    by_key: dict[str, list[S3Store.ObjectVersion]] = defaultdict(list)
    roots = [p for p in PURGED if not any(p != q and p.startswith(q) for q in PURGED)]
    for prefix in roots if versioned else ():
        for v in catalog.store.list_object_versions(catalog.key(prefix)):
            by_key[v.key].append(v)
    out = [
        _Key(
            catalog.store.bucket,
            relative(catalog, k),
            vs,
            held_by(relative(catalog, k), vs, pending),
        )
        for k, vs in sorted(by_key.items())
    ]
    external: dict[str, dict[str, str]] = defaultdict(dict)
    for p in sorted({p for e in pending for p in (*e.superseded, *e.blockers) if is_external(p)}):
        b, k = split(catalog, p)
        external[b][k] = p
    for b, keys in external.items():
        if b == catalog.store.bucket and not versioned:
            continue
        for k, vs in sorted(key_versions(catalog.store, b, keys).items()):
            out.append(_Key(b, keys[k], vs, held_by(keys[k], vs, pending)))
    return [k for k in out if k.held]


def _label(k: _Key, v: S3Store.ObjectVersion) -> str:
    return f"{k.path}?versionId={v.version_id}"


def purge(catalog: Catalog, plan: PlanDocument, *, dry_run: bool) -> StepResult:
    """Delete every version and delete marker that may hold an incomplete erasure's rows
    (see the module docstring); ``versions_remaining`` counts, per erasure, the versions the
    bucket refused to delete."""
    pending = pending_erasures(plan)
    keys = _keys(catalog, pending, plan.versioned) if pending else []
    if not keys:
        reason = (
            "no_pending_erasures"
            if not pending
            else "not_versioned"
            if not plan.versioned
            else "nothing_to_purge"
        )
        return StepResult(step="purge", run_id=plan.run_id, dry_run=dry_run, skipped={reason: 1})
    targets: dict[str, list[tuple[_Key, S3Store.ObjectVersion]]] = defaultdict(list)
    skipped: Counter[str] = Counter()
    for k in keys:
        doomed = _doomed(k, pending)
        if not doomed:
            skipped["live"] += 1
        targets[k.bucket].extend((k, v) for v in doomed)
    failed: set[tuple[str, str, str]] = set()
    if not dry_run:
        for b, items in targets.items():
            pairs = [(split(catalog, k.path)[1], v.version_id) for k, v in items]
            errs = bucket_store(catalog.store, b).delete_versions(pairs)
            failed |= {(b, key, vid) for key, vid in errs}

    def refused(k: _Key, v: S3Store.ObjectVersion) -> bool:
        return (k.bucket, split(catalog, k.path)[1], v.version_id) in failed

    done = [(k, v) for items in targets.values() for k, v in items if not refused(k, v)]
    left = [(k, v) for items in targets.values() for k, v in items if refused(k, v)]
    remaining: Counter[str] = Counter(h for k, _ in left for h in k.held)
    size = sum(v.size for _, v in done)
    return StepResult(
        step="purge",
        run_id=plan.run_id,
        dry_run=dry_run,
        deleted={"version": CategoryStats(objects=len(done), bytes=size)} if done else {},
        keys={"version": tuple(_label(k, v) for k, v in done)} if done else {},
        skipped=dict(skipped),
        failed=tuple(sorted(_label(k, v) for k, v in left)),
        versions_remaining={e.id_hash: remaining.get(e.id_hash, 0) for e in pending},
    )


def versions_left(catalog: Catalog, plan: PlanDocument) -> Mapping[str, int]:
    """Per incomplete erasure, the versions and delete markers a fresh listing still shows
    that may hold its rows (what the report's ``complete`` rests on)."""
    pending = pending_erasures(plan)
    if not pending:
        return {}
    left: Counter[str] = Counter()
    for k in _keys(catalog, pending, plan.versioned):
        for _ in _doomed(k, pending):
            left.update(k.held)
    return {e.id_hash: left.get(e.id_hash, 0) for e in pending}
