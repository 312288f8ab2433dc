"""The read benches run end to end at a small size, and what they report is consistent.

They judge issue 13's targets (``make bench``); this keeps them from rotting between runs.
Nothing here is timed against a limit: only the relations the benches' output rests on.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_scan_bench_reports_its_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import bench_readwrite

    monkeypatch.setenv("LETHE_BENCH_RW_REPEAT", "1")
    out = bench_readwrite.run(20_000, parts=("scan",), s3rver=False)
    assert out["scan_cpu"] > 0 and out["plain_cpu"] > 0
    # every step of the scan is measured, and removing rows copies at least the kept bytes
    assert all(out[k] > 0 for k in ("fetch", "decode", "drop", "copy"))
    # peak RSS from a fresh process: more than the interpreter, less than this bench's peak
    for k in ("rss_lethe", "rss_plain"):
        assert 30 << 20 < out[k] < 4 << 30


def test_lookup_bench_reads_fewer_bytes_at_page_level() -> None:
    from bench import bench_lookup

    out = bench_lookup.run(200_000, n_keys=3, s3rver=False)
    rg, pg = out["row group"], out["page level"]
    assert pg["down_max"] < rg["down"]
    assert pg["gets_max"] <= 3


def test_lookup_bench_reads_the_same_on_s3rver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table copied to s3rver (where the benches take their walls) answers the same
    lookups with the same requests and bytes as on moto; skipped where npm cannot install it."""
    from bench import bench_lookup
    from bench.common import Unavailable, _s3rver_bin

    monkeypatch.setenv("LETHE_BENCH_NPM_TIMEOUT", "180")
    try:
        _s3rver_bin()
    except Unavailable as e:
        pytest.skip(f"no s3rver here: {e}")
    out = bench_lookup.run(200_000, n_keys=3, s3rver=True)
    for read in ("row group", "page level"):
        there = out[f"{read} (s3rver)"]
        for k in ("down", "down_max", "gets", "gets_max"):
            assert there[k] == out[read][k], (read, k)


def test_erasure_lake_bench_prints_every_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """At a tiny scale (8 files x 500 rows, 200 customers) the bench prints every operation
    of both layouts and every row of issue 26's target table, each with a verdict."""
    from bench import bench_erasure_lake as lake

    for k, v in {"FILES": "8", "ROWS": "500", "CUSTOMERS": "200", "WINDOW_HOURS": "2"}.items():
        monkeypatch.setenv(f"LETHE_BENCH_LAKE_{k}", v)
    out = lake.run()
    printed = capsys.readouterr().out
    assert "target" in printed and "the clustering compaction:" in printed
    ops = ["erase the median customer", "erase the heaviest customer"]
    ops += ["delete 0.1%, purge", "delete 1%, purge"]
    assert [f.name for f in out["plain"]] == ops
    assert [f.name for f in out["clustered"]] == [ops[0], *ops[2:]]
    rows = out["targets"]
    # issue 26's rows, issue 37 item 3's two purges, the last: the purge's wall against one
    # splice at a time
    assert len(rows) == 4 + 2 + 2 + 3 + 1
    assert sum("issue 37 item 3" in label for label, _, _ in rows) == 2
    for label, now, verdict in rows:
        assert verdict in ("met", "not met")
        assert label in printed and now in printed
    for f in out["plain"]:
        # the baseline rewrote the files holding the rows, the library replaced some
        assert f.cow is not None and f.cow.files > 0 and f.touched > 0
        assert f.moved > 0 and f.cow.moved > 0 and f.data_moved > 0
        # the floor (issue 37): files this small are one part each: all of each comes down
        assert f.floor is not None and f.floor.files == f.cow.files
        assert f.floor.down == f.cow.down and f.floor.up < f.floor.down
        assert f.floor.requests == 2 * f.cow.files
    assert "the physical floor" in printed
    for f in out["plain"]:  # issue 37 item 3: the index upkeep of each operation, metered
        assert 0 < f.index_bytes < f.moved and 0 < f.index_cpu < f.cpu, f.name
    for f in [*out["plain"], *out["clustered"]]:
        # the botocore hooks see every byte the store counts (metadata vs data is theirs)
        assert f.metered == f.moved, f.name
        assert f.commits >= 1 and f.rows_erased > 0
    # the heaviest customer's rows are in every time slice; clustered, one person's rows
    # are in one file per window
    assert out["plain"][1].touched == 8
    assert out["clustered"][0].max_per_window == 1


def test_adopt_bench_reports_footer_reads_and_erase_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 20 files the adoption reads about the footers only, writes no data byte and makes
    one commit; once rewritten, the adopted table erases like the one Lethe wrote."""
    from bench import bench_adopt

    monkeypatch.setenv("LETHE_BENCH_ADOPT_FILES", "20")
    out = bench_adopt.run()
    a, e = out["adopt"], out["erase"]
    assert a["down"] <= 1.1 * a["footers"] and a["data_written"] == 0 and a["commits"] == 1
    assert e["adopted"]["rows"] == e["lethe"]["rows"] > 0
    assert e["adopted+rewrite"]["moved"] <= 1.05 * e["lethe"]["moved"]


def test_history_bench_reads_the_same_rows_through_the_lineage_and_after_gc() -> None:
    """issue 39: the bench's three scans of the old version agree on its rows after the
    erasures (through the lineage object, then through the roots GC wrote anew)."""
    from bench import bench_history

    out = bench_history.run(files=3, rows=2_000)
    assert out["lineage"]["rows"] == out["mapped"]["rows"] < out["before"]["rows"]
    assert all(out[k]["requests"] > 0 and out[k]["cpu"] > 0 for k in out)
