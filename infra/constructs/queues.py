"""SQS work queues with dead-letter queues: delete requests and splice requests.

Each queue: encrypted (SQS-managed SSE, or the stack's KMS key), TLS-only (``enforceSSL``),
14 days' retention (a delete request must not expire silently), a DLQ after
``MAX_RECEIVE_COUNT`` receives, and a visibility timeout of at least
``VISIBILITY_TIMEOUT_FACTOR`` times its consumer's timeout plus its batching window (AWS's
guidance for SQS event sources, so a throttled or retried batch never runs twice at once).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c


def visibility_timeout(consumer_timeout_s: int, batching_window_s: int = 0) -> cdk.Duration:
    """Visibility timeout for a queue consumed by a function with the given timeout."""
    return cdk.Duration.seconds(
        c.VISIBILITY_TIMEOUT_FACTOR * consumer_timeout_s + batching_window_s
    )


def grant_send(queue: sqs.IQueue, grantee: iam.IGrantable, key: kms.IKey | None) -> None:
    """Like ``queue.grant_send_messages``, minus its ``kms:ReEncrypt*``/``GenerateDataKey*``.

    An SSE-KMS producer needs exactly ``kms:GenerateDataKey`` and ``kms:Decrypt``.
    """
    queue.grant(grantee, "sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")
    if key is not None:
        key.grant(grantee, "kms:GenerateDataKey", "kms:Decrypt")


def queue_encryption(key: kms.IKey | None) -> dict[str, object]:
    """Queue properties shared by every Lethe queue."""
    return {
        "encryption": sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
        "encryption_master_key": key,
        "enforce_ssl": True,
        "retention_period": cdk.Duration.days(c.QUEUE_RETENTION_DAYS),
    }


class WorkQueue(Construct):
    """A queue and its dead-letter queue.

    Attributes:
        queue: the work queue.
        dlq: its dead-letter queue (alarmed on by ``Monitoring``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility: cdk.Duration,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.encryption_key = encryption_key
        self.dlq = sqs.Queue(self, "DeadLetters", **queue_encryption(encryption_key))
        self.queue = sqs.Queue(
            self,
            "Queue",
            visibility_timeout=visibility,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=c.MAX_RECEIVE_COUNT
            ),
            **queue_encryption(encryption_key),
        )

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """Allow ``grantee`` to send to the work queue."""
        grant_send(self.queue, grantee, self.encryption_key)


class RequestQueues(Construct):
    """The delete-request queue (input of the stack) and the splice queue (internal)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.delete = WorkQueue(
            self,
            "DeleteRequests",
            visibility=visibility_timeout(
                c.DELETE_TIMEOUT_SECONDS, c.DELETE_MAX_BATCHING_WINDOW_SECONDS
            ),
            encryption_key=encryption_key,
        )
        self.splice = WorkQueue(
            self,
            "SpliceRequests",
            visibility=visibility_timeout(c.SPLICE_TIMEOUT_SECONDS),
            encryption_key=encryption_key,
        )
