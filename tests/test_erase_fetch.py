"""The splice's fetcher reads only what is not in memory yet: a range overlapping bytes
already fetched (a chunk read whole for its bloom filter or dictionary, say) downloads
just its gaps, and is then one extent (a splice reads it as one)."""

from __future__ import annotations

from typing import Any

from conftest import EVENTS, events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe.erasure.splice_io import Fetcher


def covered(ranges: list[tuple[int, int]], start: int, end: int) -> int:
    """How many bytes of ``[start, end)`` the ranges cover."""
    hit = bytearray(end - start)
    for s, e in ranges:
        for i in range(max(s, start), min(e, end)):
            hit[i - start] = 1
    return sum(hit)


def test_overlapping_reads_download_only_the_gaps(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 300))
    f = t.manifest.files[0]
    key = t.key_of(f.path)
    body = t.store.get(key).body
    assert len(body) > 1000
    case(t, key, f, body, [(10, 100), (200, 300), (250, 400)], (0, 500))


@st.composite
def reads(draw: st.DrawFn) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    pairs = draw(st.lists(st.tuples(st.integers(0, 999), st.integers(1, 200)), max_size=5))
    s = draw(st.integers(0, 999))
    return [(a, a + n) for a, n in pairs], (s, s + draw(st.integers(1, 400)))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(reads())
def test_a_read_downloads_what_earlier_reads_did_not_cover(
    table_uri: str, shape: tuple[list[tuple[int, int]], tuple[int, int]]
) -> None:
    t = _table(table_uri)
    f = t.manifest.files[0]
    key = t.key_of(f.path)
    case(t, key, f, t.store.get(key).body, *shape)


_TABLES: dict[str, lethe.Table] = {}


def _table(uri: str) -> lethe.Table:
    if uri not in _TABLES:
        t = lethe.Table.create(uri, EVENTS, key="id")
        t.append(events(0, 300))
        _TABLES[uri] = t
    return _TABLES[uri]


def case(
    t: lethe.Table, key: str, f: Any, body: bytes, before: list[tuple[int, int]], r: tuple[int, int]
) -> None:
    assert len(body) >= 1400
    fetch = Fetcher(t.store, key, f)
    for s, e in before:
        assert fetch.get(s, e) == body[s:e]
    io0 = t.store.stats.snapshot()
    start, end = r
    assert fetch.get(start, end) == body[start:end]
    down = (t.store.stats.snapshot() - io0).bytes_downloaded
    assert down == (end - start) - covered(before, start, end)
    io1 = t.store.stats.snapshot()
    assert fetch.get(start, end) == body[start:end]  # now in memory as one extent
    assert (t.store.stats.snapshot() - io1).bytes_downloaded == 0
    assert any(e.offset <= start and end <= e.end for e in fetch.extents)
