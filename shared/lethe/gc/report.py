"""Report: combine a run's step results and decide, per erasure request, whether it is complete.

An erasure is complete once every object and old manifest that held its rows is gone: the
superseded files, unreferenced objects written before its splice, manifests from before the
splice and, in a versioned bucket, their old versions. The first run that sees it complete
writes ``_gc/erasures/<id hash>.json`` (create-only), so the time it was reached is kept.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.manifest import ErasureRecord
from lethe.gc.areas import MANIFESTS, MARKERS, VALUE_PREFIXES, manifest_version
from lethe.gc.marking import list_objects, newly_referenced
from lethe.gc.models import (
    CATEGORIES,
    Category,
    CategoryStats,
    ErasureHead,
    ErasureMarker,
    ErasurePlan,
    ErasureStatus,
    GcReport,
    PlanDocument,
    StepResult,
    add_stats,
    carried,
)
from lethe.gc.present import holdings
from lethe.gc.purge import versions_left
from lethe.gc.workspace import decode
from lethe.storage.layout import METADATA_PREFIX, is_external

log = logging.getLogger(__name__)

__all__ = ["REPORT_KEY_LIMIT", "build_report"]

REPORT_KEY_LIMIT = 10_000
# what the report states as its plan did: the run, its settings and what it kept
_FROM_PLAN = (
    "table",
    "run_id",
    "retention",
    "grace_seconds",
    "erasure_grace_seconds",
    "versioned",
    "head_version",
    "oldest_kept_version",
    "kept_versions",
    "young",
    "truncated",
)


@dataclass(frozen=True, slots=True)
class _Totals:
    """The step results, summed."""

    deleted: dict[Category, CategoryStats]
    keys: dict[Category, list[str]]
    failed: list[str]
    versions_remaining: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Remains:
    """What is left in the bucket that may hold erased rows (in a dry run: would be left)."""

    present: set[str]
    fresh: frozenset[str]  # referenced by commits since the plan
    manifests: list[int]  # versions, ascending


def build_report(
    catalog: Catalog,
    plan: PlanDocument,
    results: Sequence[StepResult],
    *,
    now: datetime,
    dry_run: bool,
    missing: Sequence[str] = (),
) -> GcReport:
    """Combine the step results and decide, per erasure request, whether it is complete."""
    totals = _sum(results, missing)
    if not dry_run:  # what a listing of every version still shows
        totals.versions_remaining.update(versions_left(catalog, plan))
    left = _remains(catalog, plan, totals, dry_run=dry_run)
    statuses = [
        _status(catalog, plan, e, totals, left, now=now, dry_run=dry_run) for e in plan.erasures
    ]
    kept_keys, keys_truncated = _capped(totals.keys)
    return GcReport(
        **carried(plan, _FROM_PLAN),
        dry_run=dry_run,
        started_at=plan.created_at,
        finished_at=now,
        deleted=totals.deleted,
        keys=kept_keys,
        keys_truncated=keys_truncated,
        failed=tuple(totals.failed),
        erasures=tuple(statuses),
    )


def _sum(results: Sequence[StepResult], missing: Sequence[str]) -> _Totals:
    deleted: dict[Category, CategoryStats] = {}
    keys: dict[Category, list[str]] = defaultdict(list)
    failed: list[str] = list(missing)
    versions_remaining: dict[str, int] = {}
    for r in results:
        deleted = add_stats(deleted, r.deleted)
        for cat, ks in r.keys.items():
            keys[cat].extend(ks)
        failed.extend(r.failed)
        if r.step == "purge":
            versions_remaining.update(r.versions_remaining)
    return _Totals(deleted, keys, failed, versions_remaining)


def _remains(catalog: Catalog, plan: PlanDocument, totals: _Totals, *, dry_run: bool) -> _Remains:
    value_cats: tuple[Category, ...] = ("data", "staging", "segment", "iceberg", "manifest")
    gone = {k for cat in value_cats for k in totals.keys.get(cat, [])}
    fresh = newly_referenced(catalog, plan.table_uuid, plan.marked_through)
    present = {o.path for o in list_objects(catalog, (*VALUE_PREFIXES, MANIFESTS, METADATA_PREFIX))}
    # adopted files outside the table prefix: no listing of the table sees them, read their own
    external = {p for e in plan.erasures for p in (*e.blockers, *e.superseded) if is_external(p)}
    present.update(
        p
        for p, held in holdings(catalog, external, versioned=plan.versioned).items()
        if held.present
    )
    if dry_run:
        present -= gone  # what would remain
    manifests = sorted(v for p in present if (v := manifest_version(p)) is not None)
    return _Remains(present, fresh, manifests)


def _status(
    catalog: Catalog,
    plan: PlanDocument,
    e: ErasurePlan,
    totals: _Totals,
    left: _Remains,
    *,
    now: datetime,
    dry_run: bool,
) -> ErasureStatus:
    """One erasure's status; the first time it is complete (not in a dry run), its marker."""
    head = carried(e, ErasureHead.model_fields)
    if e.previously_completed_at is not None:
        return ErasureStatus(**head, complete=True, completed_at=e.previously_completed_at)
    blocking = _blocking(plan, e, totals.versions_remaining, left)
    complete = not blocking
    completed_at: datetime | None = None
    completed_run: str | None = None
    if complete:
        completed_at, completed_run = now, plan.run_id
        if not dry_run and e.spliced_version is not None:
            mapped = tuple(v for v in plan.mapped_versions if v < e.spliced_version)
            completed_at, completed_run = _mark_complete(catalog, e, now, plan.run_id, mapped)
    return ErasureStatus(
        **head,
        complete=complete,
        completed_at=completed_at,
        completed_run=completed_run,
        newly_complete=complete,
        blocking=tuple(blocking),
    )


