"""Real Lambda event shapes built from real SQS / S3 responses (for the local runtime).

The local runtime polls queues itself (moto's event-source mapping delivers one record at a
time and ignores ``batchItemFailures``) and hands handlers the same JSON AWS would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LambdaContext", "s3_put_event", "sqs_event"]


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that Powertools reads."""

    function_name: str = "local"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def sqs_event(
    messages: list[dict[str, Any]], *, queue_arn: str, region: str = "us-east-1"
) -> dict[str, Any]:
    """An SQS-triggered Lambda event from ``ReceiveMessage`` results."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def s3_put_event(
    bucket: str, key: str, *, size: int, etag: str, region: str = "us-east-1"
) -> dict[str, Any]:
    """An S3 ``ObjectCreated:Put`` notification event for one object."""
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": region,
                "eventTime": "1970-01-01T00:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "local"},
                "requestParameters": {"sourceIPAddress": "127.0.0.1"},
                "responseElements": {"x-amz-request-id": "local", "x-amz-id-2": "local"},
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "lethe-ingest",
                    "bucket": {
                        "name": bucket,
                        "ownerIdentity": {"principalId": "local"},
                        "arn": f"arn:aws:s3:::{bucket}",
                    },
                    "object": {"key": key, "size": size, "eTag": etag.strip('"'), "sequencer": "0"},
                },
            }
        ]
    }
