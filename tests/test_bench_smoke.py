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
