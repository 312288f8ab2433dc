"""The lake (issue 29): one customer in three tables, one request, one receipt."""

from __future__ import annotations

import io
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faults import crash_in

import lethe
import lethe.lake.forget as forgetting
from lethe import errors
from lethe.gc import collect
from lethe.lake.core import Lake
from lethe.storage.store import parse_s3_uri

SECRET_ID = "gdpr-secret-7c1e"
PERSON = 7919  # the customer to forget: in every table, in several files of each
GRACE = "60s"  # commits must land within a third of it: a short one races a loaded machine

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int64()),
        ("email", pa.string()),
        ("note", pa.string()),
    ]
)


def rows(start: int, n: int, *, customers: list[int]) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    cust = np.array([customers[i % len(customers)] for i in range(n)], dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "customer_id": cust,
            "email": [f"c{c}@example.com" for c in cust.tolist()],
            "note": [f"note-{i}" for i in ids.tolist()],
        },
        schema=SCHEMA,
    )


CUSTOMERS = [PERSON, *range(1000, 1019)]  # 20 customers, PERSON one of them


def make_table(uri: str, *, files: int = 3, n: int = 200) -> lethe.Table:
    t = lethe.Table.create(uri, SCHEMA, key="id", gc_grace=GRACE, row_group_bytes=1 << 10)
    for f in range(files):
        t.append(rows(f * n + hash(uri) % 7 * 10_000, n, customers=CUSTOMERS))
    return t


@pytest.fixture
def lake3(bucket: str) -> tuple[Lake, list[str]]:
    lake = Lake.create(f"s3://{bucket}/_lethe", erasure_window=timedelta(0))
    uris = [f"s3://{bucket}/tables/{name}" for name in ("orders", "events", "tickets")]
    for i, uri in enumerate(uris):
        make_table(uri, files=2 + i)
        lake.add_table(uri)
        lake.map_subject("customer", table=uri, column="customer_id")
    return lake, uris


def held(uri: str, s3: Any, value: int) -> int:
    """Rows with ``customer_id == value`` in every Parquet object under the table's prefix
    (live or not, data files and index pieces alike): what is physically stored."""
    bucket, prefix = parse_s3_uri(uri)
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            if not o["Key"].endswith(".parquet"):
                continue
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            names = pq.read_schema(io.BytesIO(body)).names
            column = "customer_id" if "customer_id" in names else "value"
            if column not in names:
                continue
            col = pq.read_table(io.BytesIO(body), columns=[column]).column(0)
            n += int(np.sum(col.to_numpy(zero_copy_only=False) == value))
    return n


def scalars(doc: Any) -> list[Any]:
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in scalars(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in scalars(v)]
    return [doc]


def lake_doc(lake: Lake, s3: Any) -> tuple[str, Any]:
    body = s3.get_object(Bucket=lake.store.bucket, Key=f"{lake.prefix}/lake.json")["Body"].read()
    return body.decode(), json.loads(body)


def no_personal_value(text: str, doc: Any = None) -> None:
    assert SECRET_ID not in text
    assert not re.search(rf"\b{PERSON}\b", text)
    if doc is not None:
        assert PERSON not in scalars(doc) and str(PERSON) not in scalars(doc)


def values_objects(lake: Lake, s3: Any) -> list[str]:
    r = s3.list_objects_v2(Bucket=lake.store.bucket, Prefix=f"{lake.prefix}/requests/")
    return [o["Key"] for o in r.get("Contents", [])]


def test_registry_tables_and_subjects(lake3: tuple[Lake, list[str]], bucket: str) -> None:
    lake, uris = lake3
    again = Lake.open(lake.uri)
    assert again.tables() == tuple(uris)
    assert {(s.kind, s.table, s.column) for s in again.subjects()} == {
        ("customer", u, "customer_id") for u in uris
    }
    # mapping created the index; mapping twice changes nothing
    assert all("customer_id" in lethe.Table.open(u).indexes for u in uris)
    before = again.refresh()
    assert again.map_subject("customer", table=uris[0], column="customer_id") == 0
    assert again.refresh() == before
    with pytest.raises(errors.LakeExists):
        Lake.create(lake.uri)
    with pytest.raises(errors.LakeNotFound):
        Lake.open(f"s3://{bucket}/nowhere")
    with pytest.raises(errors.TableNotFound):
        lake.add_table(f"s3://{bucket}/tables/missing")
    with pytest.raises(errors.InvalidRequest, match="no column"):
        lake.map_subject("customer", table=uris[0], column="nope")


