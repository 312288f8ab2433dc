"""Splice worker: SQS splice jobs -> an erasure's files spliced, several invocations at once.

Each message names a table and an erasure (a request hash, never keys). A job without
``files`` (what the delete handler and ``lethe purge --queue-url`` send) is cut into groups
of files, each within ``LETHE_SPLICE_MAX_BYTES`` bytes moved (row groups down and up,
server-side copies, footers: :func:`lethe.erasure.groups.splice_cost`), and one job per group
goes back on the queue: the event source then runs up to its maximum concurrency of them at
once. A group's job splices its files (never loading a whole file), commits them in one
commit and re-enqueues what its budget left over; the erasure turns ``spliced`` with the
commit of its last group. A failed job is retried by SQS and lands in the splice DLQ after
``maxReceiveCount`` (the reason in the log); a failure leaves the table unchanged (the
multipart upload is aborted, the commit is all or nothing).

With ``LETHE_LAKE_URI``, the scheduled event ``{"lethe": "erasure-window"}`` (an EventBridge
rule, not SQS) runs the lake's erasure window: every file of the erase requests whose window
closed is spliced once for all of them, within ``LETHE_SPLICE_MAX_BYTES`` per table (the
next scheduled run continues), finished requests are archived out of ``lake.json``, and the
lake's backlog is published for the overdue alarm.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.parser import parse

from _observe import powertools, publish_backlog, sqs_batch
from _settings import SpliceSettings as Settings
from lethe import Lake, Table
from lethe.audit.evidence import erasure_backlog
from lethe.erasure.erase import SpliceResult, process_erasure
from lethe.erasure.groups import plan_groups, splice_group
from lethe.erasure.jobs import SpliceJob, send_jobs
from lethe.lake.window import WINDOW_EVENT

logger, tracer, metrics = powertools()


SETTINGS = Settings.from_env()  # once, at cold start


def _queue() -> str:
    if SETTINGS.queue_url is None:
        raise RuntimeError("erasure not complete and no LETHE_SPLICE_QUEUE_URL to continue it")
    return SETTINGS.queue_url


def _measure(table: Table, job: SpliceJob, splices: list[SpliceResult], **extra: Any) -> None:
    copied = sum(s.bytes_copied for s in splices)
    uploaded = sum(s.bytes_uploaded for s in splices)
    downloaded = sum(s.bytes_downloaded for s in splices)
    metrics.add_metric("RowsErased", MetricUnit.Count, sum(len(s.removed) for s in splices))
    metrics.add_metric("BytesCopied", MetricUnit.Bytes, copied)
    metrics.add_metric("BytesUploaded", MetricUnit.Bytes, uploaded)
    metrics.add_metric("BytesDownloaded", MetricUnit.Bytes, downloaded)
    publish_backlog(metrics, erasure_backlog(table.catalog))
    logger.info(
        "splice step",
        extra={
            "erasure": job.erasure,
            "files": len(splices),
            "copied": copied,
            "uploaded": uploaded,
            "downloaded": downloaded,
            **extra,
        },
    )


def _fan_out(table: Table, job: SpliceJob) -> dict[str, Any]:
    """A job without files: one job per group of the erasure's pending files."""
    if SETTINGS.queue_url is None:  # no queue to fan out on: splice here, one bounded chain
        complete, splices = process_erasure(
            table.context, job.erasure, max_bytes=SETTINGS.max_bytes
        )
        _measure(table, job, splices, complete=complete)
        if not complete:
            _queue()
        return {"complete": complete, "files": len(splices)}
    m, _ = table.catalog.current()
    groups = plan_groups(m, job.erasure, SETTINGS.max_bytes)
    jobs = [job.model_copy(update={"files": g, "attempt": 0, "planned": m.version}) for g in groups]
    send_jobs(jobs, queue_url=SETTINGS.queue_url)
    metrics.add_metric("SpliceGroups", MetricUnit.Count, len(groups))
    logger.info(
        "splice jobs fanned out",
        extra={
            "erasure": job.erasure,
            "groups": len(groups),
            "files": sum(len(g) for g in groups),
            "budget": SETTINGS.max_bytes,
        },
    )
    return {"groups": len(groups), "files": sum(len(g) for g in groups)}


def _group(table: Table, job: SpliceJob) -> dict[str, Any]:
    """A group's job: splice and commit its files, re-enqueue what is left of them."""
    r = splice_group(table.context, job.erasure, job.files, SETTINGS.max_bytes, planned=job.planned)
    splices = list(r.splices)
    _measure(
        table,
        job,
        splices,
        group_files=len(job.files),
        remaining=len(r.remaining),
        replaced=r.replaced,
        adopted=r.adopted,
        complete=r.erasure_complete,
    )
    if r.remaining:
        follow = job.model_copy(update={"files": r.remaining, "attempt": job.attempt + 1})
        send_jobs([follow], queue_url=_queue())
    return {"complete": r.erasure_complete, "files": len(splices), "remaining": len(r.remaining)}


@tracer.capture_method
def record_handler(record: SQSRecord) -> dict[str, Any]:
    job: SpliceJob = parse(event=record.json_body, model=SpliceJob)
    table = Table.open(job.table)
    return _group(table, job) if job.files else _fan_out(table, job)


def window_run() -> dict[str, Any]:
    """The lake's erasure window: splice what is due (bounded), archive, publish the backlog."""
    if SETTINGS.lake_uri is None:
        raise RuntimeError("an erasure-window event, but no LETHE_LAKE_URI is configured")
    lake = Lake.open(SETTINGS.lake_uri)
    run = lake.splice_due(max_bytes=SETTINGS.max_bytes)
    archived = lake.archive()
    backlog = lake.backlog()
    metrics.add_metric("WindowFilesSpliced", MetricUnit.Count, run.files_spliced)
    metrics.add_metric("WindowTablesFailed", MetricUnit.Count, len(run.failed))
    publish_backlog(metrics, backlog, lake=True)
    out = {
        "requests_due": run.requests_due,
        "requests_waiting": run.requests_waiting,
        "files": run.files_spliced,
        "commits": run.commits,
        "complete": run.complete,
        "failed": [t.table for t in run.failed],  # each table's reason is in the log
        "values_deleted": run.values_deleted,
        "archived": archived,
        "pending": backlog.pending,
    }
    logger.info("erasure window run", extra=out)
    return out


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    if all(event.get(k) == v for k, v in WINDOW_EVENT.items()):
        return window_run()
    metrics.add_metric("SpliceJobs", MetricUnit.Count, len(event.get("Records", [])))
    return sqs_batch(event, context, record_handler)
