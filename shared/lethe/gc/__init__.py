"""Garbage collection (DESIGN §6): mark, expire, sweep, abort, purge, report.

One run, whether from :func:`collect` (the CLI) or the Step Functions workflow (one Lambda
per step, see ``functions/gc_steps/handler.py``), does the same thing with the same functions:

1. **list** ``data/``, ``tombstone/``, ``_staging/``, ``_gc/`` and ``manifest/`` (keys,
   sizes, LastModified);
2. **mark**, after listing: re-read the head, read any landed successor whose head update is
   still pending, and walk ``previous`` from the head over the retention window (by age
   and/or version count; the head is always kept). Every data file and DV container those
   manifests reference is marked. Listing *before* marking is what makes a commit that lands
   during GC safe: its files are either marked, or younger than the grace period;
3. **select**: an unmarked object older than the grace period is a candidate. A file
   superseded by an erasure splice (``ErasureRecord.superseded``) was committed once, so no
   uncommitted writer can still claim it: its age counts from the splice commit, against the
   (shorter) erasure grace. Manifests older than the oldest kept one expire. Workspace files
   of finished runs (or of runs abandoned for :data:`WORKSPACE_GRACE`) go too;
4. **expire** those manifests; **sweep** the candidates in batches of at most 1,000 keys
   (one DeleteObjects each), every batch re-reading the head right before its delete and
   sparing anything a newer manifest references; **abort** multipart uploads older than the
   grace period (and idle as long); **purge**, in a versioned bucket, every version and
   delete marker of deleted keys that may have held erased rows (data written before the
   splice, manifests older than it); **report**, per erasure request, whether every object
   and old manifest that held its rows is gone, and since when.

Everything is idempotent: deleting a deleted key succeeds, and a re-run recomputes the same
end state, so an interrupted run is resumed by running again. Nothing younger than the grace
period and nothing a kept manifest references is ever deleted.

Example:
    >>> from lethe.gc import collect                                     # doctest: +SKIP
    >>> report = collect("s3://bucket/people", retention="30d", dry_run=True)  # doctest: +SKIP
    >>> print(report.describe())                                         # doctest: +SKIP
    >>> collect("s3://bucket/people", retention="30d,100v", grace="7d").complete_erasures  # doctest: +SKIP
    ('5f0c…',)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.catalog import Catalog
from lethe.errors import GcConflict, GcError, GcRunNotFound
from lethe.gc.areas import (
    KEPT_WORKSPACE_FILES,
    MANIFESTS,
    MARKERS,
    RUN_ID,
    SWEPT,
    VALUE_PREFIXES,
    WORKSPACE,
    category,
    manifest_version,
    new_run_id,
)
from lethe.gc.marking import list_objects, mark, newly_referenced, relative
from lethe.gc.models import (
    CATEGORIES,
    BatchDocument,
    BatchEntry,
    Category,
    CategoryStats,
    ErasureMarker,
    ErasurePlan,
    ErasureStatus,
    FailureRecord,
    GcReport,
    PlanDocument,
    PlanState,
    StepResult,
    add_stats,
)
from lethe.gc.policy import (
    DEFAULT_ERASURE_GRACE,
    DEFAULT_GRACE,
    DEFAULT_RETENTION,
    WORKSPACE_GRACE,
    Options,
    Retention,
    as_utc,
    is_old,
    options,
)
from lethe.gc.select import BATCH_KEYS, MAX_BATCHES, Marks, select
from lethe.gc.workspace import MemoryWorkspace, S3Workspace, Workspace, decode
from lethe.grace import parse_duration
from lethe.store import S3Store, parse_s3_uri

if TYPE_CHECKING:  # pragma: no cover
    from lethe.table import Table

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ERASURE_GRACE",
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "KEPT_WORKSPACE_FILES",
    "WORKSPACE_GRACE",
    "GcConflict",
    "GcError",
    "GcHooks",
    "GcReport",
    "GcRunNotFound",
    "Marks",
    "Retention",
    "abort_step",
    "add_cli",
    "cli_command",
    "collect",
    "expire_step",
    "new_run_id",
    "parse_duration",
    "plan_step",
    "purge_step",
    "record_failure",
    "report_step",
    "sweep_step",
]

REPORT_KEY_LIMIT = 10_000
MAX_CAUSE_CHARS = 32_000


@dataclass(frozen=True, slots=True)
class GcHooks:
    """Test seams: ``after_list()`` runs between listing and marking; ``before_sweep(batch
    index)`` when a sweep batch starts, before it re-checks the head; ``before_delete(batch
    index, paths)`` right before the batch's DeleteObjects (raise to interrupt a run)."""

    after_list: Callable[[], None] | None = None
    before_sweep: Callable[[int], None] | None = None
    before_delete: Callable[[int, Sequence[str]], None] | None = None