def test_concurrent_registry_updates_all_land(bucket: str) -> None:
    Lake.create(f"s3://{bucket}/_lethe")
    uris = [f"s3://{bucket}/tables/t{i}" for i in range(6)]
    for u in uris:
        lethe.Table.create(u, SCHEMA, key="id")
    handles = [Lake.open(f"s3://{bucket}/_lethe") for _ in uris]  # each with a stale view
    threads = [
        threading.Thread(target=h.add_table, args=(u,)) for h, u in zip(handles, uris, strict=True)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert set(Lake.open(f"s3://{bucket}/_lethe").tables()) == set(uris)


def test_one_customer_three_tables_one_request_one_receipt(
    lake3: tuple[Lake, list[str]], s3: Any, caplog: pytest.LogCaptureFixture
) -> None:
    lake, uris = lake3
    before = {u: held(u, s3, PERSON) for u in uris}
    assert all(n > 0 for n in before.values())
    with caplog.at_level("DEBUG", logger="lethe"):
        r = lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="erase")
        receipt = lake.erasure_status(SECRET_ID)
    assert r.complete and not r.duplicate and r.values == 1
    assert {t.table for t in r.tables} == set(uris)
    assert all(t.rows_deleted > 0 and t.spliced and t.files_spliced > 0 for t in r.tables)
    for u in uris:
        t = lethe.Table.open(u)
        assert t.scan(filters=[("customer_id", "=", PERSON)]).num_rows == 0
        assert t.scan(filters=[("customer_id", "=", 1000)]).num_rows > 0
    assert receipt.state == "removed" and not receipt.done
    assert [t.state for t in receipt.tables] == ["removed"] * 3
    assert values_objects(lake, s3) == []  # the values left the lake once every table had them

    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    receipt = lake.erasure_status(SECRET_ID)
    assert receipt.state == "complete" and receipt.done
    assert all(t.gc_run and t.done and t.files_spliced > 0 for t in receipt.tables)
    assert {u: held(u, s3, PERSON) for u in uris} == dict.fromkeys(uris, 0)
    assert all(held(u, s3, 1000) > 0 for u in uris)

    text, doc = lake_doc(lake, s3)
    no_personal_value(text, doc)
    no_personal_value(receipt.model_dump_json() + receipt.describe())
    no_personal_value(caplog.text)
    for rec in caplog.records:
        assert PERSON not in (rec.args if isinstance(rec.args, tuple) else ())
    assert "complete" in receipt.describe()


def test_forget_twice_applies_once(lake3: tuple[Lake, list[str]]) -> None:
    lake, uris = lake3
    first = lake.forget("customer", [PERSON, 1001], request_id=SECRET_ID, mode="logical")
    versions = {u: lethe.Table.open(u).version for u in uris}
    again = lake.forget("customer", [1001, PERSON], request_id=SECRET_ID, mode="logical")
    assert first.complete and again.complete and again.duplicate
    assert again.rows_deleted == 0 and first.rows_deleted > 0
    assert {u: lethe.Table.open(u).version for u in uris} == versions  # nothing committed
    receipt = lake.erasure_status(SECRET_ID)
    assert receipt.state == "hidden" and receipt.done and receipt.values == 2
    with pytest.raises(errors.RequestIdConflict):
        lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")
    with pytest.raises(errors.RequestIdConflict):
        lake.forget("customer", [PERSON, 1001], request_id=SECRET_ID, mode="erase")
    with pytest.raises(errors.InvalidRequest, match="maps subject kind"):
        lake.forget("supplier", [1], request_id="other")
    with pytest.raises(errors.InvalidRequest):
        lake.erasure_status("never-sent")


