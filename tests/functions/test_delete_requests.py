"""The delete-request Lambda with real SQS messages from moto's server."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
from lethe.local.events import LambdaContext, sqs_event


@pytest.fixture(autouse=True)
def _powertools_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-delete-requests")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")


@pytest.fixture
def queue(aws: Any) -> tuple[Any, str, str]:
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName=f"deletes-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return sqs, url, arn


def receive_all(sqs: Any, url: str, n: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while len(got) < n:
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        got.extend(r.get("Messages", []))
        if not r.get("Messages"):
            break
    return got


def msg(table: str, filters: Any, rid: str | None = None, mode: str = "logical") -> str:
    return json.dumps(
        {
            "request_id": rid or uuid.uuid4().hex,
            "table": table,
            "filters": filters,
            "mode": mode,
            "requested_at": "2026-11-22T10:00:00Z",
        }
    )


def test_mixed_batch_reports_exactly_the_bad_ones(
    table_uri: str, bucket: str, queue: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.delete_requests import handler as h

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 1000))
    t2_uri = table_uri + "-second"
    lethe.Table.create(t2_uri, EVENTS, key="id").append(events(0, 100))
    sqs, url, arn = queue
    bodies = {
        "good1": msg(table_uri, [["id", "=", 1]], "req-1"),
        "good2": msg(table_uri, [["id", "in", [2, 3, 4]]], "req-2"),
        "dup": msg(table_uri, [["id", "in", [2, 3, 4]]], "req-2"),
        "other_table": msg(t2_uri, [["customer_id", "=", 5]], "req-3"),
        "malformed": '{"request_id": "x", "table": ',
        "schema_invalid": json.dumps(
            {"request_id": "y", "table": table_uri, "filters": [["id", "=", 1]]}
        ),
        "unknown_column": msg(table_uri, [["nope", "=", 1]], "req-4"),
        "unknown_table": msg(f"s3://{bucket}/no/such/table", [["id", "=", 1]], "req-5"),
        "bad_uri": msg("http://x/y", [["id", "=", 1]], "req-6"),
    }
    for name, body in bodies.items():
        sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={"name": {"DataType": "String", "StringValue": name}},
        )
    received = []
    while len(received) < len(bodies):
        r = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=1
        )
        received.extend(r.get("Messages", []))
    name_of = {m["MessageId"]: m["MessageAttributes"]["name"]["StringValue"] for m in received}
    v_before = lethe.Table.open(table_uri).version
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    failed = {name_of[f["itemIdentifier"]] for f in resp["batchItemFailures"]}
    assert failed == {"malformed", "schema_invalid", "unknown_column", "unknown_table", "bad_uri"}
    t = lethe.Table.open(table_uri)
    assert t.version == v_before + 1, "one commit per table per batch"
    assert sorted(t.scan(["id"])["id"].to_pylist()) == [0, *range(5, 1000)]
    assert lethe.Table.open(t2_uri).scan(filters=[("customer_id", "=", 5)]).num_rows == 0
    # redelivery of the same batch: no new version
    resp2 = h.handler(
        sqs_event(
            [m for m in received if name_of[m["MessageId"]].startswith("good")], queue_arn=arn
        ),
        LambdaContext(),
    )
    assert resp2["batchItemFailures"] == []
    assert lethe.Table.open(table_uri).version == v_before + 1
    logs = capsys.readouterr().out
    assert "req-1" not in logs and '"id", "=", 1' not in logs
    assert "RowsDeleted" in logs


def test_erase_mode_records_pending_erasure(table_uri: str, queue: Any) -> None:
    from functions.delete_requests import handler as h

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    sqs, url, arn = queue
    sqs.send_message(
        QueueUrl=url, MessageBody=msg(table_uri, [["id", "=", 42]], "erase-1", mode="erase")
    )
    received = receive_all(sqs, url, 1)
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    assert resp["batchItemFailures"] == []
    t = lethe.Table.open(table_uri)
    assert t.lookup(42).num_rows == 0
    [e] = t.manifest.erasures
    assert e.state == "pending" and e.targets[0].row_groups == (0,)
