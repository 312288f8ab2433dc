"""The steps of a GC run that read and change the bucket: plan, sweep, expire, abort (purge:
:mod:`lethe.gc.purge`).

:func:`lethe.gc.collect` runs them in one process; the Step Functions workflow runs each in
its own Lambda (:mod:`lethe.gc.workflow`). Each returns a serializable document
(:mod:`lethe.gc.models`) and is idempotent: deleting a deleted key succeeds.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from lethe import errors
from lethe.catalog.changes import ArchiveErasures
from lethe.catalog.commit import Catalog, Direct
from lethe.errors import GcConflict
from lethe.gc.areas import (
    MANIFESTS,
    MARKERS,
    SWEPT,
    WORKSPACE,
    category,
    manifest_version,
    released,
)
from lethe.gc.marking import external_superseded, list_objects, mark, newly_referenced, relative
from lethe.gc.models import (
    BatchDocument,
    BatchEntry,
    Category,
    ErasureMarker,
    PlanDocument,
    StepResult,
)
from lethe.gc.policy import Options, as_utc, floor_grace, is_old
from lethe.gc.select import Listed, Marks, Selection, batches, candidates, expiring, select
from lethe.gc.workspace import Workspace, decode
from lethe.storage.store import S3Store, parse_s3_uri

log = logging.getLogger(__name__)

__all__ = ["abort", "expire", "open_catalog", "sweep", "write_plan"]


def open_catalog(table_or_uri: Any, s3: Any | None = None) -> Catalog:
    """The catalog of ``s3://bucket/prefix``, or the one a table handle names (anything
    with a ``catalog``: a :class:`~lethe.Table`, a :class:`~lethe.catalog.context.TableContext`)."""
    if isinstance(table_or_uri, str):
        bucket, prefix = parse_s3_uri(table_or_uri)
        return Catalog(S3Store(bucket, client=s3), prefix)
    if isinstance(table_or_uri, Catalog):
        return table_or_uri
    catalog = getattr(table_or_uri, "catalog", None)
    if not isinstance(catalog, Catalog):
        raise errors.InvalidRequest(
            f"GC takes a table or an s3://bucket/prefix URI, not {type(table_or_uri).__name__}"
        )
    return catalog


# --- plan -----------------------------------------------------------------------------------
def write_plan(
    catalog: Catalog,
    opts: Options,
    *,
    run_id: str,
    now: datetime,
    workspace: Workspace,
    max_batches: int | None,
) -> PlanDocument:
    """List, mark, select; write the sweep batches and ``plan.json`` to ``workspace``."""
    opts, marks, listing, sel = _select(catalog, opts, run_id=run_id, now=now)
    versioned = opts.tuning.versioned
    if versioned is None:
        versioned = catalog.store.versioning() in ("Enabled", "Suspended")
    size = opts.tuning.batch_keys
    chunks, truncated = batches(sel.sweep, batch_keys=size, max_batches=max_batches)
    header = _header(catalog, opts, marks, run_id)
    written = tuple(
        workspace.write(f"batch-{i:04d}.json", BatchDocument(**header, index=i, entries=tuple(c)))
        for i, c in enumerate(chunks)
    )
    plan = PlanDocument(
        **header,
        created_at=now,
        retention=str(opts.retention),
        versioned=versioned,
        head_version=marks.head_version,
        oldest_kept_version=marks.oldest_kept,
        kept_versions=len(marks.kept),
        expire_below=sel.expire_below,
        candidates=candidates(chunks, expiring(listing, sel.expire_below)),
        young=sel.young,
        batches=written,
        truncated=truncated,
        erasures=sel.erasures,
        mapped_versions=tuple(sorted(marks.mapped)),
    )
    workspace.write("plan.json", plan)
    log.info(
        "GC plan %s of %s: head v%s, kept %s versions from v%s, %s sweep batches%s",
        run_id,
        catalog.uri,
        marks.head_version,
        len(marks.kept),
        marks.oldest_kept,
        len(written),
        " (truncated)" if truncated else "",
    )
    return plan


def _select(
    catalog: Catalog, opts: Options, *, run_id: str, now: datetime
) -> tuple[Options, Marks, list[Listed], Selection]:
    """List, mark (after listing: see lethe.gc's docstring), select: the options with their
    grace resolved, the marks, the listing and what may go."""
    listing = list_objects(catalog, (*SWEPT, WORKSPACE, MANIFESTS))
    # an erasure older than its grace cuts the window
    marks = mark(catalog, opts.retention, now, erasure_grace=opts.erasure_grace)
    if not opts.dry_run:  # before any sweep: the kept versions stop naming what goes
        rewrite_mapped(catalog, marks)
    listing = [*listing, *external_superseded(catalog, marks, listing)]  # adopted originals
    # the table's grace binds its writers (lethe.catalog.grace): a shorter one asked for is refused
    opts = floor_grace(opts, marks.gc_grace)
    grace, erasure_grace = opts.floor, opts.erasure_grace
    sel = select(listing, marks, grace=grace, erasure_grace=erasure_grace, now=now, run_id=run_id)
    return opts, marks, listing, sel


def _header(catalog: Catalog, opts: Options, marks: Marks, run_id: str) -> dict[str, Any]:
    """The :class:`~lethe.gc.models.RunHeader` fields the plan and its batches share."""
    return {
        "table": catalog.uri,
        "table_uuid": marks.table_uuid,
        "run_id": run_id,
        "dry_run": opts.dry_run,
        "marked_through": marks.marked_through,
        "grace_seconds": opts.floor.total_seconds(),
        "erasure_grace_seconds": opts.erasure_grace.total_seconds(),
    }


# --- the destructive steps ------------------------------------------------------------------
def rewrite_mapped(catalog: Catalog, marks: Marks) -> int:
    """Write anew the roots of the versions kept through an erasure whose mapped root
    differs from the stored one (issue 39, :mod:`lethe.gc.history`); returns how many."""
    n = 0
    for v, snap in sorted(marks.mapped.items()):
        if snap.manifest != catalog.read_manifest(v).manifest:
            catalog.rewrite_version(snap)
            n += 1
    if n:
        log.info("%s: %d version(s) kept through erasures were mapped", catalog.uri, n)
    return n


def sweep(catalog: Catalog, batch: BatchDocument, *, now: datetime, dry_run: bool) -> StepResult:
    """Delete one batch, after re-checking each key's age and that no manifest committed
    since the plan references it."""
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
        elif released(e.path, e.category, fresh, batch.marked_through):
            chosen.append(e)  # no writer can reference it: see lethe.gc.select
        elif e.category != "workspace" and not (
            is_old(as_utc(e.erased_at), now, erasure_grace, s3_time=False)
            if e.erased_at is not None
            else is_old(as_utc(e.last_modified), now, grace)
        ):
            skipped["young"] += 1  # the plan's clock was ahead, or the batch is not ours
        else:
            chosen.append(e)
    failed = _delete(catalog, [e.path for e in chosen], dry_run=dry_run)
    if skipped["referenced"]:
        log.info(
            "GC sweep %s batch %s: %s keys referenced by commits since the plan were spared",
            batch.run_id,
            batch.index,
            skipped["referenced"],
        )
    done = [(e.category, e.path, e.size) for e in chosen if e.path not in failed]
    return StepResult.tally("sweep", batch.run_id, dry_run, done, skipped, sorted(failed))


def _delete(catalog: Catalog, paths: Sequence[str], *, dry_run: bool) -> set[str]:
    """Delete the table-relative ``paths`` (nothing in a dry run); the paths that failed."""
    if dry_run or not paths:
        return set()
    return {relative(catalog, k) for k in catalog.store.delete_many(catalog.key(p) for p in paths)}


def expire(catalog: Catalog, plan: PlanDocument, *, dry_run: bool) -> StepResult:
    """Delete manifests older than the oldest kept version (never the head's); then commit
    the completed erasures out of the root (:func:`archive`)."""
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
    failed = _delete(catalog, [o.path for o in doomed], dry_run=dry_run)
    done: list[tuple[Category, str, int]] = [
        ("manifest", o.path, o.size) for o in doomed if o.path not in failed
    ]
    archived = archive(catalog, plan, dry_run=dry_run)
    skipped = {"erasures_archived": archived} if archived else {}
    return StepResult.tally("expire", plan.run_id, dry_run, done, skipped, sorted(failed))


def archive(catalog: Catalog, plan: PlanDocument, *, dry_run: bool) -> int:
    """Commit the erasures an earlier run found complete out of the root (one
    :class:`~lethe.catalog.changes.ArchiveErasures` commit through the catalog's loop): those whose
    completion marker keeps their record, which receipts read from then on. Returns how many
    records left the root (would leave, in a dry run)."""
    done: set[str] = set()
    for e in plan.erasures:
        if e.state != "spliced" or e.previously_completed_at is None:
            continue
        key = catalog.key(f"{MARKERS}{e.id_hash}.json")
        try:
            marker = decode(catalog.store.get(key).body, ErasureMarker, key)
        except errors.NotFound:
            continue
        if marker.record is not None:
            done.add(e.id_hash)
    if not done:
        return 0
    if dry_run:
        head, _ = catalog.current()
        return sum(1 for e in head.erasures if e.state == "spliced" and e.id_hash in done)
    outcome = catalog.commit_change(Direct(ArchiveErasures(frozenset(done))))
    if outcome.manifest is None:
        return 0
    n = int(outcome.manifest.operation.params.get("erasures_archived") or 0)
    log.info(
        "%s: %d completed erasure(s) left the root (v%s)", catalog.uri, n, outcome.manifest.version
    )
    return n


def abort(catalog: Catalog, plan: PlanDocument, *, now: datetime, dry_run: bool) -> StepResult:
    """Abort multipart uploads under the table initiated more than the grace period ago
    whose newest part (if any) is as old: an upload still receiving parts is not stale.
    (moto reports every upload as initiated in 2010; only the parts' times are real there.)"""
    grace = timedelta(seconds=plan.grace_seconds)
    skipped: Counter[str] = Counter()
    done: list[tuple[Category, str, int]] = []
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
        done.append(("upload", relative(catalog, u.key), sum(p[1] for p in parts)))
    return StepResult.tally("abort", plan.run_id, dry_run, done, skipped, failed)
