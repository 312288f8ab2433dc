"""What the handlers share besides their settings: the erasure backlog as a metric pair.

A table's backlog (erase requests not yet complete) and a lake's (requests not done) are each
published as a count and the oldest one's age, with no dimension but the service: never a
request id or a value. The overdue alarms (infra) read these names.
"""

from __future__ import annotations

from typing import Protocol

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from lethe.lake.window import OLDEST_METRIC, PENDING_METRIC

TABLE_PENDING, TABLE_OLDEST = "PendingErasures", "OldestPendingErasureAge"


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
