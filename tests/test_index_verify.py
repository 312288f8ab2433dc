"""``lethe verify`` and the CLI know secondary indexes (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from lethe.audit.verify import verify
from lethe.cli import main
from lethe.maintenance.compaction import CompactionOptions
from lethe.storage.store import parse_s3_uri

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def indexed(uri: str) -> lethe.Table:
    t = lethe.Table.create(uri, EVENTS, key="id", indexes=("customer_id", "payload"), **TINY)
    t.append(events(0, 500))
    t.append(events(500, 300))
    t.erase([("id", "in", [3, 4, 550])], request_id="e1")  # spliced files, through origins
    t.erase([("id", "=", 5)], request_id="e2")  # a splice of a spliced file
    t.delete([("id", "in", list(range(600, 780)))])
    t.compact(CompactionOptions(min_deleted_fraction=0.5))
    return t.refresh()


def test_verify_checks_index_pieces_and_entries(table_uri: str) -> None:
    t = indexed(table_uri)
    assert any(f.index_origin for f in t.manifest.files)
    rep = verify(t, deep=True)
    assert rep.ok, rep.problems
    pieces = sum(len(r.pieces) for ix in t.manifest.indexes for r in ix.runs)
    assert rep.index_pieces_checked == pieces
    # every live row in both indexes (runs of files compaction replaced are gone)
    assert rep.index_entries_checked >= 2 * t.scan(["id"]).num_rows
    assert verify(t).index_entries_checked == 0  # shallow: no piece decoded


def test_verify_finds_a_missing_or_replaced_piece(table_uri: str, s3: Any) -> None:
    t = indexed(table_uri)
    bucket = parse_s3_uri(table_uri)[0]
    (p, *_) = (p for r in t.manifest.indexes[0].runs for p in r.pieces)
    body = t.store.get(t.key_of(p.path)).body
    entries = pq.read_table(pa.BufferReader(body))
    s3.delete_object(Bucket=bucket, Key=t.key_of(p.path))
    rep = verify(t)
    assert [x for x in rep.problems if "index piece missing" in x] == [
        f"{p.path}: index piece missing"
    ]
    # the same key, entries shifted by one position: a new ETag
    moved = entries.set_column(2, "pos", pa.compute.add(entries.column("pos"), 1))
    buf = pa.BufferOutputStream()
    pq.write_table(moved, buf)
    s3.put_object(Bucket=bucket, Key=t.key_of(p.path), Body=buf.getvalue().to_pybytes())
    rep = verify(t)
    assert any("ETag/size" in x for x in rep.problems)


def test_deep_verify_finds_entries_naming_other_rows(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    t.append(events(0, 300))
    (ix,) = t.manifest.indexes
    (run,) = ix.runs
    (p,) = run.pieces
    entries = pq.read_table(pa.BufferReader(t.store.get(t.key_of(p.path)).body))
    pos = entries.column("pos").to_pylist()
    pos[1] += 1  # the second entry names the next row (another customer)
    wrong = entries.set_column(2, "pos", pa.array(pos, pa.int64())).slice(1)  # one missing
    buf = pa.BufferOutputStream()
    pq.write_table(wrong, buf)
    etag = t.store.put(t.key_of(p.path), buf.getvalue().to_pybytes())
    pieces = (p.model_copy(update={"etag": etag, "size": buf.getvalue().size}),)
    new_ix = ix.model_copy(update={"runs": (run.model_copy(update={"pieces": pieces}),)})
    m = t.manifest.evolve(indexes=(new_ix,))
    t._m = m  # the snapshot as a buggy writer would have committed it
    rep = verify(t, deep=True)
    assert any("misses 2 of its rows and has 1 entries" in x for x in rep.problems), rep.problems
    assert any("entries, manifest says" in x for x in rep.problems)


def test_cli_index_commands(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "events.parquet"
    pq.write_table(events(0, 1_000), src)
    args = ["create", table_uri, "--schema", str(src), "--key", "id", "--index", "customer_id"]
    assert main([*args, "--index", "payload"]) == 0
    assert lethe.Table.open(table_uri).indexes == ("customer_id", "payload")
    assert main(["append", table_uri, str(src)]) == 0
    capsys.readouterr()
    assert main(["index", "list", table_uri]) == 0
    out = capsys.readouterr().out
    assert "customer_id: since version 0, 1 runs" in out and "1000 entries" in out
    assert main(["index", "drop", table_uri, "payload"]) == 0
    assert main(["index", "create", table_uri, "event_time"]) == 0
    assert "indexed 'event_time'" in capsys.readouterr().out
    assert lethe.Table.open(table_uri).indexes == ("customer_id", "event_time")
    assert main(["index", "create", table_uri, "nope"]) == 2
    assert "not a column" in capsys.readouterr().err
    assert main(["verify", table_uri, "--deep"]) == 0
    out = capsys.readouterr().out
    assert "0 problems" in out and "index pieces (2000 entries) checked" in out


def test_append_builds_entries_in_memory_as_a_read_back_would(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)
    batch = events(0, 900)
    cust = [None if i % 7 == 0 else c for i, c in enumerate(batch["customer_id"].to_pylist())]
    t.append(batch.set_column(2, "customer_id", pa.array(cust, pa.int32())))
    assert len(t.manifest.files) > 1  # several files, entries named per file
    before = t.store.stats.snapshot()
    t.append(events(900, 300))
    assert (t.store.stats.snapshot() - before).requests.get("get", 0) <= 3  # no read-back
    rep = verify(t, deep=True)
    assert rep.ok, rep.problems
    assert rep.index_entries_checked == 900 - 129 + 300
    want = [i for i in range(1200) if i % 100 == 8 and (i >= 900 or i % 7)]
    assert sorted(t.scan(["id"], [("customer_id", "=", 8)])["id"].to_pylist()) == want


def test_an_old_version_is_answered_by_its_own_index(table_uri: str) -> None:
    t = indexed(table_uri)
    then = lethe.Table.open(table_uri, version=3)  # the two appends and the first erase's DVs
    assert verify(then, deep=True).ok
    f = [("customer_id", "in", [4, 50, 55])]
    full = then.scan(["id", "customer_id"])
    want = sorted(
        i
        for i, c in zip(full["id"].to_pylist(), full["customer_id"].to_pylist(), strict=True)
        if c in (4, 50, 55)
    )
    assert sorted(then.scan(["id"], f)["id"].to_pylist()) == want
    assert 550 not in want and 504 in want and t.version > 3


def test_concurrent_appends_each_add_their_run(table_uri: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), **TINY)

    def append(i: int) -> None:
        lethe.Table.open(table_uri).append(events(i * 100, 100))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(append, range(6)))
    t = lethe.Table.open(table_uri)
    assert verify(t, deep=True).ok
    (ix,) = t.manifest.indexes
    assert sum(r.entries for r in ix.runs) == 600
    got = sorted(t.scan(["id"], [("customer_id", "=", 42)])["id"].to_pylist())
    assert got == [i for i in range(600) if i % 100 == 42]