# --- the steps (shared by collect() and the workflow) ---------------------------------------
def _plan(
    catalog: Catalog,
    opts: Options,
    *,
    run_id: str,
    now: datetime,
    workspace: Workspace,
    hooks: GcHooks | None,
    max_batches: int | None,
    batch_keys: int = BATCH_KEYS,
) -> PlanDocument:
    listing = list_objects(catalog, (*SWEPT, WORKSPACE, MANIFESTS))
    if hooks is not None and hooks.after_list is not None:
        hooks.after_list()
    marks = mark(catalog, opts.retention, now)  # after listing: see the module docstring
    # the table's grace binds its writers (lethe.grace): a shorter one asked for is raised
    opts = dataclasses.replace(opts, grace=max(opts.grace, marks.gc_grace))
    sel = select(
        listing,
        marks,
        grace=opts.grace,
        erasure_grace=opts.erasure_grace,
        now=now,
        run_id=run_id,
    )
    versioned = opts.versioned
    if versioned is None:
        versioned = catalog.store.versioning() in ("Enabled", "Suspended")
    size = max(1, min(batch_keys, BATCH_KEYS))
    chunks = [sel.sweep[i : i + size] for i in range(0, len(sel.sweep), size)]
    truncated = max_batches is not None and len(chunks) > max_batches
    if max_batches is not None:
        chunks = chunks[:max_batches]
    candidates: dict[Category, CategoryStats] = {}
    batches: list[str] = []
    for i, chunk in enumerate(chunks):
        for b in chunk:
            candidates[b.category] = candidates.get(b.category, CategoryStats()) + CategoryStats(
                objects=1, bytes=b.size
            )
        batches.append(
            workspace.write(
                f"batch-{i:04d}.json",
                BatchDocument(
                    table=catalog.uri,
                    table_uuid=marks.table_uuid,
                    run_id=run_id,
                    index=i,
                    dry_run=opts.dry_run,
                    marked_through=marks.marked_through,
                    grace_seconds=opts.grace.total_seconds(),
                    erasure_grace_seconds=opts.erasure_grace.total_seconds(),
                    entries=tuple(chunk),
                ),
            )
        )
    expiring = [
        o for o in listing if (v := manifest_version(o.path)) is not None and v < sel.expire_below
    ]
    if expiring:
        candidates["manifest"] = CategoryStats(
            objects=len(expiring), bytes=sum(o.size for o in expiring)
        )
    plan = PlanDocument(
        table=catalog.uri,
        table_uuid=marks.table_uuid,
        run_id=run_id,
        created_at=now,
        dry_run=opts.dry_run,
        retention=str(opts.retention),
        grace_seconds=opts.grace.total_seconds(),
        erasure_grace_seconds=opts.erasure_grace.total_seconds(),
        versioned=versioned,
        head_version=marks.head_version,
        marked_through=marks.marked_through,
        oldest_kept_version=marks.oldest_kept,
        kept_versions=len(marks.kept),
        expire_below=sel.expire_below,
        candidates={c: candidates[c] for c in CATEGORIES if c in candidates},
        young=sel.young,
        batches=tuple(batches),
        truncated=truncated,
        erasures=sel.erasures,
    )
    workspace.write("plan.json", plan)
    log.info(
        "GC plan %s of %s: head v%s, kept %s versions from v%s, %s sweep batches%s",
        run_id,
        catalog.uri,
        marks.head_version,
        len(marks.kept),
        marks.oldest_kept,
        len(batches),
        " (truncated)" if truncated else "",
    )
    return plan


def _stats(entries: Iterable[tuple[Category, int]]) -> dict[Category, CategoryStats]:
    out: dict[Category, CategoryStats] = {}
    for cat, size in entries:
        out[cat] = out.get(cat, CategoryStats()) + CategoryStats(objects=1, bytes=size)
    return {c: out[c] for c in CATEGORIES if c in out}


def _keys(entries: Iterable[tuple[Category, str]]) -> dict[Category, tuple[str, ...]]:
    out: dict[Category, list[str]] = defaultdict(list)
    for cat, path in entries:
        out[cat].append(path)
    return {c: tuple(out[c]) for c in CATEGORIES if c in out}