def _blocking(
    plan: PlanDocument, e: ErasurePlan, versions_remaining: Mapping[str, int], left: _Remains
) -> list[str]:
    """Why erasure ``e`` is not complete yet (empty: it is)."""
    if e.state != "spliced" or e.spliced_version is None:
        return ["its rows are not spliced out yet (erasure pending)"]
    blocking: list[str] = []
    mapped = set(plan.mapped_versions)  # they read through the lineage (issue 39)
    older = [v for v in left.manifests if v < e.spliced_version and v not in mapped]
    if older:
        blocking.append(
            f"{len(older)} manifest(s) from before the splice (v{older[0]}..v{older[-1]}) "
            "are still retained"
        )
    remaining = [p for p in e.blockers if p in left.present and p not in left.fresh]
    sup = sum(1 for p in remaining if p in e.superseded)
    if sup:
        blocking.append(f"{sup} superseded file(s) remain")
    if len(remaining) > sup:
        blocking.append(
            f"{len(remaining) - sup} unreferenced object(s) written before the splice remain "
            "(younger than the grace period)"
        )
    if versions_remaining.get(e.id_hash):
        blocking.append(
            f"{versions_remaining[e.id_hash]} object version(s) or delete marker(s) that may "
            "hold its rows remain (a versioned bucket)"
        )
    return blocking


def _capped(keys: Mapping[Category, list[str]]) -> tuple[dict[Category, tuple[str, ...]], bool]:
    """At most :data:`REPORT_KEY_LIMIT` keys, in category order; and whether some were cut."""
    total = sum(len(v) for v in keys.values())
    kept_keys: dict[Category, tuple[str, ...]] = {}
    budget = REPORT_KEY_LIMIT
    for cat in CATEGORIES:
        if cat in keys:
            kept_keys[cat] = tuple(keys[cat][: max(0, budget)])
            budget -= len(kept_keys[cat])
    return kept_keys, total > REPORT_KEY_LIMIT


def _mark_complete(
    catalog: Catalog, e: ErasurePlan, now: datetime, run_id: str, mapped: tuple[int, ...] = ()
) -> tuple[datetime, str]:
    """Write the erasure's completion marker once (create-only); return the first time."""
    assert e.spliced_version is not None
    key = catalog.key(f"{MARKERS}{e.id_hash}.json")
    record = ErasureRecord(
        id_hash=e.id_hash,
        deleted_version=e.deleted_version,
        state="spliced",
        spliced_version=e.spliced_version,
        superseded=e.superseded,
    )
    marker = ErasureMarker(
        id_hash=e.id_hash,
        spliced_version=e.spliced_version,
        completed_at=now,
        run_id=run_id,
        record=record,
        mapped_versions=mapped,
    )
    try:
        catalog.store.put(key, marker.model_dump_json().encode(), if_none_match=True)
        log.info("erasure %s of %s is complete", e.id_hash, catalog.uri)
        return now, run_id
    except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
        earlier = decode(catalog.store.get(key).body, ErasureMarker, key)
        return earlier.completed_at, earlier.run_id
