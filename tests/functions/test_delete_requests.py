"""The delete-request Lambda with real SQS messages from moto's server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
from devtools.local.events import LambdaContext, sqs_event
from tests.functions import handler_logs
from tests.functions.queues import new_queue, receive

# the delete-request handler's fixtures (autouse environment, log lines)
delete_handler_env = handler_logs.delete_handler_env
logs = handler_logs.logs


@pytest.fixture
def queue(aws: Any) -> tuple[Any, str, str]:
    return new_queue(aws, "deletes")


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
    table_uri: str, bucket: str, queue: Any, logs: Callable[[], str]
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
        "schema_invalid": json.dumps({"request_id": "y", "table": table_uri, "mode": "logical"}),
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
    text = logs()
    assert "req-1" not in text and '"id", "=", 1' not in text
    assert "RowsDeleted" in text and "delete request failed" in text


def test_a_message_without_requested_at_is_dated_by_the_queue(
    table_uri: str, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message docs/local.md shows (no requested_at) commits; SentTimestamp dates it."""
    from functions.delete_requests import handler as h
    from lethe.lake import requests

    lethe.Table.create(table_uri, EVENTS, key="id").append(events(0, 100))
    sqs, url, arn = queue
    body = {"request_id": "gdpr-1", "table": table_uri, "filters": [["id", "=", 7]]}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    r = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"], WaitTimeSeconds=1)
    [m] = r["Messages"]
    sent = requests.sqs_sent_timestamp(m["Attributes"]["SentTimestamp"])
    assert sent is not None
    seen: list[Any] = []
    real = requests.parse_message

    def spy(b: Any, *, sent_at: Any = None) -> Any:
        seen.append(real(b, sent_at=sent_at))
        return seen[-1]

    monkeypatch.setattr(requests, "parse_message", spy)
    resp = h.handler(sqs_event([m], queue_arn=arn), LambdaContext())
    assert resp["batchItemFailures"] == []
    assert [x.requested_at for x in seen] == [sent]
    t = lethe.Table.open(table_uri)
    assert t.lookup(7).num_rows == 0 and t.scan().num_rows == 99
    # a message that carries requested_at keeps its own
    own = requests.parse_message({**body, "requested_at": "2026-11-22T10:00:00Z"}, sent_at=sent)
    assert own.requested_at is not None and own.requested_at.isoformat().startswith("2026-11-22")


def test_erase_mode_records_pending_erasure(table_uri: str, queue: Any) -> None:
    from functions.delete_requests import handler as h

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    sqs, url, arn = queue
    sqs.send_message(
        QueueUrl=url, MessageBody=msg(table_uri, [["id", "=", 42]], "erase-1", mode="erase")
    )
    received = receive(sqs, url, 1)
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    assert resp["batchItemFailures"] == []
    t = lethe.Table.open(table_uri)
    assert t.lookup(42).num_rows == 0
    [e] = t.manifest.erasures
    assert e.state == "pending" and e.targets[0].row_groups == (0,)


def records(table_uri: str, bodies: list[str]) -> dict[str, Any]:
    """An SQS event as Lambda delivers it, for bodies SQS itself would not carry (> 256 KiB)."""
    import hashlib

    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": b,
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(b.encode("utf-8", "surrogatepass")).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:deletes",
                "awsRegion": "us-east-1",
            }
            for b in bodies
        ]
    }


def test_an_all_bad_batch_is_reported_not_raised(table_uri: str, queue: Any) -> None:
    from functions.delete_requests import handler as h

    lethe.Table.create(table_uri, EVENTS, key="id").append(events(0, 10))
    sqs, url, arn = queue
    for body in ("not json", msg(table_uri, [["nope", "=", 1]]), msg(table_uri, "id = 1")):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = receive(sqs, url, 3)
    assert len(received) == 3
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    assert {f["itemIdentifier"] for f in resp["batchItemFailures"]} == {
        m["MessageId"] for m in received
    }
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == 10


