"""A purge reads each file once (issue 37, item 3): the splice that removes the rows hands
their indexed values to the index scrub, so no data file is fetched a second time for the
index; the index still loses exactly the removed rows' entries.

GETs are counted on the real boto3 client (botocore's event hooks, :mod:`faults`): every
ranged GET of an object under ``data/``, by path and byte range."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
from conftest import EVENTS, events
from faults import on_request

import lethe
from lethe.audit.verify import verify
from tests.test_index_purge import entries

# files past the reader's tail (256 KiB): a file read twice is not served by the tail cache
SIZES = {"target_file_bytes": 700_000, "row_group_bytes": 120_000}
N = 20_000  # rows per append: customer c has the ids c, c + 100, ...
GONE = 17  # customer 17: 1% of the rows, in every row group


@contextmanager
def data_gets(client: Any, under: str = "/data/") -> Iterator[list[tuple[str, int, int]]]:
    """The GETs of objects ``under`` (data files) that ``client`` sends inside the block:
    (path, start, end)."""
    got: list[tuple[str, int, int]] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        path = str(params.get("url_path", ""))
        if under not in path:
            return
        rng = str((params.get("headers") or {}).get("Range", ""))
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng)
        if m is None:  # the whole object
            got.append((path, 0, -1))
        elif not m.group(1):  # a suffix: the last n bytes
            got.append((path, -int(m.group(2)), 0))
        else:
            got.append((path, int(m.group(1)), int(m.group(2) or -1) + 1))

    with on_request(client, ("GetObject",), hook):
        yield got


def spans(gets: list[tuple[str, int, int]], t: lethe.Table) -> dict[str, list[tuple[int, int]]]:
    """Per object, the ``[start, end)`` of each GET (a whole-object GET: end -1; a suffix
    of n bytes: start -n)."""
    by_path: dict[str, list[tuple[int, int]]] = {}
    for p, s, e in gets:
        if s < 0:
            size = t.store.head(p[1:]).size
            s, e = size + s, size
        by_path.setdefault(p, []).append((s, e if e >= 0 else 1 << 62))
    return by_path


def again(gets: list[tuple[str, int, int]], before: list[tuple[str, int, int]], t: Any) -> int:
    """How many of ``gets`` fetch a byte that ``before`` fetched already."""
    old = spans(before, t)
    return sum(
        any(s < e0 and s0 < e for s0, e0 in old.get(p, []))
        for p, got in spans(gets, t).items()
        for s, e in got
    )


def overlaps(gets: list[tuple[str, int, int]], t: lethe.Table) -> list[str]:
    """The objects of which some byte was fetched twice."""
    out: list[str] = []
    for p, spans_of in spans(gets, t).items():
        spans_of.sort()
        if any(b[0] < a[1] for a, b in pairwise(spans_of)):
            out.append(p)
    return out


def rows(start: int, n: int) -> pa.Table:
    """:func:`conftest.events` with payloads that do not compress (64 random hex digits)."""
    t = events(start, n)
    words = np.random.default_rng(start).integers(0, 1 << 62, size=(n, 4))
    payload = pa.array(["".join(f"{w:016x}" for w in r) for r in words.tolist()])
    return t.set_column(3, "payload", payload)


def table(uri: str, s3: Any, indexed: bool) -> lethe.Table:
    idx = ("customer_id",) if indexed else ()
    t = lethe.Table.create(uri, EVENTS, key="id", indexes=idx, s3=s3, **SIZES)
    t.append(rows(0, N))
    t.append(rows(N, N))
    assert sum(f.size > 300_000 for f in t.manifest.files) >= 2
    return t


def test_a_purge_fetches_no_byte_of_a_data_file_twice(bucket: str, s3: Any) -> None:
    """Before the fix the purge's record read the indexed column's pages of every hidden row
    (``read_positions``) and the splices fetched them again; and the scrub GET whole every
    index piece the delete's probe had just read (now kept: ``lethe.index.probe.PROBED``)."""
    t = table(f"s3://{bucket}/tables/indexed", s3, indexed=True)
    with data_gets(s3, "/index/") as probed:
        assert t.delete([("customer_id", "=", GONE)]).rows_deleted == 2 * N // 100
    touched = {f.path for f in t.manifest.files if f.dv is not None}
    with data_gets(s3) as gets, data_gets(s3, "/index/") as scrubbed:
        r = t.purge(request_id="purge-17")
    assert r.complete and r.rows_erased == 2 * N // 100 and r.files_spliced > 1
    assert {p.split("/data/", 1)[1] for p, _, _ in gets} <= {p[len("data/") :] for p in touched}
    assert overlaps(gets, t) == []  # each touched file's ranges read once
    assert probed and again(scrubbed, probed, t) == 0  # the probe's pieces: not read again
    assert overlaps(scrubbed, t) == []
    t.refresh()
    have = entries(t)
    assert GONE not in have["value"].to_pylist() and have.num_rows == 2 * N * 99 // 100
    assert t.scan(["id"], [("customer_id", "=", GONE)]).num_rows == 0
    got = sorted(t.scan(["id"], [("customer_id", "=", 18)])["id"].to_pylist())
    assert got == [i for i in range(2 * N) if i % 100 == 18]
    assert verify(t, deep=True).ok