def _sweep(
    catalog: Catalog,
    batch: BatchDocument,
    *,
    now: datetime,
    dry_run: bool,
    hooks: GcHooks | None,
) -> StepResult:
    """Delete one batch, after re-checking each key's age and that no manifest committed
    since the plan references it."""
    if hooks is not None and hooks.before_sweep is not None:
        hooks.before_sweep(batch.index)
    fresh = newly_referenced(catalog, batch.table_uuid, batch.marked_through)
    grace = timedelta(seconds=batch.grace_seconds)
    erasure_grace = timedelta(seconds=batch.erasure_grace_seconds)
    skipped: Counter[str] = Counter()
    chosen: list[BatchEntry] = []
    for e in batch.entries:
        if category(e.path) != e.category or e.category == "manifest":
            skipped["foreign"] += 1  # never trust a batch to name keys outside the GC areas
        elif e.path in fresh:
            skipped["referenced"] += 1
        elif e.category != "workspace" and not (
            is_old(as_utc(e.erased_at), now, erasure_grace, s3_time=False)
            if e.erased_at is not None
            else is_old(as_utc(e.last_modified), now, grace)
        ):
            skipped["young"] += 1  # the plan's clock was ahead, or the batch is not ours
        else:
            chosen.append(e)
    if hooks is not None and hooks.before_delete is not None:
        hooks.before_delete(batch.index, [e.path for e in chosen])
    failed: set[str] = set()
    if not dry_run and chosen:
        failed = {
            relative(catalog, k)
            for k in catalog.store.delete_many(catalog.key(e.path) for e in chosen)
        }
    done = [e for e in chosen if e.path not in failed]
    if skipped["referenced"]:
        log.info(
            "GC sweep %s batch %s: %s keys referenced by commits since the plan were spared",
            batch.run_id,
            batch.index,
            skipped["referenced"],
        )
    return StepResult(
        step="sweep",
        run_id=batch.run_id,
        dry_run=dry_run,
        deleted=_stats((e.category, e.size) for e in done),
        keys=_keys((e.category, e.path) for e in done),
        skipped=dict(skipped),
        failed=tuple(sorted(failed)),
    )


def _expire(catalog: Catalog, plan: PlanDocument, *, dry_run: bool) -> StepResult:
    """Delete manifests older than the oldest kept version (never the head's)."""
    head, _ = catalog.read_head()
    if head.table_uuid != plan.table_uuid:
        raise GcConflict(
            f"the table at {catalog.uri} was replaced after GC run {plan.run_id} planned"
        )
    below = min(plan.expire_below, head.version)
    doomed = [
        o
        for o in list_objects(catalog, (MANIFESTS,))
        if (v := manifest_version(o.path)) is not None and v < below
    ]
    failed: set[str] = set()
    if not dry_run and doomed:
        failed = {
            relative(catalog, k)
            for k in catalog.store.delete_many(catalog.key(o.path) for o in doomed)
        }
    done = [o for o in doomed if o.path not in failed]
    return StepResult(
        step="expire",
        run_id=plan.run_id,
        dry_run=dry_run,
        deleted=_stats(("manifest", o.size) for o in done),
        keys=_keys(("manifest", o.path) for o in done),
        failed=tuple(sorted(failed)),
    )


def _abort(catalog: Catalog, plan: PlanDocument, *, now: datetime, dry_run: bool) -> StepResult:
    """Abort multipart uploads under the table initiated more than the grace period ago
    whose newest part (if any) is as old: an upload still receiving parts is not stale.
    (moto reports every upload as initiated in 2010; only the parts' times are real there.)"""
    grace = timedelta(seconds=plan.grace_seconds)
    skipped: Counter[str] = Counter()
    done: list[tuple[str, int]] = []
    failed: list[str] = []
    for u in catalog.store.list_multipart(catalog.key("")):
        if not is_old(as_utc(u.initiated), now, grace):
            skipped["young"] += 1
            continue
        parts = catalog.store.list_parts(u.key, u.upload_id)
        newest = max((t for p in parts if (t := as_utc(p[2])) is not None), default=None)
        if newest is not None and not is_old(newest, now, grace):
            skipped["active"] += 1
            continue
        if not dry_run:
            try:
                catalog.store.abort_multipart(u.key, u.upload_id)
            except errors.StoreError as e:
                log.warning("GC could not abort an upload of %s: %s", catalog.uri, e)
                failed.append(relative(catalog, u.key))
                continue
        done.append((relative(catalog, u.key), sum(p[1] for p in parts)))
    return StepResult(
        step="abort",
        run_id=plan.run_id,
        dry_run=dry_run,
        deleted=_stats(("upload", size) for _, size in done),
        keys=_keys(("upload", k) for k, _ in done),
        skipped=dict(skipped),
        failed=tuple(failed),
    )


