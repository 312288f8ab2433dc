"""The Step Functions workflow's steps: one function per state, called by
``functions/gc_steps/handler.py``, each reading and writing the run's S3 workspace.

The state machine itself is built by ``infra/constructs/gc.py`` from :data:`STATES` and
:data:`RESULTS`: its state names, and where each state leaves its output (``$.<key>``), are
spelled once, here, since :func:`record_failure` tells the failed state from that output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.errors import GcRunNotFound
from lethe.gc.actions import abort, expire, open_catalog, sweep, write_plan
from lethe.gc.areas import RUN_ID, WORKSPACE, new_run_id
from lethe.gc.models import (
    BatchDocument,
    FailureRecord,
    GcReport,
    PlanDocument,
    PlanState,
    StepResult,
)
from lethe.gc.policy import (
    DEFAULT_ERASURE_GRACE,
    DEFAULT_RETENTION,
    MAX_BATCHES,
    Retention,
    Tuning,
    options,
)
from lethe.gc.purge import purge
from lethe.gc.report import build_report
from lethe.gc.run import sweep_retention
from lethe.gc.workspace import S3Workspace, decode
from lethe.storage.store import S3Store, parse_s3_uri

__all__ = [
    "MAX_CAUSE_CHARS",
    "RESULTS",
    "STATES",
    "ResultKeys",
    "StateNames",
    "abort_step",
    "expire_step",
    "plan_step",
    "purge_step",
    "record_failure",
    "report_step",
    "retention_step",
    "sweep_step",
]

MAX_CAUSE_CHARS = 32_000


@dataclass(frozen=True, slots=True)
class StateNames:
    """The names of the GC state machine's states."""

    retention: str = "Retention"  # the row-retention sweep, before the plan sees the head
    plan: str = "Plan"
    sweep_batches: str = "SweepBatches"  # the Map over $.plan.batches
    sweep: str = "Sweep"  # its item processor
    compact: str = "Compact"  # a Pass that drops the batch list
    expire: str = "Expire"
    abort: str = "Abort"
    purge: str = "Purge"
    report: str = "Report"
    done: str = "Done"
    record_failure: str = "RecordFailure"  # every step's Catch
    failed: str = "Failed"


@dataclass(frozen=True, slots=True)
class ResultKeys:
    """Where states put their output in the workflow state (``ResultPath`` ``$.<key>``)."""

    retention: str = "row_retention"  # not "retention": the Plan event's version retention
    plan: str = "plan"
    expire: str = "expire"
    abort: str = "abort"
    purge: str = "purge"
    report: str = "report"
    error: str = "error"  # a Catch's {"Error", "Cause"}


STATES: Final = StateNames()
RESULTS: Final = ResultKeys()


def retention_step(
    uri: str, *, dry_run: bool = False, now: datetime | None = None, s3: Any | None = None
) -> dict[str, Any]:
    """Workflow step Retention, first in every run: the table's row-retention sweep
    (:func:`lethe.gc.run.sweep_retention`): wholly expired files dropped, the expired rows
    of straddling files hidden and spliced out, all committed before Plan reads the head
    (so the run's plan already counts the dropped and spliced-away files as unreferenced).
    Returns a small summary: counts, versions and the sweep's receipt (its ``request_id``,
    read with :meth:`lethe.Table.erasure_status`), never a row value; ``swept`` is False
    when the table declares no retention.

    Example:
        >>> retention_step("s3://bucket/events")["files_dropped"]  # doctest: +SKIP
        12
    """
    r = sweep_retention(open_catalog(uri, s3), now=now or datetime.now(UTC), dry_run=dry_run)
    if r is None:
        return {"swept": False, "dry_run": dry_run}
    counts = ("files_dropped", "files_spliced", "rows_expired", "bytes_dropped", "data_bytes_moved")
    return {
        "swept": True,
        "dry_run": r.dry_run,
        "request_id": r.request_id,
        "request_hash": r.request_hash,
        "cutoff": r.cutoff.isoformat(),
        **{k: getattr(r, k) for k in counts},
        "versions": list(r.versions),
        "complete": r.complete,
    }


