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
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.catalog import Catalog
from lethe.errors import GcConflict, GcError, GcRunNotFound
from lethe.gc.actions import GcHooks, abort, expire, open_catalog, purge, sweep, write_plan
from lethe.gc.areas import (
    KEPT_WORKSPACE_FILES,
    MANIFESTS,
    MARKERS,
    RUN_ID,
    SWEPT,
    VALUE_PREFIXES,
    WORKSPACE,
    new_run_id,
)
from lethe.gc.marking import mark, newly_referenced
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
    Retention,
    options,
)
from lethe.gc.report import REPORT_KEY_LIMIT, build_report
from lethe.gc.select import BATCH_KEYS, MAX_BATCHES, Marks
from lethe.gc.workspace import MemoryWorkspace, S3Workspace, Workspace, decode
from lethe.grace import parse_duration
from lethe.store import S3Store, parse_s3_uri

if TYPE_CHECKING:  # pragma: no cover
    from lethe.table import Table

log = logging.getLogger(__name__)

__all__ = [
    "BATCH_KEYS",
    "CATEGORIES",
    "DEFAULT_ERASURE_GRACE",
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "KEPT_WORKSPACE_FILES",
    "MANIFESTS",
    "MARKERS",
    "MAX_BATCHES",
    "MAX_CAUSE_CHARS",
    "REPORT_KEY_LIMIT",
    "SWEPT",
    "VALUE_PREFIXES",
    "WORKSPACE",
    "WORKSPACE_GRACE",
    "BatchDocument",
    "BatchEntry",
    "Category",
    "CategoryStats",
    "ErasureMarker",
    "ErasurePlan",
    "ErasureStatus",
    "FailureRecord",
    "GcConflict",
    "GcError",
    "GcHooks",
    "GcReport",
    "GcRunNotFound",
    "Marks",
    "MemoryWorkspace",
    "PlanDocument",
    "PlanState",
    "Retention",
    "S3Workspace",
    "StepResult",
    "Workspace",
    "abort_step",
    "add_cli",
    "add_stats",
    "cli_command",
    "collect",
    "expire_step",
    "mark",
    "new_run_id",
    "newly_referenced",
    "parse_duration",
    "plan_step",
    "purge_step",
    "record_failure",
    "report_step",
    "sweep_step",
]

MAX_CAUSE_CHARS = 32_000


# --- entry points ---------------------------------------------------------------------------
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
    catalog = open_catalog(table_or_uri, s3)
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
    plan = write_plan(
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
    results = [expire(catalog, plan, dry_run=dry_run)]
    for name in plan.batches:
        batch = ws.read(name, BatchDocument)
        results.append(
            sweep(catalog, batch, now=now or datetime.now(UTC), dry_run=dry_run, hooks=hooks)
        )
    results.append(abort(catalog, plan, now=now or datetime.now(UTC), dry_run=dry_run))
    results.append(purge(catalog, plan, dry_run=dry_run))
    report = build_report(catalog, plan, results, now=now or datetime.now(UTC), dry_run=dry_run)
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
    catalog = open_catalog(uri, s3)
    opts = options(
        retention=retention,
        grace=grace,
        erasure_grace=erasure_grace,
        dry_run=dry_run,
        versioned=versioned,
    )
    now = now or datetime.now(UTC)
    run_id = run_id or new_run_id(now)
    plan = write_plan(
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
    result = sweep(
        catalog,
        batch,
        now=now or datetime.now(UTC),
        dry_run=dry_run or batch.dry_run,
        hooks=None,
    )
    S3Workspace(catalog, batch.run_id).write(f"sweep-{batch.index:04d}.json", result)
    return result


def _run(uri: str, run_id: str, s3: Any | None) -> tuple[Catalog, S3Workspace, PlanDocument]:
    catalog = open_catalog(uri, s3)
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
    result = expire(catalog, plan, dry_run=dry_run or plan.dry_run)
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
    result = abort(catalog, plan, now=now or datetime.now(UTC), dry_run=dry_run or plan.dry_run)
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
    result = purge(catalog, plan, dry_run=dry_run or plan.dry_run)
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
    report = build_report(
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
    catalog = open_catalog(uri, s3)
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