def _pending_erasures(plan: PlanDocument) -> list[ErasurePlan]:
    return [
        e
        for e in plan.erasures
        if e.state == "spliced"
        and e.spliced_version is not None
        and e.previously_completed_at is None
    ]


def _purge(catalog: Catalog, plan: PlanDocument, *, dry_run: bool) -> StepResult:
    """Versioned buckets: delete every version and delete marker of *deleted* keys (latest
    version is a delete marker) that may have held an incomplete erasure's rows: data and
    staging objects with a version written before its splice, manifests older than it.
    Live keys are never touched; other deleted keys are left to the bucket's lifecycle."""
    pending = _pending_erasures(plan)
    if not plan.versioned or not pending:
        reason = "not_versioned" if not plan.versioned else "no_pending_erasures"
        return StepResult(step="purge", run_id=plan.run_id, dry_run=dry_run, skipped={reason: 1})
    by_key: dict[str, list[S3Store.ObjectVersion]] = defaultdict(list)
    for prefix in (*VALUE_PREFIXES, MANIFESTS):
        for v in catalog.store.list_object_versions(catalog.key(prefix)):
            by_key[v.key].append(v)
    targets: list[tuple[str, str]] = []
    owners: dict[tuple[str, str], list[str]] = {}
    sizes: dict[tuple[str, str], int] = {}
    skipped: Counter[str] = Counter()
    for key, versions in sorted(by_key.items()):
        latest = [v for v in versions if v.is_latest]
        if latest and not latest[0].is_delete_marker:
            skipped["live"] += 1
            continue
        rel = relative(catalog, key)
        mv = manifest_version(rel)
        if mv is not None:
            held = [
                e.id_hash
                for e in pending
                if e.spliced_version is not None and mv < e.spliced_version
            ]
        elif rel.startswith(MANIFESTS):
            continue
        else:
            written = [
                t for v in versions if not v.is_delete_marker and (t := as_utc(v.last_modified))
            ]
            # a key left with delete markers only holds nothing: clean it up with the rest
            held = [
                e.id_hash
                for e in pending
                if not written or e.spliced_at is None or any(t <= e.spliced_at for t in written)
            ]
        if not held:
            skipped["unrelated"] += 1
            continue
        for v in versions:
            item = (key, v.version_id)
            targets.append(item)
            owners[item] = held
            sizes[item] = v.size
    failed: set[tuple[str, str]] = set()
    if not dry_run and targets:
        failed = set(catalog.store.delete_versions(targets))
    remaining: Counter[str] = Counter()
    for item in failed:
        for h in owners.get(item, ()):
            remaining[h] += 1
    done = [t for t in targets if t not in failed]
    return StepResult(
        step="purge",
        run_id=plan.run_id,
        dry_run=dry_run,
        deleted=_stats(("version", sizes[t]) for t in done),
        keys=_keys(("version", f"{relative(catalog, k)}?versionId={vid}") for k, vid in done),
        skipped=dict(skipped),
        failed=tuple(sorted(f"{relative(catalog, k)}?versionId={vid}" for k, vid in failed)),
        versions_remaining={h: remaining.get(h, 0) for h in (e.id_hash for e in pending)},
    )