def plan_step(
    uri: str,
    *,
    dry_run: bool = False,
    retention: str | timedelta | Retention = DEFAULT_RETENTION,
    grace: str | timedelta | float | None = None,
    erasure_grace: str | timedelta | float = DEFAULT_ERASURE_GRACE,
    now: datetime | None = None,
    s3: Any | None = None,
    tuning: Tuning | None = None,
) -> PlanState:
    """Workflow step Plan: list, mark, write ``plan.json`` and the sweep batches (of at most
    ``tuning.batch_keys`` <= 1,000 keys) under ``_gc/<run id>/``; return the compact state the
    workflow carries (batch URIs).

    Example:
        >>> st = plan_step("s3://bucket/events", grace="7d")  # doctest: +SKIP
        >>> st.batches[0]                                       # doctest: +SKIP
        's3://bucket/events/_gc/20261122T030000Z-1a2b3c4d/batch-0000.json'
    """
    catalog = open_catalog(uri, s3)
    opts = options(retention, grace, erasure_grace, dry_run=dry_run, tuning=tuning)
    now = now or datetime.now(UTC)
    ws = S3Workspace(catalog, run_id := new_run_id(now))
    plan = write_plan(catalog, opts, run_id=run_id, now=now, workspace=ws, max_batches=MAX_BATCHES)
    return PlanState.of(plan)


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
    result = sweep(catalog, batch, now=now or datetime.now(UTC), dry_run=dry_run or batch.dry_run)
    S3Workspace(catalog, batch.run_id).write(f"sweep-{batch.index:04d}.json", result)
    return result


def _run(uri: str, run_id: str, s3: Any | None) -> tuple[Catalog, S3Workspace, PlanDocument]:
    catalog = open_catalog(uri, s3)
    ws = S3Workspace(catalog, run_id)
    return catalog, ws, ws.read("plan.json", PlanDocument)


def _step(
    uri: str,
    run_id: str,
    s3: Any | None,
    dry_run: bool,
    act: Callable[[Catalog, PlanDocument, bool], StepResult],
) -> StepResult:
    """One destructive step on the run's plan (a dry run if either says so): ``<step>.json``."""
    catalog, ws, plan = _run(uri, run_id, s3)
    result = act(catalog, plan, dry_run or plan.dry_run)
    ws.write(f"{result.step}.json", result)
    return result


def expire_step(
    uri: str, run_id: str, *, dry_run: bool = False, s3: Any | None = None
) -> StepResult:
    """Workflow step Expire: delete the manifests older than the run's oldest kept version.

    Example:
        >>> expire_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d").deleted  # doctest: +SKIP
        {'manifest': CategoryStats(objects=12, bytes=48211)}
    """
    return _step(uri, run_id, s3, dry_run, lambda c, p, d: expire(c, p, dry_run=d))


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
    at = now or datetime.now(UTC)
    return _step(uri, run_id, s3, dry_run, lambda c, p, d: abort(c, p, now=at, dry_run=d))


def purge_step(
    uri: str, run_id: str, *, dry_run: bool = False, s3: Any | None = None
) -> StepResult:
    """Workflow step Purge: in a versioned bucket, remove the old versions of erased data.

    Example:
        >>> purge_step("s3://bucket/events", "20261122T030000Z-1a2b3c4d").versions_remaining  # doctest: +SKIP
        {'5f0c…': 0}
    """
    return _step(uri, run_id, s3, dry_run, lambda c, p, d: purge(c, p, dry_run=d))


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
    """The state that failed, from the results the workflow state holds."""
    if RESULTS.retention not in state and RESULTS.plan not in state and "run_id" not in state:
        return STATES.retention
    if RESULTS.plan not in state and "run_id" not in state:
        return STATES.plan
    if "run_id" not in state:  # Compact (after SweepBatches) sets the run id at the top
        return STATES.sweep_batches
    for key, name in (
        (RESULTS.expire, STATES.expire),
        (RESULTS.abort, STATES.abort),
        (RESULTS.purge, STATES.purge),
    ):
        if key not in state:
            return name
    return STATES.report


def record_failure(
    uri: str, state: Mapping[str, Any], *, now: datetime | None = None, s3: Any | None = None
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
    plan = state.get(RESULTS.plan)
    run_id = state.get("run_id") or (plan.get("run_id") if isinstance(plan, Mapping) else None)
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        run_id = new_run_id(now)
    err = state.get(RESULTS.error)
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
