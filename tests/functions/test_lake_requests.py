"""Lake requests through the delete-request Lambda (issue 29): one SQS message per person,
every mapped table, the splices queued, one receipt; moto's SQS and S3."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

import lethe
from devtools.local.events import LambdaContext, sqs_event
from lethe.gc import collect
from tests.functions import handler_logs
from tests.functions.queues import new_queue, receive

# the delete-request handler's fixtures (autouse environment, log lines)
delete_handler_env = handler_logs.delete_handler_env
logs = handler_logs.logs

PERSON = 7919
SECRET_ID = "gdpr-secret-5e11"
SCHEMA = pa.schema([("id", pa.int64(), False), ("customer_id", pa.int64())])


@pytest.fixture
def lake(bucket: str) -> Iterator[tuple[lethe.Lake, list[str]]]:
    lk = lethe.Lake.create(f"s3://{bucket}/_lethe", erasure_window=timedelta(0))
    uris = []
    for i, name in enumerate(("orders", "events", "tickets")):
        uri = f"s3://{bucket}/tables/{name}"
        # a short grace would make commits race the clock on a loaded machine (GraceExpired)
        t = lethe.Table.create(uri, SCHEMA, key="id", gc_grace="60s", row_group_bytes=1 << 10)
        for f in range(2):
            ids = list(range(f * 300 + i * 10_000, (f + 1) * 300 + i * 10_000))
            t.append(
                pa.table(
                    {"id": ids, "customer_id": [PERSON if x % 10 == 0 else x % 97 for x in ids]},
                    schema=SCHEMA,
                )
            )
        lk.map_subject("customer", table=uri, column="customer_id")
        uris.append(uri)
    yield lk, uris


@dataclass(frozen=True)
class Wired:
    """The lake, its tables' URIs, moto, and the delete-request handler to set up."""

    lk: lethe.Lake
    uris: list[str]
    aws: Any
    monkeypatch: pytest.MonkeyPatch

    def handler(self, env: dict[str, str]) -> Any:
        from _settings import DeleteRequestsSettings
        from functions.delete_requests import handler as h

        self.monkeypatch.setattr(h, "SETTINGS", DeleteRequestsSettings.from_env(env))
        return h

    def lake_handler(self) -> tuple[tuple[Any, str, str], str, Any]:
        """A request queue, a splice queue's URL, and the handler set to the lake and that queue."""
        requests = new_queue(self.aws)
        _, splice_url, _ = new_queue(self.aws)
        env = {"LETHE_LAKE_URI": self.lk.uri, "LETHE_SPLICE_QUEUE_URL": splice_url}
        return requests, splice_url, self.handler(env)


@pytest.fixture
def wired(lake: tuple[lethe.Lake, list[str]], aws: Any, monkeypatch: pytest.MonkeyPatch) -> Wired:
    return Wired(*lake, aws, monkeypatch)