def _report(
    catalog: Catalog,
    plan: PlanDocument,
    results: Sequence[StepResult],
    *,
    now: datetime,
    dry_run: bool,
    missing: Sequence[str] = (),
) -> GcReport:
    """Combine the step results and decide, per erasure request, whether it is complete."""
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
    value_cats: tuple[Category, ...] = ("data", "staging", "manifest")
    gone = {k for cat in value_cats for k in keys.get(cat, [])}
    fresh = newly_referenced(catalog, plan.table_uuid, plan.marked_through)
    present = {o.path for o in list_objects(catalog, (*VALUE_PREFIXES, MANIFESTS))}
    if dry_run:
        present -= gone  # what would remain
    manifests_left = sorted(v for p in present if (v := manifest_version(p)) is not None)
    statuses: list[ErasureStatus] = []
    for e in plan.erasures:
        if e.previously_completed_at is not None:
            statuses.append(
                ErasureStatus(
                    id_hash=e.id_hash,
                    state=e.state,
                    deleted_version=e.deleted_version,
                    spliced_version=e.spliced_version,
                    complete=True,
                    completed_at=e.previously_completed_at,
                )
            )
            continue
        blocking: list[str] = []
        if e.state != "spliced" or e.spliced_version is None:
            blocking.append("its rows are not spliced out yet (erasure pending)")
        else:
            older = [v for v in manifests_left if v < e.spliced_version]
            if older:
                blocking.append(
                    f"{len(older)} manifest(s) from before the splice (v{older[0]}..v{older[-1]}) "
                    "are still retained"
                )
            left = [p for p in e.blockers if p in present and p not in fresh]
            sup = sum(1 for p in left if p in e.superseded)
            if sup:
                blocking.append(f"{sup} superseded file(s) remain")
            if len(left) > sup:
                blocking.append(
                    f"{len(left) - sup} unreferenced object(s) written before the splice remain "
                    "(younger than the grace period)"
                )
            if plan.versioned and versions_remaining.get(e.id_hash):
                blocking.append(f"{versions_remaining[e.id_hash]} old object version(s) remain")
        complete = not blocking
        completed_at: datetime | None = None
        completed_run: str | None = None
        if complete:
            completed_at, completed_run = now, plan.run_id
            if not dry_run and e.spliced_version is not None:
                completed_at, completed_run = _mark_complete(catalog, e, now, plan.run_id)
        statuses.append(
            ErasureStatus(
                id_hash=e.id_hash,
                state=e.state,
                deleted_version=e.deleted_version,
                spliced_version=e.spliced_version,
                complete=complete,
                completed_at=completed_at,
                completed_run=completed_run,
                newly_complete=complete,
                blocking=tuple(blocking),
            )
        )
    total = sum(len(v) for v in keys.values())
    kept_keys: dict[Category, tuple[str, ...]] = {}
    budget = REPORT_KEY_LIMIT
    for cat in CATEGORIES:
        if cat in keys:
            kept_keys[cat] = tuple(keys[cat][: max(0, budget)])
            budget -= len(kept_keys[cat])
    return GcReport(
        table=plan.table,
        run_id=plan.run_id,
        dry_run=dry_run,
        started_at=plan.created_at,
        finished_at=now,
        retention=plan.retention,
        grace_seconds=plan.grace_seconds,
        erasure_grace_seconds=plan.erasure_grace_seconds,
        versioned=plan.versioned,
        head_version=plan.head_version,
        oldest_kept_version=plan.oldest_kept_version,
        kept_versions=plan.kept_versions,
        deleted=deleted,
        young=plan.young,
        keys=kept_keys,
        keys_truncated=total > REPORT_KEY_LIMIT,
        failed=tuple(failed),
        truncated=plan.truncated,
        erasures=tuple(statuses),
    )


def _mark_complete(
    catalog: Catalog, e: ErasurePlan, now: datetime, run_id: str
) -> tuple[datetime, str]:
    """Write the erasure's completion marker once (create-only); return the first time."""
    assert e.spliced_version is not None
    key = catalog.key(f"{MARKERS}{e.id_hash}.json")
    marker = ErasureMarker(
        id_hash=e.id_hash, spliced_version=e.spliced_version, completed_at=now, run_id=run_id
    )
    try:
        catalog.store.put(key, marker.model_dump_json().encode(), if_none_match=True)
        log.info("erasure %s of %s is complete", e.id_hash, catalog.uri)
        return now, run_id
    except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
        earlier = decode(catalog.store.get(key).body, ErasureMarker, key)
        return earlier.completed_at, earlier.run_id


# --- entry points ---------------------------------------------------------------------------
def _catalog(table_or_uri: Table | str, s3: Any | None = None) -> Catalog:
    if isinstance(table_or_uri, str):
        bucket, prefix = parse_s3_uri(table_or_uri)
        return Catalog(S3Store(bucket, client=s3), prefix)
    return table_or_uri.catalog


