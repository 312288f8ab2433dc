"""Erasure receipts (issue 16): every path a request takes, told from storage alone."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
from lethe.catalog.manifest import request_hash
from lethe.erasure import erase as erase_mod
from lethe.gc import collect

GRACE = "2s"


def table(uri: str) -> lethe.Table:
    t = lethe.Table.create(uri, EVENTS, key="id", gc_grace=GRACE, row_group_bytes=1 << 10)
    t.append(events(0, 300))
    t.append(events(300, 300))
    return t


def no_secret(receipt: lethe.ErasureReceipt, *secrets: str) -> None:
    """Neither the raw request id nor a key value is in the receipt, in any form."""
    for text in (receipt.model_dump_json(), receipt.describe(), repr(receipt)):
        for s in secrets:
            assert s not in text


def test_unknown_request(table_uri: str) -> None:
    t = table(table_uri)
    r = t.erasure_status("never-sent")
    assert r.state == "unknown" and r.id_hash == request_hash("never-sent")
    assert r.hidden_version is None and not r.evidence


def test_logical_delete_only(table_uri: str) -> None:
    t = table(table_uri)
    res = t.delete([("id", "=", 4711 % 600)], request_id="ticket-secret-1")
    r = t.erasure_status("ticket-secret-1")
    assert r.state == "hidden" and not r.erasure
    assert r.hidden_version == res.version and r.rows == 1
    assert r.hidden_at is not None and r.received_at is not None
    assert not r.splices and r.completed_at is None
    assert "not requested" in r.describe()
    no_secret(r, "ticket-secret-1")
    # the row is still in the file (hidden, not removed): the audit says so
    audited = t.erasure_status("ticket-secret-1", audit_values=[4711 % 600])
    assert audited.audit is not None and not audited.audit.clean
    assert audited.audit.values == 1 and audited.audit.objects_scanned >= 2


def test_erase_removed_then_gc_dry_run_then_real_run(table_uri: str, s3: Any) -> None:
    t = table(table_uri)
    secret = "erase-request-8d1f"
    res = t.erase([("id", "=", 42)], request_id=secret)
    r = t.erasure_status(secret)
    assert r.state == "removed" and r.erasure
    assert r.removed_version == res.version and r.removed_at is not None
    (s,) = r.splices
    assert s.version == res.version and s.file.startswith("data/")
    old = s.file
    assert {e.path for e in r.evidence if e.present} >= {old}
    assert any(e.kind == "manifest" for e in r.evidence)
    no_secret(r, secret)

    dry = collect(table_uri, retention="1v", grace="7d", erasure_grace="0s", dry_run=True)
    assert dry.erasures[0].complete
    r = t.erasure_status(secret)
    assert r.state == "removed" and r.completed_at is None  # a dry run writes nothing
    assert all(e.deleted_at is None for e in r.evidence)

    keep = collect(table_uri, retention="30d", grace="7d", erasure_grace="1h")
    r = t.erasure_status(secret)
    assert r.state == "removed" and any("before the splice" in b for b in r.blocking)
    assert keep.run_id in r.blocking[-1]

    real = collect(table_uri, retention="1v", grace="7d", erasure_grace="0s")
    r = t.erasure_status(secret, audit_values=[42])
    assert r.state == "complete" and r.complete
    assert r.completed_run == real.run_id and r.completed_at is not None
    assert not r.blocking
    gone = {e.path: e for e in r.evidence}
    assert not gone[old].present and gone[old].deleted_by_run == real.run_id
    assert all(not e.present and e.deleted_at is not None for e in r.evidence)
    assert r.audit is not None and r.audit.clean and r.audit.objects_scanned > 0
    no_secret(r, secret, '"42"', ": 42")
    assert "complete" in r.describe() and real.run_id in r.describe()


def test_erase_interrupted_and_resumed(table_uri: str) -> None:
    t = table(table_uri)
    secret = "slow-erasure-ticket"
    t.append(events(600, 300))
    first = t.erase([("customer_id", "=", 7)], request_id=secret, max_bytes=1)
    assert not first.complete
    r = t.erasure_status(secret)
    assert r.state == "erasing" and r.pending_files and r.removed_version is None
    done_before = len(r.splices)
    assert r.rows is not None and r.rows > 0
    no_secret(r, secret)

    complete, _ = erase_mod.process_erasure(t.refresh().context, request_hash(secret))
    assert complete
    r = t.erasure_status(secret)
    assert r.state == "removed" and not r.pending_files
    assert len(r.splices) > done_before
    assert len({s.file for s in r.splices}) == len(r.splices)
    assert r.removed_version == max(s.version for s in r.splices)


@pytest.mark.parametrize("value", [42])
def test_audit_finds_a_value_in_a_present_object(table_uri: str, value: int) -> None:
    t = table(table_uri)
    t.erase([("id", "=", value)], request_id="a")
    r = t.erasure_status("a", audit_values=[value])
    # the superseded file still holds it until GC removes it
    assert r.audit is not None and r.audit.found_in
    assert set(r.audit.found_in) & {e.path for e in r.evidence}


def test_erasure_backlog_counts_what_gc_has_not_completed(table_uri: str) -> None:
    from datetime import UTC, datetime, timedelta

    from lethe.audit.evidence import erasure_backlog

    t = table(table_uri)
    assert erasure_backlog(t.catalog) == erasure_backlog(t.catalog)
    assert erasure_backlog(t.catalog).pending == 0
    t.erase([("id", "=", 5)], request_id="one")
    t.delete([("id", "=", 6)], request_id="logical")  # not an erasure
    later = datetime.now(UTC) + timedelta(days=3)
    b = erasure_backlog(t.catalog, now=later)
    assert b.pending == 1 and 3 * 86400 - 60 < b.oldest_age_seconds < 3 * 86400 + 60
    collect(table_uri, retention="1v", grace="7d", erasure_grace="0s")
    assert erasure_backlog(t.catalog, now=later).pending == 0
