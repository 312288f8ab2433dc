"""Erase finishes whatever the rows' logical state (issue 10 item 5): rows already hidden by
a DV are still found in the files and spliced out; a retry without the request id completes
the first attempt's erasure; purge removes every hidden row; the splice commit is bounded."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from devtools.audit import Needle, audit_bucket
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.commit import RetryPolicy
from lethe.erasure.deletes import DeleteRequest
from lethe.gc import collect
from lethe.storage.store import parse_s3_uri

# ids are 0..199: "payload-77" is no prefix of another row's payload
NEEDLE = {"row 77": Needle((b"payload-77",))}


def physically_present(t: lethe.Table, key: int) -> bool:
    """Whether a live file of the head still holds a row with this key (DVs ignored)."""
    import io

    for f in t.manifest.files:
        body = t.store.get(t.key_of(f.path)).body
        if key in pq.read_table(io.BytesIO(body), columns=["id"])["id"].to_pylist():
            return True
    return False


def gc_now(uri: str) -> None:
    collect(uri, retention="1v", erasure_grace="0s", now=datetime.now(UTC) + timedelta(hours=1))


def make(uri: str, **kw: Any) -> lethe.Table:
    t = lethe.Table.create(uri, EVENTS, key="id", gc_grace="30m", row_group_bytes=2048, **kw)
    t.append(events(0, 100))
    t.append(events(100, 100))
    return t


def test_delete_then_erase_removes_the_row_physically(table_uri: str, s3: Any) -> None:
    t = make(table_uri)
    assert t.delete([("id", "=", 77)]).rows_deleted == 1
    assert physically_present(t, 77)
    r = t.erase([("id", "=", 77)], request_id="erase-77")
    assert r.rows_deleted == 0 and r.rows_erased >= 1 and r.complete
    t.refresh()
    assert not physically_present(t, 77)
    [e] = t.manifest.erasures
    assert e.state == "spliced"
    gc_now(table_uri)
    audit = audit_bucket(s3, parse_s3_uri(table_uri)[0], NEEDLE)
    assert audit.found("row 77") == ()
    assert verify(lethe.Table.open(table_uri)).ok
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == 199


def test_an_interrupted_erase_retried_without_its_id_completes(table_uri: str, s3: Any) -> None:
    t = make(table_uri)
    # the first attempt died after its DV commit: the erasure is pending, the row in place
    t.delete_batch([DeleteRequest([("id", "=", 77)], "erase-first", erase=True)], kind="erase")
    t.refresh()
    assert [e.state for e in t.manifest.erasures] == ["pending"]
    r = t.erase([("id", "=", 77)])  # a retry that lost the id
    assert r.complete and r.rows_erased >= 1 and r.rows_deleted == 0
    t.refresh()
    assert {e.state for e in t.manifest.erasures} == {"spliced"}  # both requests done
    assert not physically_present(t, 77)
    gc_now(table_uri)
    assert audit_bucket(s3, parse_s3_uri(table_uri)[0], NEEDLE).found("row 77") == ()


def test_erase_of_rows_in_a_fully_deleted_file(table_uri: str) -> None:
    t = make(table_uri)
    t.delete([("id", "<", 100)])  # the first file: every row hidden, the file still there
    assert any(f.live_rows == 0 for f in t.manifest.files)
    r = t.erase([("id", "=", 77)], request_id="e")
    assert r.complete and r.rows_erased >= 1
    assert not physically_present(t.refresh(), 77)


def test_erase_of_a_row_nobody_has_is_complete_and_commits_nothing(table_uri: str) -> None:
    t = make(table_uri)
    v = t.version
    r = t.erase([("id", "=", 10_000)], request_id="none")
    assert r.complete and r.rows_erased == 0 and t.refresh().version == v


def test_purge_removes_every_hidden_row_and_nothing_else(table_uri: str, s3: Any) -> None:
    t = make(table_uri)
    t.delete([("id", "in", [3, 77, 150])])
    t.delete([("customer_id", "=", 5)])  # ids 5, 105
    live = sorted(t.scan(["id"])["id"].to_pylist())
    r = t.purge(request_id="purge-1")
    assert r.complete and r.rows_erased == 5 and r.version is not None
    t.refresh()
    assert all(f.dv is None and f.deleted_rows == 0 for f in t.manifest.files)
    assert sorted(t.scan(["id"])["id"].to_pylist()) == live
    for k in (3, 5, 77, 105, 150):
        assert not physically_present(t, k)
    assert t.manifest.erasures[-1].state == "spliced"
    [op] = [h for h in t.history() if h.operation == "purge"]
    assert op.version < t.version
    again = t.purge(request_id="purge-1")  # idempotent
    assert again.duplicate and again.rows_erased == 0 and t.refresh().version == r.version
    nothing = t.purge()
    assert nothing.version is None and nothing.complete
    gc_now(table_uri)
    assert audit_bucket(s3, parse_s3_uri(table_uri)[0], NEEDLE).found("row 77") == ()


def test_purge_is_bounded_and_resumable(table_uri: str) -> None:
    t = make(table_uri)
    t.delete([("id", "in", [1, 60, 120, 190])])
    groups = {(f.path, g) for f in t.manifest.files for g in range(len(f.row_groups))}
    assert len(groups) > 2
    first = t.purge(request_id="slow-purge", max_bytes=1)  # one row group per call
    assert not first.complete and first.files_spliced == 1
    rounds = 1
    while True:
        r = t.purge(request_id="slow-purge", max_bytes=1)
        rounds += 1
        if r.complete:
            break
        assert rounds < 10
    assert rounds >= 2
    assert all(f.deleted_rows == 0 for f in t.refresh().manifest.files)
    assert t.scan(["id"]).num_rows == 196


def test_lethe_purge_command(table_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from lethe.cli import main

    t = make(table_uri)
    t.delete([("id", "=", 9)])
    assert main(["purge", table_uri, "--request-id", "cli-purge"]) == 0
    out = capsys.readouterr().out
    assert "purged 1 hidden rows" in out
    assert not physically_present(t.refresh(), 9)
    assert main(["purge", table_uri]) == 0
    assert "nothing to purge" in capsys.readouterr().out


def test_lethe_purge_through_the_splice_queue(
    table_uri: str, aws: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--queue-url`` records the purge and queues a splice job; the splice worker (the
    stack's Lambda, here on real SQS messages) finishes it."""
    from devtools.local.events import LambdaContext, sqs_event
    from lethe.cli import main

    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName=f"splice-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    t = make(table_uri)
    t.delete([("id", "in", [9, 99])])
    assert main(["purge", table_uri, "--queue-url", url, "--request-id", "q-purge"]) == 0
    assert "splice job queued" in capsys.readouterr().out
    assert physically_present(t.refresh(), 9)  # recorded, not yet spliced
    import importlib

    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")
    monkeypatch.setenv("LETHE_SPLICE_QUEUE_URL", url)
    monkeypatch.setenv("LETHE_SPLICE_MAX_BYTES", "1")  # one row group per invocation
    worker = importlib.reload(importlib.import_module("functions.splice.handler"))
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        msgs = got.get("Messages", [])
        if not msgs:
            break
        resp = worker.handler(sqs_event(msgs, queue_arn=arn), LambdaContext())
        assert resp["batchItemFailures"] == []
        for m in msgs:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    t.refresh()
    assert not physically_present(t, 9) and not physically_present(t, 99)
    assert t.manifest.erasures[-1].state == "spliced"