def test_swapped_predicate_slots_never_echo_the_value(
    table_uri: str, queue: Any, logs: Callable[[], str]
) -> None:
    from functions.delete_requests import handler as h

    lethe.Table.create(table_uri, EVENTS, key="id").append(events(0, 10))
    sqs, url, arn = queue
    planted = "alice.planted@example.com"
    bodies = [
        msg(table_uri, [[planted, "=", "id"]]),  # value in the column slot
        msg(table_uri, [["id", planted, 1]]),  # value in the op slot
        msg(table_uri, [["payload", "=", 1], [planted, "in", [planted]]]),
        json.dumps({"request_id": "r", "table": table_uri, "filters": [], planted: 1}),
        msg(f"s3://{planted.replace('@', '-')}/t", [["id", "=", 1]]),  # a bucket named by it
    ]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = receive(sqs, url, len(bodies))
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    assert len(resp["batchItemFailures"]) == len(bodies)
    text = logs()
    assert "delete request failed" in text  # the failures were logged ...
    assert "alice" not in text  # ... without the sender's strings
    assert "names a column that is not in the table" in text and "unknown filter op" in text


def test_a_request_id_names_one_request(
    table_uri: str, queue: Any, logs: Callable[[], str]
) -> None:
    from functions.delete_requests import handler as h

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    sqs, url, arn = queue
    # the same id with another body in one batch: the first commits, the second fails
    for body in (
        msg(table_uri, [["id", "=", 1]], "rid-A"),
        msg(table_uri, [["id", "=", 2]], "rid-A"),
    ):
        sqs.send_message(QueueUrl=url, MessageBody=body)
        # FIFO-free queue: send one at a time so the order of receipt is the order sent
    received = receive(sqs, url, 2)
    by_body = {json.loads(m["Body"])["filters"][0][2]: m["MessageId"] for m in received}
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    [failed] = [f["itemIdentifier"] for f in resp["batchItemFailures"]]
    first = 1 if received[0]["MessageId"] == by_body[1] else 2
    second = 3 - first
    assert failed == by_body[second]
    remaining = set(lethe.Table.open(table_uri).scan(["id"])["id"].to_pylist())
    assert first not in remaining and second in remaining
    assert "request id already names a different request" in logs()

    # across batches: the committed id with another body (or mode) fails; the same body is
    # a redelivery and succeeds without a commit
    v = lethe.Table.open(table_uri).version
    for body in (
        msg(table_uri, [["id", "=", 7]], "rid-A"),
        msg(table_uri, [["id", "=", first]], "rid-A", mode="erase"),
        msg(table_uri, [["id", "=", first]], "rid-A"),
    ):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = receive(sqs, url, 3)
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    failed_bodies = {
        m["Body"]
        for m in received
        if m["MessageId"] in {f["itemIdentifier"] for f in resp["batchItemFailures"]}
    }
    assert failed_bodies == {
        msg_body
        for msg_body in (m["Body"] for m in received)
        if json.loads(msg_body)["mode"] == "erase"
        or json.loads(msg_body)["filters"] == [["id", "=", 7]]
    }
    t = lethe.Table.open(table_uri)
    assert t.version == v and t.lookup(7).num_rows == 1


def test_a_conflicting_request_id_raises_through_the_api(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 10))
    assert t.delete([("id", "=", 1)], request_id="same").rows_deleted == 1
    assert t.delete([("id", "=", 1)], request_id="same").duplicate
    with pytest.raises(lethe.errors.RequestIdConflict, match="different request"):
        t.delete([("id", "=", 2)], request_id="same")
    with pytest.raises(lethe.errors.RequestIdConflict):
        t.erase([("id", "=", 1)], request_id="same")
    assert t.lookup(2).num_rows == 1


PLANTED = "zz-planted-7731@example.org"  # a person's key: must never reach a log line


