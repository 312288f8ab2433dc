"""Alarms: any message in a dead-letter queue, any function error, any failed GC run, and an
erasure request pending longer than ``lethe:erasureAlarmDays``; one CloudWatch dashboard.

All alarms notify one SNS topic (TLS-only; encrypted with the stack's KMS key when there is
one, with a key grant for CloudWatch). ``lethe:alarmEmail`` subscribes an address.

The dashboard shows what the functions emit (Powertools EMF, namespace ``Lethe``, dimension
``service``): commit latency and CAS attempts (delete handler), rows deleted and erased,
pending erasures and the oldest one's age (delete handler, splice worker and GC report step,
from :func:`lethe.audit.evidence.erasure_backlog`), the lake's pending requests and the oldest
one's age (``PendingLakeRequests``, ``OldestPendingLakeRequestAge``: delete handler and the
window run, from :meth:`lethe.Lake.backlog`), and the dead-letter queues' depth. The
``ErasureOverdue`` alarm watches the largest of every oldest age: a table's or the lake's.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra import constants as c

PERIOD = cdk.Duration.minutes(5)
BACKLOG_PERIOD = cdk.Duration.hours(1)
#: Where each function publishes the erasure backlog: (service, extra dimensions).
BACKLOG_SOURCES: tuple[tuple[str, dict[str, str]], ...] = (
    (f"{c.SERVICE}-delete-requests", {}),
    (f"{c.SERVICE}-splice", {}),
    (f"{c.SERVICE}-gc", {"step": "report"}),
)
#: Where the lake's backlog is published (``Lake.backlog()``: its requests not done yet):
#: the delete handler after each lake batch, the splice worker after each window run.
LAKE_BACKLOG_SOURCES: tuple[str, ...] = (f"{c.SERVICE}-delete-requests", f"{c.SERVICE}-splice")


def lethe_metric(
    name: str, service: str, statistic: str, period: cdk.Duration, **dims: str
) -> cw.Metric:
    """A metric the functions publish (namespace ``Lethe``, dimension ``service``)."""
    return cw.Metric(
        namespace=c.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service, **dims},
        statistic=statistic,
        period=period,
    )


class Monitoring(Construct):
    """CloudWatch alarms on DLQ depth (> 0), function errors (> 0), failed GC runs and the
    oldest pending erasure (older than ``erasure_alarm_days``); the dashboard.

    Attributes:
        topic: the SNS topic every alarm notifies.
        alarms: alarm id -> alarm.
        dashboard: the CloudWatch dashboard.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dead_letter_queues: Mapping[str, sqs.IQueue],
        functions: Mapping[str, lambda_.IFunction],
        state_machine: sfn.IStateMachine,
        encryption_key: kms.IKey | None,
        alarm_email: str,
        erasure_alarm_days: int = 25,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self,
            "Alarms",
            display_name="Lethe alarms",
            enforce_ssl=True,
            master_key=encryption_key,
        )
        if encryption_key is not None:
            encryption_key.grant(
                iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                "kms:Decrypt",
                "kms:GenerateDataKey*",
            )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        action = cw_actions.SnsAction(self.topic)

        self.alarms: dict[str, cw.Alarm] = {}
        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name}Messages",
                queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic=cw.Stats.MAXIMUM
                ),
                f"Messages in the {name} dead-letter queue: requests failed "
                f"{'repeatedly' if 'Trigger' not in name else 'after retries'}; "
                "inspect and redrive.",
                action,
            )
        for name, fn in functions.items():
            self._alarm(
                f"{name}Errors",
                fn.metric_errors(period=PERIOD, statistic=cw.Stats.SUM),
                f"The {name} function reported errors.",
                action,
            )
        self._alarm(
            "GcFailedRuns",
            state_machine.metric_failed(period=PERIOD, statistic=cw.Stats.SUM),
            "A garbage-collection run failed; erasure completion may be delayed.",
            action,
        )
        oldest = self._oldest_pending()
        overdue = cw.Alarm(
            self,
            "ErasureOverdue",
            metric=oldest,
            threshold=erasure_alarm_days * 86400,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=f"An erasure request has been pending for more than "
            f"{erasure_alarm_days} days: see `lethe erasures <table> --pending` and run GC.",
        )
        overdue.add_alarm_action(action)
        self.alarms["ErasureOverdue"] = overdue
        self.dashboard = self._dashboard(dead_letter_queues, oldest, erasure_alarm_days)

    @staticmethod
    def _oldest_pending() -> cw.MathExpression:
        """The oldest pending erasure's age (seconds), the largest any function reported:
        a table's erasure records, or the lake's requests."""
        using = {
            f"m{i}": lethe_metric(
                "OldestPendingErasureAge", svc, cw.Stats.MAXIMUM, BACKLOG_PERIOD, **dims
            )
            for i, (svc, dims) in enumerate(BACKLOG_SOURCES)
        }
        using.update(
            {
                f"lake{i}": lethe_metric(
                    c.LAKE_OLDEST_METRIC, svc, cw.Stats.MAXIMUM, BACKLOG_PERIOD
                )
                for i, svc in enumerate(LAKE_BACKLOG_SOURCES)
            }
        )
        return cw.MathExpression(
            expression=f"MAX([{', '.join(using)}])",
            using_metrics=using,
            label="oldest pending erasure (s)",
            period=BACKLOG_PERIOD,
        )

    def _dashboard(
        self, dlqs: Mapping[str, sqs.IQueue], oldest: cw.IMetric, alarm_days: int
    ) -> cw.Dashboard:
        delete = f"{c.SERVICE}-delete-requests"
        splice = f"{c.SERVICE}-splice"

        def graph(
            title: str,
            metrics: list[cw.IMetric],
            annotations: list[cw.HorizontalAnnotation] | None = None,
        ) -> cw.GraphWidget:
            return cw.GraphWidget(
                title=title, left=metrics, width=12, height=6, left_annotations=annotations
            )

        board = cw.Dashboard(self, "Dashboard")
        board.add_widgets(
            graph(
                "Commit latency (delete batches, ms)",
                [
                    lethe_metric("CommitLatency", delete, stat, PERIOD)
                    for stat in (cw.Stats.p(50), cw.Stats.p(99), cw.Stats.MAXIMUM)
                ],
            ),
            graph(
                "CAS attempts per commit",
                [
                    lethe_metric("CasAttempts", delete, cw.Stats.MAXIMUM, PERIOD),
                    lethe_metric("CasAttempts", delete, cw.Stats.AVERAGE, PERIOD),
                ],
            ),
        )
        board.add_widgets(
            graph(
                "Rows deleted and erased",
                [
                    lethe_metric("RowsDeleted", delete, cw.Stats.SUM, PERIOD),
                    lethe_metric("RowsErased", splice, cw.Stats.SUM, PERIOD),
                ],
            ),
            graph(
                "Pending erasures (tables) and lake requests",
                [
                    *(
                        lethe_metric(
                            "PendingErasures", svc, cw.Stats.MAXIMUM, BACKLOG_PERIOD, **dims
                        )
                        for svc, dims in BACKLOG_SOURCES
                    ),
                    *(
                        lethe_metric(c.LAKE_PENDING_METRIC, svc, cw.Stats.MAXIMUM, BACKLOG_PERIOD)
                        for svc in LAKE_BACKLOG_SOURCES
                    ),
                ],
            ),
        )
        board.add_widgets(
            graph(
                f"Oldest pending erasure (s); alarm past {alarm_days} days",
                [oldest],
                [cw.HorizontalAnnotation(value=alarm_days * 86400, label="alarm")],
            ),
            graph(
                "Dead-letter queue depth",
                [
                    q.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic=cw.Stats.MAXIMUM, label=name
                    )
                    for name, q in dlqs.items()
                ],
            ),
        )
        return board

    def _alarm(
        self, alarm_id: str, metric: cw.Metric, description: str, action: cw.IAlarmAction
    ) -> None:
        alarm = cw.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(action)
        self.alarms[alarm_id] = alarm