def collect(
    table_or_uri: Table | str,
    *,
    retention: str | timedelta | Retention = DEFAULT_RETENTION,
    grace: str | timedelta | float | None = None,
    erasure_grace: str | timedelta | float = DEFAULT_ERASURE_GRACE,
    dry_run: bool = False,
    versioned: bool | None = None,
    now: datetime | None = None,
    s3: Any | None = None,
    hooks: GcHooks | None = None,
    batch_keys: int = BATCH_KEYS,
) -> GcReport:
    """Garbage-collect one table in this process (what ``lethe gc`` runs).

    Args:
        table_or_uri: a :class:`~lethe.Table` or ``s3://bucket/prefix``.
        retention: versions that stay readable: ``"30d"`` (age), ``"1000v"`` (count), or
            ``"30d,1000v"`` (either keeps a version); the head always stays.
        grace: unreferenced objects younger than this are kept (an uncommitted writer may
            still commit them); also the minimum age of an aborted multipart upload. Default
            and minimum: the table's ``gc_grace`` property, which its writers obey
            (:mod:`lethe.grace`); a shorter value is raised to it.
        erasure_grace: for files superseded by an erasure splice, the time since the splice
            commit after which they go (readers of just-expired snapshots finish meanwhile).
        dry_run: compute and report everything, delete nothing, write nothing.
        versioned: whether the bucket keeps object versions (None: ask the bucket).
        now: the time ages are measured against (tests); default: the clock.
        s3: a boto3 S3 client (default: one from the environment).
        hooks: test seams (see :class:`GcHooks`).
        batch_keys: keys per DeleteObjects batch (at most 1,000).

    Returns:
        The :class:`~lethe.gc.models.GcReport`; unless ``dry_run`` it is also written to
        ``_gc/<run id>/report.json``, and each erasure found complete gets its marker.

    Example:
        >>> r = collect("s3://bucket/events", retention="7d", grace="1d", dry_run=True)  # doctest: +SKIP
        >>> r.deleted["data"].objects, r.complete_erasures                              # doctest: +SKIP
        (12, ())
    """
    catalog = _catalog(table_or_uri, s3)
    opts = options(
        retention=retention,
        grace=grace,
        erasure_grace=erasure_grace,
        dry_run=dry_run,
        versioned=versioned,
    )
    started = now or datetime.now(UTC)
    run_id = new_run_id(started)
    ws = MemoryWorkspace()
    plan = _plan(
        catalog,
        opts,
        run_id=run_id,
        now=started,
        workspace=ws,
        hooks=hooks,
        max_batches=None,
        batch_keys=batch_keys,
    )
    # Manifests first: an interruption then leaves unreferenced garbage (swept next time),
    # never a retained-looking manifest whose files are gone.
    results = [_expire(catalog, plan, dry_run=dry_run)]
    for name in plan.batches:
        batch = ws.read(name, BatchDocument)
        results.append(
            _sweep(catalog, batch, now=now or datetime.now(UTC), dry_run=dry_run, hooks=hooks)
        )
    results.append(_abort(catalog, plan, now=now or datetime.now(UTC), dry_run=dry_run))
    results.append(_purge(catalog, plan, dry_run=dry_run))
    report = _report(catalog, plan, results, now=now or datetime.now(UTC), dry_run=dry_run)
    if not dry_run:
        S3Workspace(catalog, run_id).write("report.json", report)
    log.info(
        "GC %s of %s: %s objects, %s bytes%s",
        run_id,
        catalog.uri,
        report.objects_deleted,
        report.bytes_deleted,
        " (dry run)" if dry_run else "",
    )
    return report


def plan_step(
    uri: str,
    *,
    dry_run: bool = False,
    retention: str | timedelta | Retention = DEFAULT_RETENTION,
    grace: str | timedelta | float | None = None,
    erasure_grace: str | timedelta | float = DEFAULT_ERASURE_GRACE,
    versioned: bool | None = None,
    run_id: str | None = None,
    now: datetime | None = None,
    s3: Any | None = None,
    batch_keys: int = BATCH_KEYS,
) -> PlanState:
    """Workflow step Plan: list, mark, write ``plan.json`` and the sweep batches (of at most
    ``batch_keys`` <= 1,000 keys) under ``_gc/<run id>/``; return the compact state the
    workflow carries (batch URIs).

    Example:
        >>> st = plan_step("s3://bucket/events", grace="7d")  # doctest: +SKIP
        >>> st.batches[0]                                       # doctest: +SKIP
        's3://bucket/events/_gc/20261122T030000Z-1a2b3c4d/batch-0000.json'
    """
    catalog = _catalog(uri, s3)
    opts = options(
        retention=retention,
        grace=grace,
        erasure_grace=erasure_grace,
        dry_run=dry_run,
        versioned=versioned,
    )
    now = now or datetime.now(UTC)
    run_id = run_id or new_run_id(now)
    plan = _plan(
        catalog,
        opts,
        run_id=run_id,
        now=now,
        workspace=S3Workspace(catalog, run_id),
        hooks=None,
        max_batches=MAX_BATCHES,
        batch_keys=batch_keys,
    )
    return PlanState(
        table=plan.table,
        run_id=run_id,
        dry_run=plan.dry_run,
        head_version=plan.head_version,
        oldest_kept_version=plan.oldest_kept_version,
        candidates=plan.candidates,
        batches=plan.batches,
        truncated=plan.truncated,
    )