def _bad_bodies(table: str, other_bucket: str) -> Any:
    """Message bodies that must fail (each carries the planted key somewhere)."""
    from hypothesis import strategies as st

    def req(filters: Any, **over: Any) -> str:
        body = {
            "request_id": PLANTED,
            "table": table,
            "filters": filters,
            "mode": "logical",
            "requested_at": "2026-11-22T10:00:00Z",
        }
        body.update(over)
        return json.dumps(body)

    ctrl = st.text(alphabet=st.characters(max_codepoint=31), min_size=1, max_size=5)
    return st.one_of(
        # malformed JSON around the key
        st.text(max_size=40).map(lambda s: '{"request_id": "' + PLANTED + s),
        st.integers(1, 60).map(lambda n: req([["id", "=", 1]])[:n] + PLANTED),
        # wrong types in every slot
        st.sampled_from(
            [
                req(PLANTED),
                req({"id": PLANTED}),
                req([["id", "=", 1]], mode=PLANTED),
                req([["id", "=", 1]], table=[PLANTED]),
                req([["id", "=", 1]], request_id=["x", PLANTED]),
                req([["id", "=", 1]], requested_at=PLANTED),
                req([[["id", "=", 1]], [PLANTED]]),
                req([["id", "=", 1]], **{PLANTED: True}),
            ]
        ),
        # swapped slots, unknown columns and ops, control characters
        st.sampled_from([[PLANTED, "=", "id"], ["id", PLANTED, 1], [PLANTED, "in", [1]]]).map(
            lambda p: req([p])
        ),
        ctrl.map(lambda c: req([[c + PLANTED, "=", 1]])),
        ctrl.map(lambda c: req([["payload", c, PLANTED]])),
        # values that cannot be exact for the column
        st.sampled_from(
            [
                ["id", "=", PLANTED],
                ["id", "=", 1.5],
                ["id", "in", [1, 2.25]],
                ["customer_id", "=", 2**40],
                ["event_time", "=", PLANTED],
                ["payload", "=", 7],
            ]
        ).map(lambda p: req([p])),
        # giant IN lists and megabyte bodies (beyond what SQS carries: Lambda's shape, direct)
        st.integers(10_000, 60_000).map(lambda n: req([["id", "in", [PLANTED] * n]])),
        st.integers(1, 2).map(lambda n: req([["id", "=", PLANTED * (n * 40_000)]])),
        st.just("x" * 1_000_000 + PLANTED),
        # nesting past the parser's recursion limit, numbers past the digit limit, lone
        # surrogates (invalid UTF-8): issue 35 item 11
        st.integers(1_100, 60_000).map(lambda n: "[" * n + json.dumps(PLANTED) + "]" * n),
        st.integers(4_301, 20_000).map(
            lambda n: (
                '{"request_id": "'
                + PLANTED
                + '", "table": "'
                + table
                + '", "filters": [["id", "=", '
                + "9" * n
                + "]]}"
            )
        ),
        st.just(req([["payload", "=", PLANTED + "\udcff"]])),
        # tables that are not there, in this bucket or another
        st.sampled_from(
            [
                req([["id", "=", 1]], table=f"s3://{other_bucket}/{PLANTED.replace('@', '-')}"),
                req([["id", "=", 1]], table=f"s3://nonexistent-{uuid.uuid4().hex[:8]}/t"),
                req([["id", "=", 1]], table=table + "/" + PLANTED.replace("@", "-")),
            ]
        ),
    )


