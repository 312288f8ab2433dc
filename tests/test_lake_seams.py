"""The lake at the seams (issue 35 items 4-7): a request redelivered after a crash, the
person's values object, values that cannot fit a column, cancelling, a lagging head.

Crashes are injected from outside the library: a botocore hook on the client the lake and
its tables share (:func:`faults.on_request`) raises :class:`Died` (a ``BaseException``: no
``except Exception`` of the library catches it, as nothing runs after a killed process) at
the exact request named; the CLI is killed by a real SIGINT at a chosen request.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from faults import on_request
from pychild import run_child
from test_lake import PERSON, SECRET_ID, make_table

import lethe
from lethe import errors
from lethe.catalog.manifest import request_hash
from lethe.cli import main
from lethe.erasure.erase import process_erasures
from lethe.gc import collect
from lethe.lake.core import Lake

ROOT = Path(__file__).resolve().parents[1]
HOUR = timedelta(hours=1)
NAMES = ("orders", "events", "tickets")


class Died(BaseException):
    """The process ended here (killed): nothing after this request ran."""


def _lake(
    bucket: str, s3: Any, *, window: timedelta = HOUR, names: tuple[str, ...] = NAMES
) -> Lake:
    lake = Lake.create(f"s3://{bucket}/_lethe", erasure_window=window, s3=s3)
    for i, name in enumerate(names):
        uri = f"s3://{bucket}/tables/{name}"
        make_table(uri, files=2 + i % 2)
        lake.map_subject("customer", table=uri, column="customer_id")
    return lake


def _die_at(s3: Any, op: str, match: Any, nth: int = 1) -> Any:
    """Kill the call at the ``nth`` request ``op`` whose params satisfy ``match``."""
    seen = [0]

    def hook(name: str, params: dict[str, Any]) -> None:
        if match(params):
            seen[0] += 1
            if seen[0] == nth:
                raise Died(f"killed before {name} {params.get('Key', '')}")

    return on_request(s3, [op], hook)


def _at(bucket: str, key: str) -> Any:
    """Matches the request for object ``key`` (botocore's request dict: ``auth_path``)."""
    return lambda p: p.get("auth_path") == f"/{bucket}/{key}"


def _lake_json(lake: Lake) -> Any:
    return _at(lake.store.bucket, f"{lake.prefix}/lake.json")


def _values_delete(p: dict[str, Any]) -> bool:
    """A DeleteObjects request naming a values object (its keys are in the XML body)."""
    body = p.get("body")
    return isinstance(body, bytes) and b"/requests/" in body


def _values_versions(lake: Lake, s3: Any) -> list[str]:
    """Every version and delete marker under the lake's values prefix."""
    r = s3.list_object_versions(Bucket=lake.store.bucket, Prefix=f"{lake.prefix}/requests/")
    return [v["Key"] for v in (*r.get("Versions", []), *r.get("DeleteMarkers", []))]


def _later(lake: Lake) -> datetime:
    return datetime.now(UTC) + lake.erasure_window + timedelta(seconds=1)


# --- item 4: a redelivery after a crash is not "nothing to forget" ----------------------------
def test_seam04_redelivery_after_a_crash_past_the_table_commits_is_spliced(
    bucket: str, s3: Any
) -> None:
    """Issue 35 item 4: the process dies after every table committed the request and before
    the lake recorded it; the redelivery finds the tables' duplicates and must record their
    real row counts, so that the window run splices them and the receipt tells the truth."""
    lake = _lake(bucket, s3)
    uris = lake.tables()
    with _die_at(s3, "PutObject", _lake_json(lake), nth=2), pytest.raises(Died):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    hidden = {u: lethe.Table.open(u).erasure_status(SECRET_ID) for u in uris}
    assert {r.state for r in hidden.values()} == {"erasing"}  # every table committed it

    again = Lake.open(lake.uri, s3=s3)
    r = again.forget("customer", [PERSON], request_id=SECRET_ID)  # the redelivery
    assert r.complete
    assert [t.rows for t in again.refresh().requests[0].tables] == [hidden[u].rows for u in uris]
    assert all(t.rows for t in again.refresh().requests[0].tables)
    run = again.splice_due(now=_later(again))
    assert run.complete and {t.table for t in run.tables if t.files_spliced} == set(uris)
    receipt = again.erasure_status(SECRET_ID)
    assert receipt.state == "removed" and not receipt.done
    assert [t.state for t in receipt.tables] == ["removed"] * len(uris)
    assert all(lethe.Table.open(u).erasure_status(SECRET_ID).state == "removed" for u in uris)


def test_seam04_receipt_reads_the_table_not_a_zero_in_the_registry(bucket: str, s3: Any) -> None:
    """Issue 35 item 4: a registry that recorded rows=0 for a part the table holds an erasure
    of (written by an older release) is not "nothing to forget": the table's receipt rules,
    and the window run splices it."""
    lake = _lake(bucket, s3, names=NAMES[:1])
    lake.forget("customer", [PERSON], request_id=SECRET_ID)

    def zero(d: Any) -> Any:
        (req,) = d.requests
        parts = tuple(p.model_copy(update={"rows": 0}) for p in req.tables)
        return d.model_copy(update={"requests": (req.model_copy(update={"tables": parts}),)})

    lake._update(zero)
    assert lake.erasure_status(SECRET_ID).state == "erasing"
    run = lake.splice_due(now=_later(lake))
    assert run.files_spliced > 0
    assert lake.erasure_status(SECRET_ID).state == "removed"


CHILD = """
import os, signal, sys
import boto3
boto3.setup_default_session()
seen = [0]
def hook(model, params, **kw):
    if params.get("auth_path", "").endswith("/_lethe/lake.json"):
        seen[0] += 1
        if seen[0] == int(os.environ["LETHE_TEST_SIGINT_AT"]):
            os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, delivered here
boto3.DEFAULT_SESSION.events.register("before-call.s3.PutObject", hook)
from lethe.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _cli(*argv: str, sigint_at: int = 0) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)]),
        "LETHE_TEST_SIGINT_AT": str(sigint_at),
    }
    return run_child([sys.executable, "-c", CHILD, *argv], env=env, cwd=ROOT)


@pytest.mark.parametrize("attempt", range(3))
def test_seam04_cli_sigint_of_forget_then_resume(bucket: str, s3: Any, attempt: int) -> None:
    """Issue 35 item 4: ``lethe lake forget`` interrupted by SIGINT after the tables committed
    (at its second registry write), then ``lethe lake resume``: every table's part holds its
    real row count, the window run splices each, and the receipt says removed (run 3 times)."""
    lake = _lake(bucket, s3, names=NAMES[:2])
    uris = lake.tables()
    killed = _cli(
        "lake", "forget", lake.uri, "customer", str(PERSON), "--request-id", SECRET_ID, sigint_at=2
    )
    assert killed.returncode != 0 and "KeyboardInterrupt" in killed.stderr, killed.stderr[-2000:]
    assert {lethe.Table.open(u).erasure_status(SECRET_ID).state for u in uris} == {"erasing"}
    assert lake.refresh().requests[0].pending  # the lake never recorded the commits
    resumed = _cli("lake", "resume", lake.uri)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "1 pending request(s) resumed" in resumed.stdout
    assert all(p.rows for p in lake.refresh().requests[0].tables)
    run = lake.splice_due(now=_later(lake))
    assert run.complete and all(t.files_spliced for t in run.tables)
    assert [t.state for t in lake.erasure_status(SECRET_ID).tables] == ["removed"] * 2


# --- item 5: the values object leaves with the request ----------------------------------------
def _versioned(s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def _values_put(p: dict[str, Any]) -> bool:
    return "/requests/" in p.get("auth_path", "")


@pytest.mark.parametrize(
    ("at", "nth"),
    [("registry", 1), ("values", 1), ("registry", 2)],
    ids=["before-recording", "before-its-values", "before-marking-committed"],
)
def test_seam05_double_delivery_leaves_no_values_object(
    bucket: str, s3: Any, at: str, nth: int
) -> None:
    """Issue 35 item 5: one request delivered twice at once: the second delivery runs whole
    while the first is about to record it, to write its values, or to mark the tables
    committed. No values object outlives the request, in any version, the receipt lists the
    values object as gone, and ``resume`` finds nothing to do."""
    _versioned(s3, bucket)
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:2])
    twin = Lake.open(lake.uri, s3=s3)
    match = _lake_json(lake) if at == "registry" else _values_put
    seen: list[str] = []

    def second_delivery(op: str, params: dict[str, Any]) -> None:
        if match(params):
            seen.append(op)
            if len(seen) == nth:
                assert twin.forget("customer", [PERSON], request_id=SECRET_ID).complete

    with on_request(s3, ["PutObject"], second_delivery):
        first = lake.forget("customer", [PERSON], request_id=SECRET_ID)
    assert len(seen) >= nth and first.complete
    assert _values_versions(lake, s3) == []
    receipt = lake.erasure_status(SECRET_ID)
    assert [(c.kind, c.present) for c in receipt.copies] == [("values", False)]
    assert [t.state for t in receipt.tables] == ["removed", "removed"]
    assert lake.resume() == 0


def test_seam05_killed_before_the_values_delete_is_finished_by_resume(bucket: str, s3: Any) -> None:
    """Issue 35 item 5: a call killed after the lake recorded every commit and before it
    deleted the values object: the receipt lists the object as present and says neither
    complete nor done, even after GC; ``resume`` deletes every version of it."""
    _versioned(s3, bucket)
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:1])
    with _die_at(s3, "DeleteObjects", _values_delete), pytest.raises(Died):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    assert _values_versions(lake, s3) != []
    (uri,) = lake.tables()
    t = lethe.Table.open(uri)  # the splice worker's way (the lake's window run would sweep)
    assert process_erasures(t.context, [request_hash(SECRET_ID)])[0]
    collect(uri, retention="1v", grace="7d", erasure_grace="0s")
    receipt = lake.erasure_status(SECRET_ID)
    assert [(c.kind, c.present) for c in receipt.copies] == [("values", True)]
    assert receipt.state != "complete" and not receipt.done
    assert "values" in receipt.describe() and "present" in receipt.describe()
    assert lake.erasures(pending=True) != []

    Lake.open(lake.uri, s3=s3).resume()
    assert _values_versions(lake, s3) == []
    receipt = lake.erasure_status(SECRET_ID)
    assert [(c.kind, c.present) for c in receipt.copies] == [("values", False)]
    assert receipt.state == "complete" and receipt.done


def test_seam05_the_window_run_removes_values_of_finished_requests(bucket: str, s3: Any) -> None:
    """Issue 35 item 5: the scheduled window run deletes values objects no pending request
    needs (what ``sweep_values`` alone did, never scheduled)."""
    lake = _lake(bucket, s3, names=NAMES[:1])
    with _die_at(s3, "DeleteObjects", _values_delete), pytest.raises(Died):
        lake.forget("customer", [PERSON], request_id=SECRET_ID, mode="logical")
    assert _values_versions(lake, s3) != []
    run = lake.splice_due(now=_later(lake))
    assert run.values_deleted == 1 and _values_versions(lake, s3) == []


# --- item 6: values that fit, cancelling, resume that says when it failed -------------------
def test_seam06_a_value_that_fits_no_column_is_refused_before_recording(
    bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 6: ``customer Zq-abc`` for an int column is refused with the reason, exit
    2 from the CLI, and nothing is recorded (no request, no values object). The value holds
    capitals: a random bucket name in the message (lowercase hex) cannot contain it (a run
    failed when the bucket was b-93dabcaa1485 and the value was ``abc``)."""
    lake = _lake(bucket, s3, names=NAMES[:2])
    bad = "Zq-abc"
    with pytest.raises(errors.InvalidRequest, match="customer_id") as e:
        lake.forget("customer", [bad], request_id="bad-1")
    assert bad not in str(e.value)
    assert main(["lake", "forget", lake.uri, "customer", bad, "--request-id", "bad-2"]) == 2
    err = capsys.readouterr().err
    assert "InvalidRequest" in err and "customer_id" in err and bad not in err
    assert lake.refresh().requests == () and _values_versions(lake, s3) == []
    assert lake.forget("customer", [PERSON], request_id="good").complete  # ints still fit


def test_seam06_a_column_that_cannot_hold_a_pending_requests_values_is_not_mapped(
    bucket: str, s3: Any
) -> None:
    """Issue 35 item 6: mapping a subject kind to a column its pending request's values do not
    fit is refused with the reason (the request would fail there on every resume)."""
    lake = _lake(bucket, s3, names=NAMES[:2])
    uris = lake.tables()
    with _fail_table(s3, uris[1]), pytest.raises(errors.RequestIncomplete):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    with pytest.raises(errors.InvalidRequest, match=r"'email'.*cancel it first"):
        lake.map_subject("customer", table=uris[0], column="email")  # a string column
    assert ("customer", "email") not in {(m.kind, m.column) for m in lake.subjects()}
    assert lake.resume_requests().ok  # the request finishes where it belongs
    lake.map_subject("customer", table=uris[0], column="id")  # int: fits, nothing pending


def _fail_table(s3: Any, uri: str) -> Any:
    """Every commit of the table at ``uri`` fails (its manifest PUTs are refused)."""
    prefix = "/" + uri.split("/", 2)[2] + "/manifest/"

    def hook(op: str, params: dict[str, Any]) -> None:
        if params.get("auth_path", "").startswith(prefix):
            raise errors.AccessDenied("injected: the table refuses commits")

    return on_request(s3, ["PutObject"], hook)


def test_seam06_cancel_a_pending_request(
    bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 6: a request one table cannot take is cancelled with a reason; its
    receipt says cancelled and why, its values object is gone, resume leaves it alone."""
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:2])
    uris = lake.tables()
    with _fail_table(s3, uris[1]), pytest.raises(errors.RequestIncomplete):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    assert _values_versions(lake, s3) != []
    with pytest.raises(errors.InvalidRequest, match="reason"):
        lake.cancel(SECRET_ID, reason="")
    with pytest.raises(errors.InvalidRequest, match="must not name"):
        lake.cancel(SECRET_ID, reason=f"customer {PERSON} asked twice")
    receipt = lake.cancel(SECRET_ID, reason="ticket 88: sent to the wrong lake")
    assert (
        receipt.state == "cancelled"
        and receipt.cancel_reason == "ticket 88: sent to the wrong lake"
    )
    assert [t.state for t in receipt.tables] == ["removed", "cancelled"]
    assert _values_versions(lake, s3) == []
    assert lake.resume() == 0
    assert "cancelled" in lake.erasure_status(SECRET_ID).describe()
    assert lethe.Table.open(uris[1]).scan(filters=[("customer_id", "=", PERSON)]).num_rows > 0
    with pytest.raises(errors.InvalidRequest, match="cancelled"):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    # the CLI: a second request, cancelled there
    with _fail_table(s3, uris[1]), pytest.raises(errors.RequestIncomplete):
        lake.forget("customer", [1001], request_id="r2")
    capsys.readouterr()
    assert main(["lake", "cancel", lake.uri, "--request-id", "r2", "--reason", "duplicate"]) == 0
    out = capsys.readouterr().out
    assert "cancelled" in out and "duplicate" in out
    assert main(["lake", "cancel", lake.uri, "--request-id", "nope", "--reason", "x"]) == 2


def test_seam06_resume_that_fails_again_exits_nonzero(
    bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 6: ``lethe lake resume`` whose request fails again says so and exits
    nonzero (not "1 pending request(s) resumed", exit 0)."""
    lake = _lake(bucket, s3, names=NAMES[:2])
    uris = lake.tables()
    with _fail_table(s3, uris[1]), pytest.raises(errors.RequestIncomplete):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)
    head = f"{uris[1].split('/', 3)[3]}/_latest_manifest"
    body = s3.get_object(Bucket=bucket, Key=head)["Body"].read()
    s3.delete_object(Bucket=bucket, Key=head)  # the table is gone for now
    capsys.readouterr()
    assert main(["lake", "resume", lake.uri]) == 1
    captured = capsys.readouterr()
    assert "TableNotFound" in captured.err and "lethe lake cancel" in captured.err
    assert "resumed" not in captured.out
    s3.put_object(Bucket=bucket, Key=head, Body=body)
    assert main(["lake", "resume", lake.uri]) == 0
    assert "1 pending request(s) resumed" in capsys.readouterr().out


# --- item 7: a lagging head, one table's trouble ----------------------------------------------
def test_seam07_a_lagging_head_does_not_stop_the_window(bucket: str, s3: Any) -> None:
    """Issue 35 item 7: the window run dies between a splice's manifest PUT and its head PUT
    on the first table; the next run rolls that head forward and splices every table."""
    lake = _lake(bucket, s3, names=NAMES[:2])
    uris = lake.tables()
    lake.forget("customer", [PERSON], request_id=SECRET_ID)
    head = f"{uris[0].split('/', 3)[3]}/_latest_manifest"
    with _die_at(s3, "PutObject", _at(bucket, head)), pytest.raises(Died):
        lake.splice_due(now=_later(lake))
    run = Lake.open(lake.uri, s3=s3).splice_due(now=_later(lake))
    assert run.complete and [t.error for t in run.tables] == [None, None]
    assert [t.state for t in lake.erasure_status(SECRET_ID).tables] == ["removed"] * 2
    assert all(t.files_spliced for t in run.tables[1:])


def test_seam07_one_tables_trouble_does_not_stop_the_others(
    bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 7: a table whose splice fails is reported (per table, with the reason)
    and the run goes on to the next; ``lethe lake window`` exits nonzero at the end."""
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:2])  # due at once
    uris = lake.tables()
    lake.forget("customer", [PERSON], request_id=SECRET_ID, splice=False)
    with _fail_table(s3, uris[0]):
        run = lake.splice_due(now=_later(lake))
    assert not run.complete
    first, second = run.tables
    assert first.error is not None and "AccessDenied" in first.error and not first.complete
    assert second.error is None and second.complete and second.files_spliced > 0
    assert [t.state for t in lake.erasure_status(SECRET_ID).tables] == ["erasing", "removed"]
    # the CLI: the first table's head vanished (a table deleted behind the lake's back)
    lake.forget("customer", [1001], request_id="r2", splice=False)
    s3.delete_object(Bucket=bucket, Key=f"{uris[0].split('/', 3)[3]}/_latest_manifest")
    capsys.readouterr()
    code = main(["lake", "window", lake.uri])
    captured = capsys.readouterr()
    assert code == 1, captured
    assert uris[1] in captured.out and "failed" in captured.err and uris[0] in captured.err
    assert lethe.Table.open(uris[1]).erasure_status("r2").state == "removed"


# --- items 4 and 5 together: a kill at every write of a forget --------------------------------
def test_seam04_05_a_kill_at_any_write_then_redelivery_tells_the_truth(
    bucket: str, s3: Any
) -> None:
    """Issue 35 items 4 and 5: the call is killed at each write of ``forget`` in turn (the
    registry, the values, every table's objects and heads), then the request is delivered
    again and the window runs: every table holds the rows' erasure with its real count, the
    receipt says removed in every table, no scan finds the person, and no values object is
    left in any version."""
    kills = 0
    for n in range(1, 60):
        lake = Lake.create(f"s3://{bucket}/_lake{n}", erasure_window=HOUR, s3=s3)
        uris = [f"s3://{bucket}/k{n}/{name}" for name in NAMES[:2]]
        for uri in uris:
            make_table(uri, files=1)
            lake.map_subject("customer", table=uri, column="customer_id")
        try:
            with _die_at(s3, "PutObject", lambda p: True, nth=n):
                lake.forget("customer", [PERSON], request_id=SECRET_ID)
        except Died:
            kills += 1
            Lake.open(lake.uri, s3=s3).forget("customer", [PERSON], request_id=SECRET_ID)
        else:
            break  # the n-th write is past the end of the call: every point was tried
        run = lake.splice_due(now=_later(lake))
        assert run.complete, n  # no table failed, nothing left
        receipt = lake.erasure_status(SECRET_ID)
        assert [t.state for t in receipt.tables] == ["removed"] * 2, (n, receipt.describe())
        assert all(t.rows for t in receipt.tables), n
        assert _values_versions(lake, s3) == [], n
        assert [c.present for c in receipt.copies] == [False], n
        for uri in uris:
            scan = lethe.Table.open(uri).scan(filters=[("customer_id", "=", PERSON)])
            assert scan.num_rows == 0, n
    # the registry twice, the values, and each table's DV, manifest and head (9: the index
    # pieces and their superseded list are written by the splices' commit, issue 37 item 3)
    assert kills >= 9


def test_seam07_a_lagging_head_does_not_stop_a_redelivered_forget(bucket: str, s3: Any) -> None:
    """Issue 35 item 7: a forget that splices at once (window 0) dies between its splice's
    manifest PUT and head PUT on the first table; the redelivery rolls that head forward and
    finishes, splicing the other table too."""
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:2])
    uris = lake.tables()
    head = f"{uris[0].split('/', 3)[3]}/_latest_manifest"
    with _die_at(s3, "PutObject", _at(bucket, head), nth=2), pytest.raises(Died):
        lake.forget("customer", [PERSON], request_id=SECRET_ID)  # delete commit, then splice
    r = Lake.open(lake.uri, s3=s3).forget("customer", [PERSON], request_id=SECRET_ID)
    assert r.complete and all(t.spliced for t in r.tables)
    assert [t.state for t in lake.erasure_status(SECRET_ID).tables] == ["removed"] * 2


# --- new1: rows a plain delete hid are still the person's bytes -------------------------------
def _bytes_of(s3: Any, bucket: str, value: int) -> tuple[str, ...]:
    """Every object version in ``bucket`` holding ``value`` (raw bytes, decoded pages and
    columns, index pieces, decimal text): the byte audit of devtools/audit.py."""
    from devtools.audit import Needle, audit_bucket

    needle = Needle((struct.pack("<q", value),), (value,), (("customer_id", value),))
    return audit_bucket(s3, bucket, {"p": needle}).found("p")


def _before(t: lethe.Table, how: str) -> None:
    """The person's rows leave the live files of ``t`` (``delete``: only hidden by a DV)."""
    if how == "erase":
        assert t.erase([("customer_id", "=", PERSON)], request_id="table-erase").complete
        return
    assert t.delete([("customer_id", "=", PERSON)]).rows_deleted > 0
    if how == "purge":
        assert t.purge(request_id="purge").complete
    elif how == "compact":
        assert t.compact().version is not None


@pytest.mark.parametrize(
    ("how", "window"),
    [
        ("delete", timedelta(0)),
        ("delete", HOUR),
        ("erase", HOUR),
        ("purge", HOUR),
        ("compact", timedelta(0)),
    ],
)
def test_seam_new1_lake_forget_of_rows_that_left_the_live_files_waits_for_their_copies(
    bucket: str, s3: Any, how: str, window: timedelta
) -> None:
    """Issue 35, new1 (found by the seams state machine): the person's rows left a table's
    live files before the lake forget (a table erase or purge spliced them out, a compaction
    dropped the rows a delete hid), and their copies wait for GC in the superseded files.
    The forget matched 0 live rows, its receipt said ``complete`` ("nothing to forget") at
    once, and every superseded file still held the person. It must say complete only once
    GC removed them and the byte audit finds nothing. Rows a delete only hid are still in
    a live file: the forget splices them (``delete``)."""
    lake = _lake(bucket, s3, window=window, names=NAMES[:2])
    uris = lake.tables()
    _before(lethe.Table.open(uris[0], s3=s3), how)
    lake.forget("customer", [PERSON], request_id=SECRET_ID)
    if window:
        lake.splice_due(now=_later(lake))
    receipt = lake.erasure_status(SECRET_ID)
    assert [t.state for t in receipt.tables] == ["removed"] * 2, receipt.describe()
    assert receipt.state == "removed" and not receipt.done
    assert _bytes_of(s3, bucket, PERSON) != ()  # what GC has yet to delete
    assert (
        lethe.Table.open(uris[0], s3=s3).scan(filters=[("customer_id", "=", PERSON)]).num_rows == 0
    )
    for uri in uris:
        collect(uri, retention="1v", erasure_grace="0s", now=_later(lake) + HOUR, s3=s3)
    receipt = lake.erasure_status(SECRET_ID)
    assert receipt.state == "complete" and receipt.done, receipt.describe()
    assert _bytes_of(s3, bucket, PERSON) == ()


def test_seam_new1_erase_of_a_value_no_table_ever_held_commits_nothing(
    bucket: str, s3: Any
) -> None:
    """Issue 35, new1: a table whose every data object is live (only appends) cannot hold a
    value its live files do not: a forget there is "nothing to forget" and commits nothing."""
    lake = _lake(bucket, s3, window=timedelta(0), names=NAMES[:1])
    (uri,) = lake.tables()
    v = lethe.Table.open(uri, s3=s3).version
    lake.forget("customer", [424242], request_id=SECRET_ID)
    receipt = lake.erasure_status(SECRET_ID)
    assert [t.state for t in receipt.tables] == ["nothing to forget"]
    assert receipt.state == "complete" and lethe.Table.open(uri, s3=s3).version == v