def test_the_index_adds_no_data_file_get_to_an_erase(bucket: str, s3: Any) -> None:
    """An erase by the key on a table indexed on another column fetches exactly the data
    bytes the same erase fetches on the same table without an index (before the fix the
    delete's scrub read the erased rows' indexed values a second time)."""
    seen: list[list[tuple[str, int, int]]] = []
    for name, indexed in (("plain", False), ("indexed", True)):
        t = table(f"s3://{bucket}/tables/{name}", s3, indexed)
        t.delete([("id", "in", [118, 30_000])])  # hidden rows the splices remove too
        with data_gets(s3) as gets:
            r = t.erase([("id", "in", [117, 1517, 39_999])], request_id="e-3")
        assert r.complete and r.rows_erased >= 3
        seen.append([(p.split("/data/", 1)[1], s, e) for p, s, e in gets])
        if indexed:
            t.refresh()
            have = entries(t)["value"].to_pylist()
            assert have.count(17) == 2 * N // 100 - 2 and have.count(99) == 2 * N // 100 - 1
            assert sorted(t.scan(["id"], [("customer_id", "=", 17)])["id"].to_pylist()) == [
                i for i in range(2 * N) if i % 100 == 17 and i not in (117, 1517)
            ]
            assert verify(t, deep=True).ok
    plain, indexed_gets = seen
    assert len(indexed_gets) == len(plain)
    assert sum(e - s for _, s, e in indexed_gets) == sum(e - s for _, s, e in plain)


def test_a_scrub_reads_the_rest_of_a_probed_piece_in_one_get(bucket: str, s3: Any) -> None:
    """The delete's probe reads a piece's footer and the row groups that can hold the value
    (each group by its own GET before), the scrub every gap around them (each by its own
    GET: 6 GETs a piece on the lake bench); ranges closer than ``GAP_GET`` are now one GET
    (issue 37: requests of the upkeep)."""
    from lethe.index.probe import GAP_GET

    t = table(f"s3://{bucket}/tables/gaps", s3, indexed=True)
    with data_gets(s3, "/index/") as probed:
        t.delete([("customer_id", "in", [17, 60])])
    with data_gets(s3, "/index/") as scrubbed:
        r = t.purge(request_id="purge-gaps")
    assert r.complete and r.rows_erased == 4 * N // 100
    per_piece: dict[str, int] = {}
    for p, _, _ in scrubbed:
        per_piece[p] = per_piece.get(p, 0) + 1
    probed_pieces = {p for p, _, _ in probed}
    for p in probed_pieces:  # the footer, then the groups that can hold 17 or 60: one GET
        assert sum(q == p for q, _, _ in probed) <= 2, p
    assert per_piece and set(per_piece) <= probed_pieces
    for p, n in per_piece.items():  # held ranges between gaps are small here: one GET
        assert n == 1, (p, n, t.store.head(p[1:]).size, GAP_GET)
    assert overlaps(scrubbed, t) == []
    t.refresh()
    assert t.scan(["id"], [("customer_id", "in", [17, 60])]).num_rows == 0
    assert verify(t, deep=True).ok
