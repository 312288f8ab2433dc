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