def test_commit_splice_is_bounded_under_a_hot_file(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete lands on the spliced file before every commit attempt: the splice gives up
    after max_attempts (jittered backoff between passes) and leaves nothing behind."""
    import lethe.dv.store as dvstore
    import lethe.erasure.erase as erase_mod

    t = make(table_uri, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01))
    t.delete_batch([DeleteRequest([("id", "=", 7)], "hot", erase=True)], kind="erase")
    other = lethe.Table.open(table_uri)
    real_write, real_rebase = dvstore.write_dvs, erase_mod.rebase_positions
    ours: list[str] = []
    passes: list[int] = []
    victims = iter(range(20, 100))

    def write(store: Any, prefix: str, dvs: Any) -> Any:
        refs = real_write(store, prefix, dvs)
        if store is t.store:  # the splice's, not the other writer's deletes
            ours.extend(r.container for r in refs.values())
        return refs

    def rebase_then_a_delete(*a: Any) -> Any:
        passes.append(1)
        other.delete([("id", "=", next(victims))])  # the base moves under the splice
        return real_rebase(*a)

    monkeypatch.setattr(dvstore, "write_dvs", write)
    monkeypatch.setattr(erase_mod, "rebase_positions", rebase_then_a_delete)
    data_before = _keys(s3, table_uri, "data/")
    with pytest.raises(errors.CommitConflict, match="gave up after 4 attempts"):
        erase_mod.process_erasure(t.refresh().context, t.manifest.erasures[0].id_hash)
    assert len(passes) == 4 and 1 <= len(ours) <= 4  # bounded passes, a container at most each
    assert _keys(s3, table_uri, "data/") == data_before  # the spliced object removed
    assert not set(ours) & _keys(s3, table_uri, "tombstone/")  # and its containers
    head = lethe.Table.open(table_uri)
    assert verify(head).ok and head.manifest.erasures[0].state == "pending"
    assert head.scan(["id"]).num_rows == 200 - 1 - 4


def _keys(s3: Any, uri: str, prefix: str) -> set[str]:
    bucket, root = parse_s3_uri(uri)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{prefix}")
    return {o["Key"][len(root) + 1 :] for p in pages for o in p.get("Contents", [])}


_CHILD = """
import sys, threading, time
import lethe
import lethe.erasure.erase as E

uri, op, where = sys.argv[1:4]
real_splice = E.splice_file
calls = []
said = threading.Lock()  # splices run a few at a time: one line, from the first to hang

def hang():
    if said.acquire(blocking=False):
        sys.stdout.write("AT " + where + "\\n")
        sys.stdout.flush()
    time.sleep(600)

def spliced(*a, **k):
    calls.append(1)
    if where == "before-splice" or (where == "second-splice" and len(calls) == 2):
        hang()
    s = real_splice(*a, **k)
    if where == "after-upload":
        hang()
    return s

E.splice_file = spliced
t = lethe.Table.open(uri)
if op == "erase":
    t.erase([("id", "=", 77)], request_id="killed-erase")
else:
    t.purge(request_id="killed-purge")
"""


@pytest.mark.parametrize(
    ("op", "where", "retry_id"),
    [
        ("erase", "before-splice", None),
        ("erase", "after-upload", None),
        ("purge", "after-upload", None),
        ("purge", "second-splice", "killed-purge"),
        ("purge", "second-splice", None),
    ],
)
def test_erase_and_purge_killed_mid_way_then_retried(
    table_uri: str, s3: Any, op: str, where: str, retry_id: str | None, tmp_path: Any
) -> None:
    """SIGKILL a child erasing or purging once its erasure record is committed: before a
    splice, with a spliced object uploaded but not committed, or between two splices. A retry
    (with its id, or one that lost it) finishes the work, and after GC no byte of the row is
    left in the bucket."""
    import signal
    import subprocess
    import sys

    t = make(table_uri)
    if op == "purge":
        t.delete([("id", "in", [10, 77, 150])])  # hidden rows in both files
    err = tmp_path / "child.err"
    with (
        err.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, table_uri, op, where],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        ) as child,
    ):
        try:
            line = child.stdout.readline()  # type: ignore[union-attr]
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    assert line.strip() == f"AT {where}", err.read_text()
    assert child.returncode == -signal.SIGKILL
    t.refresh()
    [e] = t.manifest.erasures
    assert e.state == "pending" and t.lookup(77).num_rows == 0
    if where != "second-splice":
        assert physically_present(t, 77)
    if op == "erase":
        r = t.erase([("id", "=", 77)], request_id=retry_id)
    else:
        r = t.purge(request_id=retry_id)
    assert r.complete
    t.refresh()
    assert {x.state for x in t.manifest.erasures} == {"spliced"}
    for k in (10, 77, 150) if op == "purge" else (77,):
        assert not physically_present(t, k)
    gc_now(table_uri)
    assert audit_bucket(s3, parse_s3_uri(table_uri)[0], NEEDLE).found("row 77") == ()
    assert verify(lethe.Table.open(table_uri)).ok
    assert lethe.Table.open(table_uri).scan(["id"]).num_rows == (197 if op == "purge" else 199)