def _fail_on(monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    """The table at ``uri`` refuses every commit (as S3 would, throttled or denied)."""
    real = lethe.Table.delete_batch

    def delete_batch(self: lethe.Table, *a: Any, **kw: Any) -> Any:
        if self.uri == uri:
            raise errors.Throttled("simulated outage")
        return real(self, *a, **kw)

    monkeypatch.setattr(lethe.Table, "delete_batch", delete_batch)


def _forget_with_a_table_down(
    monkeypatch: pytest.MonkeyPatch, lake: Lake, uri: str, mode: str = "logical"
) -> None:
    """Forget PERSON while the table at ``uri`` refuses every commit: recorded, 1 of 3 not done."""
    with monkeypatch.context() as m:
        _fail_on(m, uri)
        with pytest.raises(errors.RequestIncomplete, match="1 of 3"):
            lake.forget("customer", [PERSON], request_id=SECRET_ID, mode=mode)


def test_crash_after_recording_is_finished_by_resume(
    lake3: tuple[Lake, list[str]], s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, uris = lake3
    _forget_with_a_table_down(monkeypatch, lake, uris[1], mode="erase")
    receipt = lake.erasure_status(SECRET_ID)
    assert receipt.state == "recorded" and not receipt.done
    assert [t.state for t in receipt.tables] == ["removed", "pending", "removed"]
    assert len(values_objects(lake, s3)) == 1  # kept while a table still needs them
    assert lethe.Table.open(uris[1]).scan(filters=[("customer_id", "=", PERSON)]).num_rows > 0

    versions = {u: lethe.Table.open(u).version for u in uris}
    assert Lake.open(lake.uri).resume() == 1
    assert values_objects(lake, s3) == []
    after = {u: lethe.Table.open(u).version for u in uris}
    assert after[uris[0]] == versions[uris[0]] and after[uris[2]] == versions[uris[2]]
    assert after[uris[1]] > versions[uris[1]]
    receipt = lake.erasure_status(SECRET_ID)
    assert [t.state for t in receipt.tables] == ["removed"] * 3
    assert lake.resume() == 0


def test_crash_before_any_table_then_redelivery(
    lake3: tuple[Lake, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, uris = lake3

    with crash_in(monkeypatch, forgetting, "_apply"):
        lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")
    assert lake.erasure_status(SECRET_ID).state == "recorded"
    versions = {u: lethe.Table.open(u).version for u in uris}
    r = lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")  # redelivery
    assert r.complete and not r.duplicate
    assert {u: lethe.Table.open(u).version for u in uris} == {u: v + 1 for u, v in versions.items()}
    assert lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical").duplicate


def test_a_table_mapped_later_gets_the_pending_request(
    lake3: tuple[Lake, list[str]], bucket: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, uris = lake3
    with monkeypatch.context() as m:
        _fail_on(m, uris[0])
        with pytest.raises(errors.RequestIncomplete):
            lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")
        late = f"s3://{bucket}/tables/invoices"
        make_table(late, files=1)
        # mapped while the request is pending: it joins the request and is applied at once
        assert lake.map_subject("customer", table=late, column="customer_id") == 0
    receipt = lake.erasure_status(SECRET_ID)
    states = {t.table: t.state for t in receipt.tables}
    assert states[late] == "hidden" and states[uris[0]] == "pending"
    assert lethe.Table.open(late).scan(filters=[("customer_id", "=", PERSON)]).num_rows == 0
    lake.resume()
    assert lake.erasure_status(SECRET_ID).done

    # a second identifier of the same subject kind on a table that committed part 0 already
    lake.forget("customer", [1002], request_id="req-2", mode="logical")
    later = f"s3://{bucket}/tables/late2"
    make_table(later, files=1)
    assert lake.map_subject("customer", table=later, column="customer_id") == 2  # not re-applied
    assert lethe.Table.open(later).scan(filters=[("customer_id", "=", PERSON)]).num_rows > 0
    assert {t.table for t in lake.erasure_status("req-2").tables} == {*uris, late}


def test_new_column_on_a_committed_table_becomes_a_second_part(
    lake3: tuple[Lake, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, uris = lake3
    _forget_with_a_table_down(monkeypatch, lake, uris[2])
    # the request is pending (tickets failed); orders committed it already
    lake.map_subject("customer", table=uris[0], column="id")  # a second identifier column
    lake.resume()
    receipt = lake.erasure_status(SECRET_ID)
    orders = [t for t in receipt.tables if t.table == uris[0]]
    assert [(t.part, t.columns) for t in orders] == [(0, ("customer_id",)), (1, ("id",))]
    assert receipt.done


def test_erasures_pending_and_overdue(lake3: tuple[Lake, list[str]]) -> None:
    lake, uris = lake3
    old = datetime.now(UTC) - timedelta(days=40)
    lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="erase", requested_at=old)
    lake.forget("customer", [1003], request_id="fresh", mode="logical")
    assert [r.mode for r in lake.erasures()] == ["erase", "logical"]
    pending = lake.erasures(pending=True)
    assert [r.mode for r in pending] == ["erase"] and pending[0].age_days() > 39
    assert [r.mode for r in lake.erasures(older_than=timedelta(days=25))] == ["erase"]
    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    assert lake.erasures(pending=True) == []


def test_cli_lake_story(bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from lethe.cli import main

    lake = f"s3://{bucket}/_lethe"
    uris = [f"s3://{bucket}/tables/{name}" for name in ("orders", "events", "tickets")]
    assert main(["lake", "create", lake, "--erasure-window", "0s"]) == 0
    for u in uris:
        make_table(u, files=2)
        assert main(["lake", "add", lake, u]) == 0
        assert main(["lake", "map", lake, "customer", u, "customer_id"]) == 0
    capsys.readouterr()
    assert main(["lake", "tables", lake]) == 0
    assert capsys.readouterr().out.split() == uris
    assert main(["lake", "subjects", lake]) == 0
    assert capsys.readouterr().out.count("customer: ") == 3
    argv = ["lake", "forget", lake, "customer", str(PERSON), "--request-id", SECRET_ID]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "in 3 table(s)" in out and "spliced" in out
    no_personal_value(out)
    # received just now, spliced, GC not run: pending, and overdue past a 0s deadline
    assert main(["lake", "erasures", lake, "--pending", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["state"] == "removed" and doc["done"] is False and doc["values"] == 1
    no_personal_value(json.dumps(doc), doc)
    assert main(["lake", "erasures", lake, "--older-than", "0s"]) == 1
    assert main(["lake", "erasures", lake, "--older-than", "25d"]) == 0
    capsys.readouterr()
    for u in uris:
        collect(u, retention="1v", grace="7d", erasure_grace="0s")
    assert main(["lake", "erasures", lake, "--older-than", "0s"]) == 0
    capsys.readouterr()
    assert main(["lake", "erasures", lake, "--request-id", SECRET_ID]) == 0
    out = capsys.readouterr().out
    assert ": complete (done)" in out and out.count("GC run") == 3
    no_personal_value(out)
    assert main(["lake", "forget", lake, "customer", str(PERSON), "--request-id", SECRET_ID]) == 0
    assert "already committed" in capsys.readouterr().out


def test_values_left_by_a_crash_before_recording_are_swept(
    lake3: tuple[Lake, list[str]], s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, _ = lake3

    with crash_in(monkeypatch, forgetting, "_record"):
        lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")
    # the values are written only once a recorded request names their object (issue 35
    # item 5): a crash before recording leaves none
    assert values_objects(lake, s3) == [] and lake.refresh().requests == ()
    # an object no request names (an older release wrote the values first) is swept
    orphan = f"{lake.prefix}/requests/0123456789abcdef.json"
    s3.put_object(Bucket=lake.store.bucket, Key=orphan, Body=b"{}")
    assert lake.sweep_values() == 0  # young: a call of that release may still record it
    assert lake.sweep_values(older_than=timedelta(0)) == 1
    assert values_objects(lake, s3) == []
    # the redelivery records and applies it as if nothing had happened
    assert lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical").complete
    assert values_objects(lake, s3) == []


def test_a_batch_of_subjects_commits_a_few_times_per_table(
    lake3: tuple[Lake, list[str]], s3: Any
) -> None:
    from lethe.lake import ForgetRequest

    lake, uris = lake3
    people = CUSTOMERS[:12]
    versions = {u: lethe.Table.open(u).version for u in uris}
    results = lake.forget_batch(
        [ForgetRequest("customer", [p], f"batch-{p}", "erase") for p in people]
    )
    assert all(r.complete for r in results)
    after = {u: lethe.Table.open(u).version for u in uris}
    # one delete commit for the 12 requests, one splice commit for every file they share
    assert {u: after[u] - versions[u] for u in uris} == dict.fromkeys(uris, 2)
    for u in uris:
        assert lethe.Table.open(u).scan(filters=[("customer_id", "in", people)]).num_rows == 0
        assert lethe.Table.open(u).scan().num_rows > 0
    receipts = lake.erasures()
    assert len(receipts) == 12 and all(r.state == "removed" for r in receipts)
