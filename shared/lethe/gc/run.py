"""One whole GC run in this process: :func:`collect` (what ``lethe gc`` runs)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from lethe.catalog.commit import Catalog
from lethe.catalog.context import TableContext
from lethe.erasure.retention import RetentionSweepResult, RowRetention
from lethe.erasure.retention import sweep as retention_sweep
from lethe.gc.actions import abort, expire, open_catalog, sweep, write_plan
from lethe.gc.areas import new_run_id
from lethe.gc.models import BatchDocument, GcReport, PlanDocument, StepResult
from lethe.gc.policy import (
    DEFAULT_ERASURE_GRACE,
    DEFAULT_RETENTION,
    Retention,
    Tuning,
    floor_grace,
    options,
)
from lethe.gc.purge import purge
from lethe.gc.report import build_report
from lethe.gc.workspace import MemoryWorkspace, S3Workspace
from lethe.progress import Progress, track

log = logging.getLogger(__name__)

__all__ = ["collect", "sweep_retention"]


def collect(
    table_or_uri: Any,
    *,
    retention: str | timedelta | Retention = DEFAULT_RETENTION,
    grace: str | timedelta | float | None = None,
    erasure_grace: str | timedelta | float = DEFAULT_ERASURE_GRACE,
    dry_run: bool = False,
    now: datetime | None = None,
    s3: Any | None = None,
    progress: Progress | None = None,
    tuning: Tuning | None = None,
) -> GcReport:
    """Garbage-collect one table in this process (what ``lethe gc`` runs).

    Args:
        table_or_uri: a :class:`~lethe.Table` or ``s3://bucket/prefix``.
        retention: versions that stay readable: ``"30d"`` (age), ``"1000v"`` (count), or
            ``"30d,1000v"`` (either keeps a version); the head always stays.
        grace: unreferenced objects younger than this are kept (an uncommitted writer may
            still commit them), and of an aborted upload. Default and minimum: the table's
            ``gc_grace`` (:mod:`lethe.catalog.grace`); a shorter one is refused (InvalidRequest).
        erasure_grace: what an erasure superseded goes this long after its splice commit,
            whatever ``retention`` and ``grace`` say (the versions from before it expire, and
            all only they referenced, adopted originals included).
        dry_run: compute and report everything, delete nothing, write nothing.
        now: the time ages are measured against (tests); default: the clock.
        s3: a boto3 S3 client (default: one from the environment).
        progress: who hears of the plan (``"gc plan"``: the versions kept and marked) and of
            the sweep (``"gc sweep"``: candidate objects, batch by batch); README "Progress".
        tuning: whether the bucket keeps versions (default: ask it), keys per DeleteObjects
            batch (and a progress callback, when ``progress`` is not given).

    A table with a row retention is swept first (:func:`sweep_retention`, at ``now``): the
    rows past it are erased, whole files dropped, straddling files spliced.

    Returns:
        The :class:`~lethe.gc.models.GcReport`; unless ``dry_run`` it is also written to
        ``_gc/<run id>/report.json``, and each erasure found complete gets its marker.

    Example:
        >>> r = collect("s3://bucket/events", retention="7d", grace="1d", dry_run=True)  # doctest: +SKIP
        >>> r.deleted["data"].objects, r.complete_erasures                              # doctest: +SKIP
        (12, ())
    """
    catalog = open_catalog(table_or_uri, s3)
    if progress is not None:
        tuning = dataclasses.replace(tuning or Tuning(), progress=progress)
    opts = options(retention, grace, erasure_grace, dry_run=dry_run, tuning=tuning)
    started = now or datetime.now(UTC)
    floor_grace(opts, _table_grace(catalog))  # refused before anything changes
    sweep_retention(catalog, now=started, dry_run=dry_run)
    run_id, ws, progress = new_run_id(started), MemoryWorkspace(), opts.tuning.progress
    with track(progress, "gc plan", total=None, unit="versions") as planning:
        plan = write_plan(catalog, opts, run_id=run_id, now=started, workspace=ws, max_batches=None)
        planning.advance(plan.kept_versions)
    results = _apply(catalog, plan, ws, now=now, dry_run=dry_run, progress=progress)
    return _close(
        catalog, build_report(catalog, plan, results, now=now or datetime.now(UTC), dry_run=dry_run)
    )


def _close(catalog: Catalog, report: GcReport) -> GcReport:
    """Write the run's ``report.json`` (not in a dry run) and log its totals."""
    if not report.dry_run:
        S3Workspace(catalog, report.run_id).write("report.json", report)
    log.info(
        "GC %s of %s: %s objects, %s bytes%s",
        report.run_id,
        catalog.uri,
        report.objects_deleted,
        report.bytes_deleted,
        " (dry run)" if report.dry_run else "",
    )
    return report


def _table_grace(catalog: Catalog) -> timedelta:
    head, _ = catalog.current()
    return timedelta(seconds=head.properties.gc_grace_seconds)


def sweep_retention(
    catalog: Catalog, *, now: datetime, dry_run: bool = False
) -> RetentionSweepResult | None:
    """The table's row-retention sweep (:func:`lethe.erasure.retention.sweep`), first thing in every
    GC run: expired rows are erased on the GC schedule. None when the table declares no
    retention."""
    head, _ = catalog.current()
    if RowRetention.of(head.properties) is None:
        return None
    r = retention_sweep(TableContext(catalog, head), now=now, dry_run=dry_run)
    log.info("GC retention sweep of %s: %s", catalog.uri, r.describe())
    return r


def _apply(
    catalog: Catalog,
    plan: PlanDocument,
    ws: MemoryWorkspace,
    *,
    now: datetime | None,
    dry_run: bool,
    progress: Progress | None = None,
) -> list[StepResult]:
    """Expire, sweep every batch, abort, purge; each step's clock is read when it starts."""
    # Manifests first: an interruption then leaves unreferenced garbage (swept next time),
    # never a retained-looking manifest whose files are gone.
    results = [expire(catalog, plan, dry_run=dry_run)]
    batches = [ws.read(name, BatchDocument) for name in plan.batches]
    total = sum(len(b.entries) for b in batches)
    with track(progress, "gc sweep", total=total, unit="objects") as sweeping:
        for batch in batches:
            results.append(sweep(catalog, batch, now=now or datetime.now(UTC), dry_run=dry_run))
            sweeping.advance(len(batch.entries))
    results.append(abort(catalog, plan, now=now or datetime.now(UTC), dry_run=dry_run))
    results.append(purge(catalog, plan, dry_run=dry_run))
    return results
