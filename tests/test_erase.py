"""Hard erasure on S3: splice + multipart assembly against moto's server (which enforces
EntityTooSmall), DV rebase, failure injection, concurrent deletes, the splice worker."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faults import fail_requests_after

import lethe
from devtools.datagen import BLOB_SCHEMA, blob_rows
from lethe import errors
from lethe.audit.verify import verify
from lethe.erasure.erase import commit_splice, splice_file
from lethe.errors import StoreError
from lethe.parquet.validate import validate
from lethe.storage.store import MIN_PART_BYTES

BLOBS = BLOB_SCHEMA


def blobs(start: int, n: int, width: int = 1000) -> pa.Table:
    return blob_rows(start, n, width, digits=8)


@pytest.fixture
def big(table_uri: str) -> lethe.Table:
    """One ~19 MiB file of three ~6.3 MiB row groups (incompressible), so copies are real."""
    t = lethe.Table.create(
        table_uri, BLOBS, key="id", target_file_bytes=64 << 20, row_group_bytes=6 << 20
    )
    t.append(blobs(0, 20_000))
    [f] = t.manifest.files
    assert len(f.row_groups) >= 3 and f.size > 3 * MIN_PART_BYTES
    return t


def object_bytes(t: lethe.Table, path: str) -> bytes:
    return t.store.get(t.key_of(path)).body


def check_file(t: lethe.Table, gone: set[int], total: int) -> bytes:
    m = lethe.Table.open(t.uri).manifest
    assert len(m.files) == 1
    body = object_bytes(t, m.files[0].path)
    assert validate(body) == []
    ids = pq.read_table(pa.BufferReader(body), columns=["id"])["id"].to_pylist()
    assert ids == [i for i in range(total) if i not in gone]
    for g in gone:
        assert f"name-{g:08d}".encode() not in body
    return body


@pytest.mark.parametrize("victim", [5, 10_000, 19_999])
def test_erase_one_row_copies_the_rest_server_side(big: lethe.Table, victim: int) -> None:
    size = big.manifest.files[0].size
    r = big.erase([("id", "=", victim)], request_id=f"e-{victim}")
    assert (r.rows_deleted, r.rows_erased, r.files_spliced, r.complete) == (1, 1, 1, True)
    assert r.bytes_copied >= MIN_PART_BYTES, (
        "unchanged groups were copied, not moved through the client"
    )
    assert r.bytes_uploaded + r.bytes_downloaded < 1.1 * size
    assert r.bytes_copied + r.bytes_uploaded >= size * 0.95
    check_file(big, {victim}, 20_000)
    t = lethe.Table.open(big.uri)
    assert t.lookup(victim).num_rows == 0 and t.manifest.files[0].dv is None
    [e] = t.manifest.erasures
    assert e.state == "spliced" and t.manifest.superseded_of(e) and e.spliced_version == t.version
    assert verify(t).ok
    # idempotent: the same request again commits nothing
    again = t.erase([("id", "=", victim)], request_id=f"e-{victim}")
    assert again.duplicate and lethe.Table.open(big.uri).version == t.version


def test_erase_many_rows_and_a_whole_group(big: lethe.Table) -> None:
    rg0 = big.manifest.files[0].row_groups[0].rows
    groups_before = len(big.manifest.files[0].row_groups)
    gone = set(range(rg0)) | {rg0 + 7, 19_000}
    r = big.erase([[("id", "<", rg0)], [("id", "in", [rg0 + 7, 19_000])]])
    assert r.rows_erased == len(gone)
    check_file(big, gone, 20_000)
    f = lethe.Table.open(big.uri).manifest.files[0]
    assert len(f.row_groups) == groups_before - 1, "the emptied group was dropped"
    assert f.rows == 20_000 - len(gone)


def test_erase_all_rows_removes_the_file(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, BLOBS, key="id", row_group_bytes=200_000)
    t.append(blobs(0, 500))
    t.append(blobs(500, 500))
    r = t.erase([("id", "<", 500)])
    assert r.files_removed == 1 and r.rows_erased == 500
    m = lethe.Table.open(table_uri).manifest
    assert len(m.files) == 1 and m.total_rows == 500


def test_earlier_deletes_in_other_groups_are_rebased(big: lethe.Table) -> None:
    big.delete([("id", "in", [3, 19_998])])  # logical only, groups 0 and last
    big.erase([("id", "=", 10_000)])  # splices the middle group only
    t = lethe.Table.open(big.uri)
    f = t.manifest.files[0]
    assert f.dv is not None and f.dv.cardinality == 2
    ids = t.scan(["id"])["id"].to_pylist()
    assert ids == [i for i in range(20_000) if i not in {3, 19_998, 10_000}]


def test_failure_mid_upload_aborts_and_leaves_table_unchanged(big: lethe.Table) -> None:
    big.delete([("id", "=", 10_000)])
    t = lethe.Table.open(big.uri)
    f = t.manifest.files[0]
    before = {o.key for o in t.store.list(t.key_of("data/"))}
    with fail_requests_after(t.store.client, 1), pytest.raises(StoreError, match="injected"):
        splice_file(t.context, f, range(len(f.row_groups)))
    assert t.store.list_multipart(t.key_of("")) == [], "no orphaned parts"
    assert {o.key for o in t.store.list(t.key_of("data/"))} == before
    again = lethe.Table.open(big.uri)
    assert again.version == t.version and again.scan(["id"]).num_rows == 19_999


def test_concurrent_delete_during_a_splice_is_carried_over(big: lethe.Table) -> None:
    big.delete([("id", "=", 10_000)])
    t = lethe.Table.open(big.uri)
    f = t.manifest.files[0]
    s = splice_file(t.context, f, [1])  # the splice is built, not yet committed
    lethe.Table.open(big.uri).delete([("id", "in", [2, 10_001, 19_999])])  # lands meanwhile
    commit_splice(t.context, s)
    final = lethe.Table.open(big.uri)
    ids = final.scan(["id"])["id"].to_pylist()
    assert ids == [i for i in range(20_000) if i not in {2, 10_000, 10_001, 19_999}]
    nf = final.manifest.files[0]
    assert nf.dv is not None and nf.dv.cardinality == 3, (
        "the concurrent delete was mapped onto the new file"
    )
    assert verify(final).ok


def test_splice_refuses_a_replaced_file(big: lethe.Table) -> None:
    big.delete([("id", "=", 10_000)])
    t = lethe.Table.open(big.uri)
    f = t.manifest.files[0]
    s = splice_file(t.context, f, [1])
    commit_splice(t.context, s)
    with pytest.raises(errors.CommitConflict, match="replaced"):
        commit_splice(t.context, s)


def test_readers_accept_the_spliced_object(big: lethe.Table) -> None:
    import duckdb

    big.erase([("id", "=", 123)])
    m = lethe.Table.open(big.uri).manifest
    body = object_bytes(big, m.files[0].path)
    con = duckdb.connect()
    tbl = pq.read_table(pa.BufferReader(body))
    con.register("t", tbl)
    assert con.execute("select count(*), min(id), max(id) from t").fetchone() == (19_999, 0, 19_999)
    # old snapshots read through the splice (issue 39 item 1): without the erased row
    old = lethe.Table.open(big.uri, version=1)
    assert old.lookup(123).num_rows == 0 and old.lookup(124).num_rows == 1


def test_splice_worker_through_sqs(
    big: lethe.Table, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from devtools.local.events import LambdaContext, sqs_event

    sqs = aws.client("sqs")
    dq = sqs.create_queue(QueueName=f"d-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    sq = sqs.create_queue(QueueName=f"s-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    arn = "arn:aws:sqs:us-east-1:123456789012:q"
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")
    monkeypatch.setenv("LETHE_SPLICE_QUEUE_URL", sq)
    monkeypatch.setenv("LETHE_SPLICE_MAX_BYTES", "1")  # one row group per invocation
    from functions.delete_requests import handler as dh
    from functions.splice import handler as sh

    dh = importlib.reload(dh)
    sh = importlib.reload(sh)
    body = {
        "request_id": "gdpr-erase-1",
        "table": big.uri,
        "filters": [["id", "in", [10, 10_010, 19_990]]],
        "mode": "erase",
        "requested_at": "2026-11-22T00:00:00Z",
    }
    sqs.send_message(QueueUrl=dq, MessageBody=json.dumps(body))
    msgs = sqs.receive_message(QueueUrl=dq, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert dh.handler(sqs_event(msgs, queue_arn=arn), LambdaContext())["batchItemFailures"] == []
    invocations = 0
    while True:
        got = sqs.receive_message(QueueUrl=sq, MaxNumberOfMessages=1, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not got:
            break
        assert "10_010" not in got[0]["Body"] and "19990" not in got[0]["Body"], (
            "no keys on the splice queue"
        )
        assert sh.handler(sqs_event(got, queue_arn=arn), LambdaContext())["batchItemFailures"] == []
        sqs.delete_message(QueueUrl=sq, ReceiptHandle=got[0]["ReceiptHandle"])
        invocations += 1
    # the first job fans the erasure out into groups (here one: one file), then the group is
    # spliced one row group per invocation, the job re-enqueuing itself
    assert invocations == 1 + 3, "bounded: one row group per invocation after the fan-out"
    t = lethe.Table.open(big.uri)
    [e] = t.manifest.erasures
    assert (
        e.state == "spliced"
        and len([p for p in t.manifest.superseded_of(e) if p.startswith("data/")]) == 3
    )
    assert all(p.startswith(("data/", "manifest/segments/")) for p in t.manifest.superseded_of(e))
    check_file(big, {10, 10_010, 19_990}, 20_000)


def test_erase_reports_page_level_granularity(big: lethe.Table) -> None:
    """A row past the blob column's dictionary fallback: only its pages are rewritten (the
    small dictionary-encoded chunks whole), the rest of its group is copied."""
    f = big.manifest.files[0]
    victim = f.row_groups[0].rows + 3000
    r = big.erase([("id", "=", victim)], request_id="page-level")
    [g] = r.granularity
    assert g.path == f.path and g.level == "page", g
    assert all("dictionary-encoded pages" in why for why in g.reasons), g
    check_file(big, {victim}, 20_000)
    assert verify(lethe.Table.open(big.uri)).ok


def test_erase_counts_fallbacks_by_reason(big: lethe.Table) -> None:
    """Issue 37 item 2: a row in every chunk's first, dictionary-encoded page is spliced
    page by page (its pages re-encoded against their own dictionary; before: the groups fell
    back to the row-group splice), with no fallback to count; a splice with page level off
    counts its reason once per edited group."""
    r = big.erase([("id", "=", 5)], request_id="dict")  # in every chunk's dictionary
    [g] = r.granularity
    assert (g.level, g.reasons, g.fallbacks, r.fallbacks) == ("page", (), (), {}), g
    check_file(big, {5}, 20_000)
    t = lethe.Table.open(big.uri)
    t.delete([("id", "in", [7, 19_000])])
    [f] = t.manifest.files
    s = splice_file(t.context, f, range(len(f.row_groups)), page_level=False)
    assert s.granularity.level == "row_group"
    assert s.granularity.fallbacks == (("page level off", 2),), s.granularity