def _load_batch(batch_uri: str, s3: Any | None) -> tuple[Catalog, BatchDocument]:
    bucket, key = parse_s3_uri(batch_uri)
    store = S3Store(bucket, client=s3)
    try:
        raw = store.get(key).body
    except errors.NotFound as e:
        raise GcRunNotFound(f"GC batch {batch_uri} does not exist") from e
    batch = decode(raw, BatchDocument, batch_uri)
    t_bucket, prefix = parse_s3_uri(batch.table)
    if t_bucket != bucket or not key.startswith(f"{prefix}/{WORKSPACE}{batch.run_id}/".lstrip("/")):
        raise errors.InvalidRequest(f"{batch_uri} is not a batch of GC run {batch.run_id}")
    return Catalog(store, prefix), batch


def sweep_step(
    batch_uri: str, *, dry_run: bool = False, now: datetime | None = None, s3: Any | None = None
) -> StepResult:
    """Workflow step Sweep (one Map item): delete one batch (re-checked against the current
    head and the grace period), record ``sweep-NNNN.json``. A re-run deletes nothing new.

    Example:
        >>> uri = "s3://bucket/events/_gc/20261122T030000Z-1a2b3c4d/batch-0000.json"
        >>> sweep_step(uri).skipped  # a commit since the plan referenced one key   # doctest: +SKIP
        {'referenced': 1}
    """
    catalog, batch = _load_batch(batch_uri, s3)
    result = _sweep(
        catalog,
        batch,
        now=now or datetime.now(UTC),
        dry_run=dry_run or batch.dry_run,
        hooks=None,
    )
    S3Workspace(catalog, batch.run_id).write(f"sweep-{batch.index:04d}.json", result)
    return result


def _run(uri: str, run_id: str, s3: Any | None) -> tuple[Catalog, S3Workspace, PlanDocument]:
    catalog = _catalog(uri, s3)
    ws = S3Workspace(catalog, run_id)
    return catalog, ws, ws.read("plan.json", PlanDocument)


def expire_step(
    uri: str, run_id: str, *, dry_run: bool = False, s3: Any | None = None
) -> StepResult:
    """Workflow step Expire: delete the manifests older than the run's oldest kept version.

    Example:
        >>> expire_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d").deleted  # doctest: +SKIP
        {'manifest': CategoryStats(objects=12, bytes=48211)}
    """
    catalog, ws, plan = _run(uri, run_id, s3)
    result = _expire(catalog, plan, dry_run=dry_run or plan.dry_run)
    ws.write("expire.json", result)
    return result


def abort_step(
    uri: str,
    run_id: str,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    s3: Any | None = None,
) -> StepResult:
    """Workflow step Abort: abort multipart uploads older (and idle longer) than the grace.

    Example:
        >>> abort_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d").keys  # doctest: +SKIP
        {'upload': ('data/2026/11/15/09/4f1c….parquet',)}
    """
    catalog, ws, plan = _run(uri, run_id, s3)
    result = _abort(catalog, plan, now=now or datetime.now(UTC), dry_run=dry_run or plan.dry_run)
    ws.write("abort.json", result)
    return result


def purge_step(
    uri: str, run_id: str, *, dry_run: bool = False, s3: Any | None = None
) -> StepResult:
    """Workflow step Purge: in a versioned bucket, remove the old versions of erased data.

    Example:
        >>> purge_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d").versions_remaining  # doctest: +SKIP
        {'5f0c…': 0}
    """
    catalog, ws, plan = _run(uri, run_id, s3)
    result = _purge(catalog, plan, dry_run=dry_run or plan.dry_run)
    ws.write("purge.json", result)
    return result


def report_step(
    uri: str,
    run_id: str,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    s3: Any | None = None,
) -> GcReport:
    """Workflow step Report: combine the step results, mark completed erasures, write
    ``report.json`` (which also marks the run finished, so the next run cleans its files).

    Example:
        >>> rep = report_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d")  # doctest: +SKIP
        >>> rep.complete_erasures, rep.summary()["deleted"]                         # doctest: +SKIP
        (('5f0c…',), {'data': {'objects': 3, 'bytes': 80112}})
    """
    catalog, ws, plan = _run(uri, run_id, s3)
    results: list[StepResult] = []
    missing: list[str] = []
    for i in range(len(plan.batches)):
        try:
            results.append(ws.read(f"sweep-{i:04d}.json", StepResult))
        except GcRunNotFound:
            missing.append(f"batch-{i:04d}.json (no sweep result)")
    for name in ("expire.json", "abort.json", "purge.json"):
        try:
            results.append(ws.read(name, StepResult))
        except GcRunNotFound:
            missing.append(f"{name} (step result missing)")
    report = _report(
        catalog,
        plan,
        results,
        now=now or datetime.now(UTC),
        dry_run=dry_run or plan.dry_run,
        missing=missing,
    )
    ws.write("report.json", report)
    return report


