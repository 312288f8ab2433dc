"""Garbage-collection workflow steps: one Lambda entry point per Step Functions state.

Thin by design: each entry point parses its event, calls one function of :mod:`lethe.gc`,
records metrics and returns a small JSON state (counts and S3 keys, never row values; Step
Functions caps a state at 256 KiB). The run's bulk (plan, batches of <= 1,000 keys, step
results, the report) lives under ``<table>/_gc/<run id>/``.

==================  ========================================  =================================
entry point         event (from the state machine)            returns
==================  ========================================  =================================
``retention``       ``{"dry_run", ["table"]}``                  the sweep's counts and receipt
``plan``            ``{"dry_run", ["table", "retention",       ``PlanState``: table, run_id,
                    "grace", "erasure_grace",                  counts, batch URIs
                    "batch_keys"]}``
``sweep``           ``{"batch_key", "dry_run", "run_id"}``     the batch's counts
``expire``          ``{"run_id", "dry_run", ["table"]}``       counts
``abort``           same                                       counts
``purge``           same                                       counts
``report``          same                                       report summary
``record_failure``  the failed state's input + ``"error"``     the failure record's URI
==================  ========================================  =================================

Errors are raised by name so that Retry/Catch can match them: ``GcConflict`` (the table
changed under the run; the next run starts afresh), ``GcRunNotFound``, ``InvalidRequest``,
``Throttled``, ``StoreError``, ``CorruptManifest``.

Settings are read once at cold start (``LETHE_TABLE_URI``, ``LETHE_GC_RETENTION``,
``LETHE_GC_GRACE``, ``LETHE_GC_ERASURE_GRACE``, ``LETHE_GC_VERSIONED_BUCKET``); a bad
value fails the function's initialization loudly (``_settings.SettingsError``, an
``InvalidRequest``, naming the variable).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from _observe import publish_backlog
from _settings import GcSettings as Settings
from lethe import errors
from lethe import gc as lethe_gc
from lethe.audit.evidence import erasure_backlog
from lethe.gc import GcConflict, GcRunNotFound
from lethe.gc.actions import open_catalog
from lethe.gc.models import Category, CategoryStats, StepResult

__all__ = [
    "SETTINGS",
    "GcConflict",
    "GcRunNotFound",
    "Settings",
    "abort",
    "expire",
    "plan",
    "purge",
    "record_failure",
    "report",
    "retention",
    "sweep",
]

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Lethe")


SETTINGS = Settings.from_env()  # once, at cold start; SettingsError names what is wrong


class _Event(BaseModel):
    # The workflow passes whole states: unknown fields are ignored, known ones validated.
    model_config = ConfigDict(frozen=True, extra="ignore")


class RetentionEvent(_Event):
    dry_run: bool = False
    table: str | None = None


class PlanEvent(_Event):
    dry_run: bool = False
    table: str | None = None
    retention: str | None = None
    grace: str | None = None
    erasure_grace: str | None = None
    batch_keys: int = Field(default=1000, ge=1, le=1000)


class SweepEvent(_Event):
    batch_key: str
    dry_run: bool = False
    run_id: str | None = None


class RunEvent(_Event):
    run_id: str
    dry_run: bool = False
    table: str | None = None


_E = TypeVar("_E", bound=_Event)


_H = TypeVar("_H", bound=Callable[[dict[str, Any], Any], dict[str, Any]])


def _entry(handler: _H) -> _H:
    """A step's Powertools wrapping: Lambda context in the logs, a trace, metrics flushed."""
    return cast(
        _H,
        logger.inject_lambda_context(tracer.capture_lambda_handler(metrics.log_metrics(handler))),
    )


def _run_step(event: dict[str, Any], step: str, run: Callable[..., StepResult]) -> dict[str, Any]:
    """A step of one run (``expire``, ``abort``, ``purge``): ``run(table, run_id, dry_run=)``."""
    e = _parse(RunEvent, event, step)
    return _step_output(run(_table(e.table), e.run_id, dry_run=e.dry_run))


def _parse(model: type[_E], event: Any, step: str) -> _E:
    # First thing in every step, so that a failing step still publishes a metric (and
    # Powertools has something to flush instead of warning about an empty metric set).
    metrics.add_dimension(name="step", value=step)
    metrics.add_metric(name="GcStepInvocations", unit=MetricUnit.Count, value=1)
    try:
        return model.model_validate(event)
    except ValidationError as e:
        raise errors.InvalidRequest(f"bad {model.__name__}: {e.errors()[:3]}") from e


def _table(override: str | None) -> str:
    uri = override or SETTINGS.table_uri
    if not uri:
        raise errors.InvalidRequest("no table: set LETHE_TABLE_URI or pass 'table' in the event")
    return uri


