"""What the handlers share besides their settings: their Powertools utilities, the SQS batch
loop, and the erasure backlog as a metric pair.

A table's backlog (erase requests not yet complete) and a lake's (requests not done) are each
published as a count and the oldest one's age, with no dimension but the service: never a
request id or a value. The overdue alarms (infra) read these names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lethe.lake.window import OLDEST_METRIC, PENDING_METRIC

TABLE_PENDING, TABLE_OLDEST = "PendingErasures", "OldestPendingErasureAge"


def powertools() -> tuple[Logger, Tracer, Metrics]:
    """A handler's logger, tracer and metrics (service, level and namespace from the
    ``POWERTOOLS_*`` variables the stack sets)."""
    return Logger(), Tracer(), Metrics()


def sqs_batch(
    event: dict[str, Any],
    context: Any,
    record_handler: Callable[[SQSRecord], Any],
    *,
    raise_on_entire_batch_failure: bool = True,
) -> PartialItemFailureResponse:
    """Powertools' SQS batch: ``record_handler`` on each record; the records it raised on are
    reported in ``batchItemFailures`` (SQS retries them, then the dead-letter queue). With
    ``raise_on_entire_batch_failure`` off, an all-failed batch is reported the same way
    rather than raised (no Lambda error counted)."""
    processor = BatchProcessor(
        event_type=EventType.SQS, raise_on_entire_batch_failure=raise_on_entire_batch_failure
    )
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )


class Backlog(Protocol):
    @property
    def pending(self) -> int: ...

    @property
    def oldest_age_seconds(self) -> float: ...


def publish_backlog(metrics: Metrics, backlog: Backlog, *, lake: bool = False) -> None:
    """Add the backlog's two metrics (a lake's under the lake's names)."""
    pending, oldest = (PENDING_METRIC, OLDEST_METRIC) if lake else (TABLE_PENDING, TABLE_OLDEST)
    metrics.add_metric(pending, MetricUnit.Count, backlog.pending)
    metrics.add_metric(oldest, MetricUnit.Seconds, backlog.oldest_age_seconds)