def _send_one(sqs: Any, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Send ``body`` to the queue and receive it back (with its attributes)."""
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    return receive(sqs, url, 1, attributes=True)


def test_one_message_every_table_one_receipt(wired: Wired, logs: Callable[[], str]) -> None:
    lk, uris = wired.lk, wired.uris
    (sqs, url, arn), splice_url, h = wired.lake_handler()
    good = {"request_id": SECRET_ID, "subject": "customer", "values": [PERSON], "mode": "erase"}
    bodies = {
        "good": good,
        "redelivered": good,
        "other_values": {**good, "values": [PERSON, 1]},
        "no_values": {**good, "request_id": "r2", "values": []},
        "bool_value": {**good, "request_id": "r3", "values": [True]},
        "unknown_kind": {**good, "request_id": "r4", "subject": "supplier"},
        "extra_field": {**good, "request_id": "r5", "table": uris[0]},
        "table_level": {
            "request_id": "t1",
            "table": uris[0],
            "filters": [["id", "=", 1]],
        },
    }
    for name, body in bodies.items():
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(body),
            MessageAttributes={"name": {"DataType": "String", "StringValue": name}},
        )
    received = receive(sqs, url, len(bodies), attributes=True)
    name_of = {m["MessageId"]: m["MessageAttributes"]["name"]["StringValue"] for m in received}
    versions = {u: lethe.Table.open(u).version for u in uris}
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    failed = {name_of[f["itemIdentifier"]] for f in resp["batchItemFailures"]}
    assert failed == {"other_values", "no_values", "bool_value", "unknown_kind", "extra_field"}
    after = {u: lethe.Table.open(u).version for u in uris}
    # one commit per table for the lake's requests; the table-level message on orders in the
    # same batch commits on its own (the two paths group separately)
    assert after == {u: v + 1 + (u == uris[0]) for u, v in versions.items()}
    for u in uris:
        assert lethe.Table.open(u).scan(filters=[("customer_id", "=", PERSON)]).num_rows == 0
    assert lethe.Table.open(uris[0]).lookup(1).num_rows == 0  # the table-level message too

    # requested_at defaulted to the queue's SentTimestamp
    sent = min(int(m["Attributes"]["SentTimestamp"]) for m in received) / 1000
    receipt = lk.erasure_status(SECRET_ID)
    assert abs(receipt.requested_at.timestamp() - sent) < 5
    assert receipt.state == "erasing" and len(receipt.tables) == 3

    # the splice jobs, one per table, then the worker and GC: one receipt, complete
    jobs = receive(sqs, splice_url, 3, attributes=True)
    assert sorted(json.loads(j["Body"])["table"] for j in jobs) == sorted(uris)
    from functions.splice import handler as splice

    _, _, splice_arn = new_queue(wired.aws)
    assert splice.handler(sqs_event(jobs, queue_arn=splice_arn), LambdaContext()) == {
        "batchItemFailures": []
    }
    assert lk.erasure_status(SECRET_ID).state == "removed"
    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    assert lk.erasure_status(SECRET_ID).done

    # a redelivery of the good message commits nothing
    again = [m for m in received if name_of[m["MessageId"]] == "good"]
    resp = h.handler(sqs_event(again, queue_arn=arn), LambdaContext())
    assert resp["batchItemFailures"] == []
    assert {u: lethe.Table.open(u).version for u in uris} == {
        u: lethe.Table.open(u).version for u in uris
    }
    text = logs()
    assert SECRET_ID not in text and not re.search(rf"\b{PERSON}\b", text)
    assert "lake batch committed" in text and "delete request failed" in text


def test_a_lake_message_without_a_lake_fails_with_a_reason(
    wired: Wired, logs: Callable[[], str]
) -> None:
    uris = wired.uris
    sqs, url, arn = new_queue(wired.aws)
    h = wired.handler({})
    received = _send_one(
        sqs, url, {"request_id": SECRET_ID, "subject": "customer", "values": [PERSON]}
    )
    versions = {u: lethe.Table.open(u).version for u in uris}
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    assert [f["itemIdentifier"] for f in resp["batchItemFailures"]] == [received[0]["MessageId"]]
    assert {u: lethe.Table.open(u).version for u in uris} == versions
    text = logs()
    assert "LETHE_LAKE_URI" in text and SECRET_ID not in text


def test_parse_any_routes_by_shape() -> None:
    from lethe import errors
    from lethe.lake.requests import DeleteRequestMessage, LakeRequestMessage, parse_any

    lake = parse_any({"request_id": "r", "subject": "customer", "values": [1, "a@b"]})
    assert isinstance(lake, LakeRequestMessage) and lake.mode == "erase"
    table = parse_any({"request_id": "r", "table": "s3://b/t", "filters": [["id", "=", 1]]})
    assert isinstance(table, DeleteRequestMessage)
    with pytest.raises(errors.InvalidRequest, match=r"invalid lake request \(values\.0\)"):
        parse_any({"request_id": "r", "subject": "customer", "values": [None]})
    with pytest.raises(errors.InvalidRequest, match=r"invalid lake request \(<extra>\)") as e:
        parse_any({"request_id": "r", "subject": "c", "values": [1], "secret@x": 1})
    assert "secret@x" not in str(e.value)
    with pytest.raises(errors.InvalidRequest, match="not valid JSON"):
        parse_any('{"subject": ')


def emf(text: str) -> list[dict[str, Any]]:
    """The Powertools EMF documents printed (one JSON line per flush); a metric added once
    is a one-element list there: unwrapped."""
    out = []
    for line in text.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            out.append(
                {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in doc.items()}
            )
    return out


def test_windowed_lake_defers_splices_and_publishes_its_backlog(
    wired: Wired, logs: Callable[[], str]
) -> None:
    lk, uris = wired.lk, wired.uris
    lk.set_erasure_window(timedelta(seconds=2))
    (sqs, url, arn), splice_url, h = wired.lake_handler()
    body = {"request_id": SECRET_ID, "subject": "customer", "values": [PERSON], "mode": "erase"}
    received = _send_one(sqs, url, body)
    logs()
    assert h.handler(sqs_event(received, queue_arn=arn), LambdaContext()) == {
        "batchItemFailures": []
    }
    assert (
        receive(sqs, splice_url, 1, attributes=True) == []
    )  # the window run splices it, not a job now
    (doc,) = [d for d in emf(logs()) if "PendingLakeRequests" in d]
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Lethe" and directive["Dimensions"] == [["service"]]
    names = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert names["PendingLakeRequests"] == "Count"
    assert names["OldestPendingLakeRequestAge"] == "Seconds"
    assert doc["PendingLakeRequests"] == 1 and 0 <= doc["OldestPendingLakeRequestAge"] < 60
    assert (
        lk.erasure_status(SECRET_ID).state == "hidden"
        or not lk.erasure_status(SECRET_ID).tables[0].files_spliced
    )

    # the scheduled window event (EventBridge -> the splice worker) once the window closed
    from _settings import SpliceSettings
    from functions.splice import handler as splice

    wired.monkeypatch.setattr(
        splice, "SETTINGS", SpliceSettings.from_env({"LETHE_LAKE_URI": lk.uri})
    )
    time.sleep(2.1)
    out = splice.handler({"lethe": "erasure-window"}, LambdaContext())
    assert out["requests_due"] == 1 and out["complete"] and out["files"] >= len(uris)
    assert out["commits"] == len(uris) and out["pending"] == 1  # spliced; GC completes it
    (doc,) = [d for d in emf(logs()) if "WindowFilesSpliced" in d]
    assert doc["WindowFilesSpliced"] == out["files"] and doc["PendingLakeRequests"] == 1
    assert lk.erasure_status(SECRET_ID).state == "removed"
    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    out = splice.handler({"lethe": "erasure-window"}, LambdaContext())
    assert out["files"] == 0 and out["pending"] == 0
    (doc,) = [d for d in emf(logs()) if "WindowFilesSpliced" in d]
    assert doc["PendingLakeRequests"] == 0 and doc["OldestPendingLakeRequestAge"] == 0
    text = json.dumps(doc)
    assert SECRET_ID not in text and not re.search(rf"\b{PERSON}\b", text)