def _infer_step(state: Mapping[str, Any]) -> str:
    if "plan" not in state and "run_id" not in state:
        return "Plan"
    if "run_id" not in state:
        return "SweepBatches"
    for key, name in (("expire", "Expire"), ("abort", "Abort"), ("purge", "Purge")):
        if key not in state:
            return name
    return "Report"


def record_failure(
    uri: str,
    state: Mapping[str, Any],
    *,
    now: datetime | None = None,
    s3: Any | None = None,
) -> str:
    """Workflow step RecordFailure: write the Catch's ``$.error`` (Error, Cause) and the
    failed step (inferred from which results the state holds) to ``_gc/<run>/failure.json``.
    Returns the object's URI.

    Example:
        >>> record_failure("s3://b/t", {"run_id": "20261122T030000Z-1a2b3c4d",
        ...                "error": {"Error": "GcConflict", "Cause": "..."}})  # doctest: +SKIP
        's3://b/t/_gc/20261122T030000Z-1a2b3c4d/failure.json'
    """
    now = now or datetime.now(UTC)
    catalog = _catalog(uri, s3)
    plan = state.get("plan")
    run_id = state.get("run_id") or (plan.get("run_id") if isinstance(plan, Mapping) else None)
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        run_id = new_run_id(now)
    err = state.get("error")
    err = err if isinstance(err, Mapping) else {}
    cause = str(err.get("Cause", ""))
    record = FailureRecord(
        run_id=run_id,
        step=_infer_step(state),
        error=str(err.get("Error", "unknown")),
        cause=cause[:MAX_CAUSE_CHARS],
        recorded_at=now,
    )
    return S3Workspace(catalog, run_id).write("failure.json", record)


# --- command line ---------------------------------------------------------------------------
def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lethe gc`` on the ``lethe`` command's subparsers; returns the parser.

    ``lethe gc s3://b/t [--dry-run] [--retention 30d|1000v] [--grace 7d]
    [--erasure-grace 1h] [--versioned|--not-versioned] [--json] [--show N]``
    """
    c: argparse.ArgumentParser = subparsers.add_parser(
        "gc",
        help="garbage-collect: unreferenced files, expired versions, stale uploads",
        description="Delete objects no retained version references (older than the grace "
        "period), expire versions past retention, abort stale multipart uploads, purge old "
        "versions of erased data, and report which erasure requests are complete.",
    )
    c.add_argument("uri")
    c.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    c.add_argument(
        "--retention",
        default=DEFAULT_RETENTION,
        help="versions to keep: 30d (age), 1000v (count) or 30d,1000v (either); default %(default)s",
    )
    c.add_argument(
        "--grace",
        default=None,
        help="keep unreferenced objects younger than this (default and minimum: the "
        "table's gc_grace property)",
    )
    c.add_argument(
        "--erasure-grace",
        default=DEFAULT_ERASURE_GRACE,
        help="delete files superseded by an erasure splice this long after it (default %(default)s)",
    )
    v = c.add_mutually_exclusive_group()
    v.add_argument("--versioned", dest="versioned", action="store_true", default=None)
    v.add_argument("--not-versioned", dest="versioned", action="store_false")
    c.add_argument("--json", action="store_true", help="print the full report as JSON")
    c.add_argument(
        "--show",
        type=int,
        default=None,
        help="list up to N keys per category (default: 50 in a dry run, 0 otherwise)",
    )
    c.set_defaults(fn=cli_command)
    return c


def cli_command(args: argparse.Namespace) -> int:
    """Run ``lethe gc`` with parsed arguments; exit status 1 if some deletion failed."""
    report = collect(
        args.uri,
        retention=args.retention,
        grace=args.grace,
        erasure_grace=args.erasure_grace,
        dry_run=args.dry_run,
        versioned=args.versioned,
    )
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(report.describe())
        show = args.show if args.show is not None else (50 if args.dry_run else 0)
        for cat, ks in report.keys.items():
            for k in ks[:show]:
                print(f"  {cat:<10} {k}")
            if show and len(ks) > show:
                print(f"  {cat:<10} … and {len(ks) - show} more")
    return 1 if report.failed else 0