@pytest.mark.slow
def test_fuzzed_batches_never_raise_never_log_a_key_never_delete_an_unnamed_row(
    bucket: str, s3: Any, logs: Callable[[], str]
) -> None:
    """Hypothesis builds SQS batches of good requests (by id) and bad ones around a planted
    key; the handler reports exactly the bad ones, logs none of their strings, and deletes
    exactly the rows the good ones name."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from functions.delete_requests import handler as h

    other = f"b-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=other)
    probe = f"s3://{bucket}/fuzz/probe"
    good = st.one_of(
        st.integers(0, 199).map(lambda k: [["id", "=", k]]),
        st.lists(st.integers(0, 199), min_size=1, max_size=5).map(lambda ks: [["id", "in", ks]]),
        # valid but naming no row: a megabyte string on a string column
        st.just([["payload", "=", "y" * 1_000_000]]),
    )
    batch = st.lists(
        st.one_of(
            good.map(lambda f: ("good", f)), _bad_bodies(probe, other).map(lambda b: ("bad", b))
        ),
        min_size=1,
        max_size=10,
    )

    @settings(
        max_examples=25,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.large_base_example],
    )
    @given(batch)
    def run(items: list[tuple[str, Any]]) -> None:
        uri = f"s3://{bucket}/fuzz/t{uuid.uuid4().hex[:8]}"
        t = lethe.Table.create(uri, EVENTS, key="id")
        t.append(events(0, 200))
        named: set[int] = set()
        bodies: list[str] = []
        for kind, x in items:
            if kind == "good":
                named |= {x[0][2]} if x[0][1] == "=" and x[0][0] == "id" else set()
                named |= set(x[0][2]) if x[0][1] == "in" else set()
                bodies.append(msg(uri, x))
            else:
                bodies.append(x.replace(probe, uri))
        event = records(uri, bodies)
        logs()  # drop earlier lines
        resp = h.handler(event, LambdaContext())  # never raises
        failed = {f["itemIdentifier"] for f in resp["batchItemFailures"]}
        expect = {
            r["messageId"]
            for r, (kind, _) in zip(event["Records"], items, strict=True)
            if kind == "bad"
        }
        assert failed == expect
        text = logs()
        assert PLANTED not in text and "planted" not in text
        left = set(lethe.Table.open(uri).scan(["id"])["id"].to_pylist())
        assert left == set(range(200)) - named

    run()


def _poison_bodies(table: str) -> list[str]:
    """Bodies that once raised out of the handler (issue 35 item 11), each one kind."""
    deep = "[" * 50_000 + "]" * 50_000  # json.loads: RecursionError
    head = '{"request_id": "r-deep", "table": "' + table + '", "filters": [["id", "=", '
    return [
        deep,
        '{"a": ' * 20_000 + "1" + "}" * 20_000,
        head + "[" * 30_000 + "]" * 30_000 + "]]}",  # nested inside a valid-looking request
        head + "9" * 5_000 + "]]}",  # an integer past Python's 4,300-digit conversion limit
        head + "1]], " + '"pad": "' + "x" * 200_000 + '"}',  # a huge body
        msg(table, [["id", "=", 1]], "\ud800"),  # a lone surrogate: no UTF-8 for it
        msg(table, [["payload", "=", "\udcff\udcfe"]]),  # invalid UTF-8, decoded with escapes
        msg(table, [["id", "=", {"nested": [1]}]]),  # wrong types in the value slot
        msg(table, [["id", "in", 5]]),
        msg(table, [["id", "=", [1, 2]]]),
        msg(table, [["event_time", "=", 1e308 * 10]]),  # inf
        "null",
        "[]",
        "42",
        '"a string"',
        json.dumps({"request_id": 5, "table": table, "filters": [["id", "=", 1]]}),
        json.dumps({"subject": {"x": 1}, "values": [[1]], "request_id": "r"}),
    ]


def test_seam11_one_poison_message_fails_alone_in_a_batch_of_81(
    table_uri: str, queue: Any, logs: Callable[[], str]
) -> None:
    """issue 35 item 11: a deeply nested JSON body raised RecursionError out of the handler:
    the 14 good requests of the same batch of 81 were not applied and no batchItemFailures
    came back. Every malformed message must fail alone, with a reason; the good ones apply."""
    from functions.delete_requests import handler as h

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    sqs, url, arn = queue
    poison = _poison_bodies(table_uri)
    bad = [poison[i % len(poison)] for i in range(67)]
    good = [msg(table_uri, [["id", "=", 10 + k]], f"good-{k}") for k in range(14)]
    kinds = [("bad", b) for b in bad] + [("good", g) for g in good]
    for i, (kind, body) in enumerate(kinds):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={"kind": {"DataType": "String", "StringValue": f"{kind}-{i}"}},
        )
    received: list[dict[str, Any]] = []
    while len(received) < len(kinds):
        r = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=1
        )
        received.extend(r.get("Messages", []))
    assert len(received) == 81
    kind_of = {m["MessageId"]: m["MessageAttributes"]["kind"]["StringValue"] for m in received}
    resp = h.handler(sqs_event(received, queue_arn=arn), LambdaContext())
    failed = {kind_of[f["itemIdentifier"]] for f in resp["batchItemFailures"]}
    assert failed == {k for k in kind_of.values() if k.startswith("bad")}
    ids = set(lethe.Table.open(table_uri).scan(["id"])["id"].to_pylist())
    assert ids == set(range(100)) - set(range(10, 24))  # the 14 good ones applied
    text = logs()
    assert text.count("delete request failed") == 67  # each with its reason
    assert "RecursionError" not in text or "nested too deeply" in text
