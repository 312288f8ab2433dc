"""bench/bench_lake.py at a tiny scale: both methods run on the same objects and every target
row prints with a verdict (issue 29). Nothing is timed against a limit."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_lake_bench_compares_on_the_same_objects(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_lake

    scale = bench_lake.Scale(
        people=200, months=1, events=20, slices=5, subjects=4, per_file=100, payload=100
    )
    out = bench_lake.run(scale)
    for case in ("1 subject", "4 subjects"):
        faf, lethe = out[case]["faf"], out[case]["lethe"]
        # both rewrite exactly the objects holding a victim: Lethe by splices
        assert lethe.objects_rewritten == faf.objects_rewritten > 0
        assert 1 <= lethe.commits <= 3 and faf.bytes_moved > 0 and lethe.bytes_moved > 0
        # the floor (issue 37) covers the same objects; no method moves less or asks less
        # often (Lethe's own figure can dip below it when its process still holds bodies it
        # read or wrote: a cold Lambda would GET them)
        floor = out[case]["floor"]
        assert floor.files == faf.objects_rewritten
        assert 0 < floor.moved <= faf.bytes_moved
        assert floor.requests <= min(faf.requests, lethe.requests)
    text = capsys.readouterr().out
    # issue 29's four rows, issue 37 item 5's three (bytes / floor, CPU and dollars / Find and
    # Forget) and the check that the floor stays below Lethe
    assert len(out["targets"]) == 8
    assert text.count(" met") + text.count("NOT MET") >= 8
    assert "Lethe bytes / floor" in text and "the floor is one" in text
    assert "Find and Forget" in text and "bytes by kind of key" in text and "Lethe/floor" in text
