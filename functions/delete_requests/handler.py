"""SQS delete requests -> deletion vectors (one commit per table per batch).

Thin by design: parse and group with :func:`lethe.lake.requests.process_delete_messages`, report
partial batch failures through Powertools' ``BatchProcessor`` (``_observe.sqs_batch``). Invalid messages fail alone
(with their reason in the log) and reach the DLQ after ``maxReceiveCount``; good messages
commit once. ``mode="erase"`` requests are followed by splice jobs on the splice queue.
With ``LETHE_LAKE_URI``, lake requests (``{"request_id", "subject", "values", "mode",
"requested_at"?}``) go to :meth:`lethe.Lake.forget_batch`: recorded in the lake, one commit
per mapped table; their splices are queued at once when the lake's erasure window is 0,
else left to the window run (the splice worker's schedule). After a lake batch, the lake's
backlog (requests not done, the oldest one's age) is published for the overdue alarm.
Logs carry counts and hashes only, never keys.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from _observe import powertools, publish_backlog, sqs_batch
from _settings import DeleteRequestsSettings as Settings
from lethe import Lake, LakeRequestResult, Table
from lethe.audit.evidence import erasure_backlog
from lethe.erasure.jobs import SpliceJob, enqueue_erasures, send_jobs
from lethe.lake.requests import MessageOutcome, process_delete_messages, sqs_sent_timestamp

logger, tracer, metrics = powertools()


SETTINGS = Settings.from_env()  # once, at cold start


def publish_lake_backlog(lake: Lake) -> None:
    """The lake's requests not done yet and the oldest one's age, as metrics (no dimension
    but the service: never a request id or a value)."""
    publish_backlog(metrics, lake.backlog(), lake=True)


def lake_splices(results: list[LakeRequestResult]) -> None:
    """Queue the splices of every table part of the lake's erase requests when the lake has
    no erasure window (the worker reads the pending targets from each table's manifest; a
    job with nothing left is a no-op); with a window, the window run splices them."""
    lake = open_lake()
    windowed = lake.doc.erasure_window_seconds > 0
    jobs = (
        []
        if windowed
        else list(
            {
                (t.table, t.id_hash): SpliceJob(table=t.table, erasure=t.id_hash)
                for r in results
                if r.mode == "erase"
                for t in r.tables
                if t.state == "committed"
                and t.id_hash is not None
                and (t.rows_deleted or t.duplicate)
            }.values()
        )
    )
    metrics.add_metric("LakeRequests", MetricUnit.Count, len(results))
    metrics.add_metric("RowsDeleted", MetricUnit.Count, sum(r.rows_deleted for r in results))
    if jobs and SETTINGS.splice_queue_url:
        send_jobs(jobs, queue_url=SETTINGS.splice_queue_url)
    publish_lake_backlog(lake)
    logger.info(
        "lake batch committed",
        extra={"requests": len(results), "splice_jobs": len(jobs), "windowed": windowed},
    )


def open_lake() -> Lake:
    """The configured lake (read when a batch holds a lake request)."""
    assert SETTINGS.lake_uri is not None
    return Lake.open(SETTINGS.lake_uri)


class RequestFailed(Exception):
    """One message failed; its reason is the message."""


def record_handler(record: SQSRecord, outcomes: dict[str, MessageOutcome]) -> None:
    outcome = outcomes[record.message_id]
    if not outcome.ok:
        logger.warning(
            "delete request failed",
            extra={
                "message_id": record.message_id,
                "reason": outcome.error,
                "retryable": outcome.retryable,
            },
        )
        raise RequestFailed(outcome.error)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    records = event.get("Records", [])

    def on_committed(table: Table, messages: list[Any], result: Any) -> None:
        metrics.add_metric("RowsDeleted", MetricUnit.Count, result.rows_deleted)
        metrics.add_metric("CasAttempts", MetricUnit.Count, result.attempts)
        metrics.add_metric("CommitLatency", MetricUnit.Milliseconds, result.seconds * 1000)
        enqueue_erasures(table, messages, queue_url=SETTINGS.splice_queue_url)
        publish_backlog(metrics, erasure_backlog(table.catalog))

    outcomes = process_delete_messages(
        [(r["messageId"], r.get("body")) for r in records],  # a missing body fails alone
        # a message without requested_at is dated by the queue (SentTimestamp, epoch ms)
        sent_at={
            r["messageId"]: sqs_sent_timestamp(r.get("attributes", {}).get("SentTimestamp"))
            for r in records
        },
        open_table=lambda uri: Table.open(uri),
        on_committed=on_committed,
        lake=open_lake if SETTINGS.lake_uri else None,
        on_lake_committed=lake_splices,
    )
    failed = sum(1 for o in outcomes.values() if not o.ok)
    metrics.add_metric("Requests", MetricUnit.Count, len(records))
    metrics.add_metric("RequestsFailed", MetricUnit.Count, failed)
    logger.info(
        "batch processed",
        extra={
            "messages": len(records),
            "failed": failed,
            "tables": len({o.table for o in outcomes.values() if o.table}),
        },
    )
    # An all-bad batch is reported in batchItemFailures like any other failure: the invocation
    # itself succeeded (Powertools would raise BatchProcessingError and count a Lambda error).
    return sqs_batch(
        event,
        context,
        lambda record: record_handler(record, outcomes),
        raise_on_entire_batch_failure=False,
    )
