"""SQS queues of the handler tests: a new queue on moto's server, and what it holds."""

from __future__ import annotations

import uuid
from typing import Any


def new_queue(aws: Any, prefix: str = "q") -> tuple[Any, str, str]:
    """A new queue: the SQS client, its URL and its ARN."""
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName=f"{prefix}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return sqs, url, arn


def receive(sqs: Any, url: str, n: int, *, attributes: bool = False) -> list[dict[str, Any]]:
    """Up to ``n`` messages of the queue (fewer once it answers none); ``attributes``: with
    every message and system attribute."""
    extra = (
        {"MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"]}
        if attributes
        else {}
    )
    got: list[dict[str, Any]] = []
    while len(got) < n:
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, **extra)
        got.extend(r.get("Messages", []))
        if not r.get("Messages"):
            break
    return got