def _count(step: str, deleted: Mapping[Category, CategoryStats], dry_run: bool) -> None:
    objects = sum(s.objects for s in deleted.values())
    size = sum(s.bytes for s in deleted.values())
    prefix = "GcWouldDelete" if dry_run else "GcDeleted"
    metrics.add_metric(f"{prefix}Objects", MetricUnit.Count, objects)
    metrics.add_metric(f"{prefix}Bytes", MetricUnit.Bytes, size)
    logger.info(
        f"GC {step} done",
        extra={"step": step, "objects": objects, "bytes": size, "dry_run": dry_run},
    )


def _step_output(result: StepResult) -> dict[str, Any]:
    _count(result.step, result.deleted, result.dry_run)
    if result.failed:
        metrics.add_metric("GcDeleteFailures", MetricUnit.Count, len(result.failed))
    return result.summary()


@_entry
def retention(event: dict[str, Any], context: Any) -> dict[str, Any]:
    e = _parse(RetentionEvent, event, "retention")
    out = lethe_gc.retention_step(_table(e.table), dry_run=e.dry_run)
    if out["swept"]:
        prefix = "GcRetentionWould" if out["dry_run"] else "GcRetention"
        metrics.add_metric(f"{prefix}DropFiles", MetricUnit.Count, out["files_dropped"])
        metrics.add_metric(f"{prefix}SpliceFiles", MetricUnit.Count, out["files_spliced"])
        metrics.add_metric(f"{prefix}ExpireRows", MetricUnit.Count, out["rows_expired"])
    logger.info("GC retention sweep", extra=out)  # counts, versions and a hash: no row value
    return out


@_entry
def plan(event: dict[str, Any], context: Any) -> dict[str, Any]:
    e = _parse(PlanEvent, event, "plan")
    st = lethe_gc.plan_step(
        _table(e.table),
        dry_run=e.dry_run,
        retention=e.retention or SETTINGS.retention,
        grace=e.grace or SETTINGS.grace,
        erasure_grace=e.erasure_grace or SETTINGS.erasure_grace,
        tuning=lethe_gc.Tuning(versioned=SETTINGS.versioned, batch_keys=e.batch_keys),
    )
    objects = sum(s.objects for s in st.candidates.values())
    metrics.add_metric("GcCandidates", MetricUnit.Count, objects)
    metrics.add_metric("GcBatches", MetricUnit.Count, len(st.batches))
    logger.info(
        "GC planned",
        extra={
            "run_id": st.run_id,
            "head_version": st.head_version,
            "oldest_kept_version": st.oldest_kept_version,
            "candidates": objects,
            "batches": len(st.batches),
            "truncated": st.truncated,
            "dry_run": st.dry_run,
        },
    )
    return st.model_dump(mode="json")


@_entry
def sweep(event: dict[str, Any], context: Any) -> dict[str, Any]:
    e = _parse(SweepEvent, event, "sweep")
    return {
        "batch_key": e.batch_key,
        **_step_output(lethe_gc.sweep_step(e.batch_key, dry_run=e.dry_run)),
    }


@_entry
def expire(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _run_step(event, "expire", lethe_gc.expire_step)


@_entry
def abort(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _run_step(event, "abort", lethe_gc.abort_step)


@_entry
def purge(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _run_step(event, "purge", lethe_gc.purge_step)


@_entry
def report(event: dict[str, Any], context: Any) -> dict[str, Any]:
    e = _parse(RunEvent, event, "report")
    rep = lethe_gc.report_step(_table(e.table), e.run_id, dry_run=e.dry_run)
    _count("report", rep.deleted, rep.dry_run)
    newly = [s for s in rep.erasures if s.newly_complete]
    metrics.add_metric("GcErasuresCompleted", MetricUnit.Count, 0 if rep.dry_run else len(newly))
    metrics.add_metric(
        "GcErasuresIncomplete", MetricUnit.Count, sum(1 for s in rep.erasures if not s.complete)
    )
    publish_backlog(metrics, erasure_backlog(open_catalog(_table(e.table))))
    return rep.summary()


@_entry
def record_failure(event: dict[str, Any], context: Any) -> dict[str, Any]:
    metrics.add_dimension(name="step", value="record_failure")
    metrics.add_metric(name="GcStepInvocations", unit=MetricUnit.Count, value=1)
    if not isinstance(event, dict):
        raise errors.InvalidRequest("record_failure expects the failed state's input (an object)")
    plan_state = event.get("plan")
    table = event.get("table") or (
        plan_state.get("table") if isinstance(plan_state, dict) else None
    )
    uri = lethe_gc.record_failure(_table(table), event)
    error = event.get("error") if isinstance(event.get("error"), dict) else {}
    metrics.add_metric("GcRunsFailed", MetricUnit.Count, 1)
    logger.error("GC run failed", extra={"error": str((error or {}).get("Error")), "recorded": uri})
    return {"recorded": uri}
