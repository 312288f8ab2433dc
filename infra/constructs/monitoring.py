"""Alarms: any message in a dead-letter queue, any function error, any failed GC run.

All alarms notify one SNS topic (TLS-only; encrypted with the stack's KMS key when there is
one, with a key grant for CloudWatch). ``lethe:alarmEmail`` subscribes an address.
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

PERIOD = cdk.Duration.minutes(5)


class Monitoring(Construct):
    """CloudWatch alarms on DLQ depth (> 0), function errors (> 0) and failed GC runs.

    Attributes:
        topic: the SNS topic every alarm notifies.
        alarms: alarm id -> alarm.
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
