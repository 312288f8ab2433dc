"""Bounded splice worker: SQS splice jobs -> row-group splices of one erasure.

Each message names a table and an erasure (a request hash, never keys). One invocation
splices at most ``LETHE_SPLICE_MAX_BYTES`` of row groups (at least one group), never loads a
whole file, commits, and puts the job back on the queue while targets remain. A failed job
is retried by SQS and lands in the splice DLQ after ``maxReceiveCount``; a failure leaves
the table unchanged (the multipart upload is aborted, the commit is all or nothing).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.parser import parse

from _settings import SpliceSettings as Settings
from lethe import Table
from lethe.erase import process_erasure
from lethe.evidence import erasure_backlog
from lethe.splice_jobs import SpliceJob, send_jobs

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS)


SETTINGS = Settings.from_env()  # once, at cold start


@tracer.capture_method
def record_handler(record: SQSRecord) -> dict[str, Any]:
    job: SpliceJob = parse(event=record.json_body, model=SpliceJob)
    table = Table.open(job.table)
    complete, splices = process_erasure(table.context, job.erasure, max_bytes=SETTINGS.max_bytes)
    copied = sum(s.bytes_copied for s in splices)
    uploaded = sum(s.bytes_uploaded for s in splices)
    downloaded = sum(s.bytes_downloaded for s in splices)
    metrics.add_metric("RowsErased", MetricUnit.Count, sum(len(s.removed) for s in splices))
    metrics.add_metric("BytesCopied", MetricUnit.Bytes, copied)
    metrics.add_metric("BytesUploaded", MetricUnit.Bytes, uploaded)
    metrics.add_metric("BytesDownloaded", MetricUnit.Bytes, downloaded)
    backlog = erasure_backlog(table.catalog)
    metrics.add_metric("PendingErasures", MetricUnit.Count, backlog.pending)
    metrics.add_metric("OldestPendingErasureAge", MetricUnit.Seconds, backlog.oldest_age_seconds)
    logger.info(
        "splice step",
        extra={
            "erasure": job.erasure,
            "files": len(splices),
            "complete": complete,
            "copied": copied,
            "uploaded": uploaded,
            "downloaded": downloaded,
        },
    )
    if not complete:
        if SETTINGS.queue_url is None:
            raise RuntimeError("erasure not complete and no LETHE_SPLICE_QUEUE_URL to continue it")
        send_jobs(
            [job.model_copy(update={"attempt": job.attempt + 1})], queue_url=SETTINGS.queue_url
        )
    return {"complete": complete, "files": len(splices)}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    metrics.add_metric("SpliceJobs", MetricUnit.Count, len(event.get("Records", [])))
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
