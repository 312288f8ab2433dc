"""Erasures over many files: the files are spliced concurrently and committed together (one
commit per pass, each new file in its source's segment), a failed splice keeps the others'
progress, and a source replaced meanwhile is left out without losing the erasure."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
import lethe.erasure.erase as erase_mod
from lethe.audit.verify import verify
from lethe.storage.store import parse_s3_uri

FILES = 8
ROWS = 2_000  # per file; customer c has rows in every file (id % 100 == c)


def spread(uri: str, **kw: Any) -> lethe.Table:
    """``FILES`` files, one customer's rows in each of them, small row groups."""
    t = lethe.Table.create(uri, EVENTS, key="id", row_group_bytes=4 << 10, **kw)
    for i in range(FILES):
        t.append(events(i * ROWS, ROWS))
    assert t.manifest.file_count == FILES and len(t.manifest.files[0].row_groups) > 2
    return t


def _data_keys(s3: Any, uri: str) -> set[str]:
    bucket, root = parse_s3_uri(uri)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/data/")
    return {o["Key"] for p in pages for o in p.get("Contents", [])}


def test_an_erase_over_many_files_is_one_delete_and_one_splice_commit(table_uri: str) -> None:
    t = spread(table_uri)
    v0, segments = t.version, [s.id for s in t.manifest.segments]
    r = t.erase([("customer_id", "=", 42)], request_id="gdpr-42")
    assert r.files_spliced == FILES and r.rows_erased == FILES * ROWS // 100 and r.complete
    assert r.version == v0 + 2 == t.version  # the delete, then every splice in one commit
    kinds = [h.operation for h in t.history()[:2]]
    assert kinds == ["erase", "erase"] and t.history()[0].files_removed == FILES
    fresh = lethe.Table.open(table_uri)
    assert fresh.scan(filters=[("customer_id", "=", 42)]).num_rows == 0
    assert fresh.scan(["id"]).num_rows == FILES * ROWS - FILES * ROWS // 100
    # each new file took its source's place: the same segments, rewritten once each
    assert len(fresh.manifest.segments) == len(segments)
    assert fresh.manifest.erasures[-1].state == "spliced"
    assert verify(fresh, deep=True).ok


def test_a_purge_of_every_file_takes_two_commits(table_uri: str) -> None:
    t = spread(table_uri)
    for c in (3, 7, 11):
        t.delete([("customer_id", "=", c)])
    v0 = t.version
    r = t.purge(request_id="monthly")
    assert r.files_spliced == FILES and r.complete
    assert t.version == v0 + 2  # the purge record and one splice commit
    fresh = lethe.Table.open(table_uri)
    assert fresh.scan(["id"]).num_rows == FILES * ROWS * 97 // 100
    for f in fresh.manifest.files:  # physically gone from every live object, no DV left
        raw = pq.read_table(pa.BufferReader(t.store.get(t.key_of(f.path)).body))
        assert f.dv is None and not set(raw["customer_id"].to_pylist()) & {3, 7, 11}


def test_a_failed_splice_keeps_the_others_progress(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One file's splice fails: the other files' splices commit, the failure surfaces, the
    erasure stays pending on that one file, and the next call finishes it."""
    t = spread(table_uri)
    real = erase_mod.splice_file
    victim = t.manifest.files[3].path

    def flaky(ctx: Any, f: Any, groups: Any, **kw: Any) -> Any:
        if f.path == victim:
            raise OSError("injected: the network went away")
        return real(ctx, f, groups, **kw)

    monkeypatch.setattr(erase_mod, "splice_file", flaky)
    with pytest.raises(OSError, match="injected"):
        t.erase([("customer_id", "=", 42)], request_id="gdpr-42")
    head = lethe.Table.open(table_uri)
    [e] = head.manifest.erasures
    assert e.state == "pending" and [x.path for x in e.targets] == [victim]
    assert head.scan(filters=[("customer_id", "=", 42)]).num_rows == 0  # hidden already
    assert len(_data_keys(s3, table_uri)) == FILES + FILES - 1  # 7 spliced, sources kept for GC
    monkeypatch.setattr(erase_mod, "splice_file", real)
    done, splices = erase_mod.process_erasure(head.context, e.id_hash)
    assert done and len(splices) == 1
    assert lethe.Table.open(table_uri).manifest.erasures[0].state == "spliced"
    assert verify(lethe.Table.open(table_uri)).ok


def test_a_source_replaced_during_the_splices_is_left_out(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction replaces one source between the splices and their commit: the others
    commit, that file's spliced object is removed, and the erasure is met by the compaction
    itself (it rewrote the file without the rows the erasure's DV hides)."""
    from lethe.maintenance.compaction import CompactionOptions

    t = spread(table_uri)
    t.delete([("id", "in", list(range(ROWS * 5, ROWS * 5 + ROWS // 2)))])  # file 5: half gone
    real = erase_mod.commit_splices
    calls: list[int] = []

    def compact_first(ctx: Any, splices: Any) -> Any:
        if not calls:
            other = lethe.Table.open(table_uri)
            r = other.compact(CompactionOptions(min_deleted_fraction=0.4, small_file_fraction=0))
            assert r.version is not None and r.files_removed == 1
        calls.append(len(splices))
        return real(ctx, splices)

    monkeypatch.setattr(erase_mod, "commit_splices", compact_first)
    before = _data_keys(s3, table_uri)
    r = t.erase([("customer_id", "=", 42)], request_id="gdpr-42")
    assert r.complete and calls == [FILES] and r.files_spliced == FILES - 1
    fresh = lethe.Table.open(table_uri)
    assert fresh.scan(filters=[("customer_id", "=", 42)]).num_rows == 0
    assert fresh.manifest.erasures[-1].state == "spliced"
    live = {fresh.key_of(f.path) for f in fresh.manifest.files}
    # nothing orphaned beyond the replaced sources GC will remove
    assert _data_keys(s3, table_uri) - live <= before
    assert verify(fresh, deep=True).ok


def test_a_budget_splices_part_of_the_files_per_call(table_uri: str) -> None:
    t = spread(table_uri)
    f0 = t.manifest.files[0]
    one_group = max(rg.length for rg in f0.row_groups)
    r = t.erase([("customer_id", "=", 42)], request_id="gdpr-42", max_bytes=one_group)
    assert not r.complete and 1 <= r.files_spliced < FILES
    h = t.manifest.erasures[0].id_hash
    calls = 1
    while True:
        done, _ = erase_mod.process_erasure(t.refresh().context, h, max_bytes=3 * one_group)
        calls += 1
        if done:
            break
        assert calls <= FILES * len(f0.row_groups)
    assert calls > 2
    assert lethe.Table.open(table_uri).scan(filters=[("customer_id", "=", 42)]).num_rows == 0


def test_a_row_group_over_the_budget_is_spliced_and_said(
    table_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """At least one row group per call, even over the budget: the call says so (sizes and
    the erasure's hash prefix only, never a value)."""
    t = spread(table_uri)
    with caplog.at_level("WARNING", logger="lethe.erasure.erase"):
        r = t.erase([("customer_id", "=", 42)], request_id="gdpr-42", max_bytes=1)
    assert not r.complete and r.files_spliced == 1 and r.rows_erased > 0
    [msg] = [m for m in caplog.messages if "over the splice budget of 1 bytes" in m]
    assert msg.startswith(f"erasure {t.manifest.erasures[0].id_hash[:12]}: a row group of ")
