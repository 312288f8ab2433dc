"""Probing an index (DESIGN §6b): the pieces whose ``[min, max]`` holds a value, per piece
one suffix GET of :data:`PROBE_TAIL` bytes for the footer, then ranged GETs of the row groups
whose statistics can hold a value (groups less than :data:`GAP_GET` apart by one GET). What a
probe read is kept (:data:`PROBED`) for the scrub that follows a delete (:func:`read_entries`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import ColumnIndex, IndexPiece
from lethe.catalog.values import comparable, from_json
from lethe.index.pieces import empty_entries, piece_key, value_array
from lethe.reading.reader import LruCache, SparseFile
from lethe.storage.objects import io_pool
from lethe.storage.store import S3Store

__all__ = ["GAP_GET", "PROBED", "PROBE_TAIL", "piece_may_hold", "probe", "read_entries"]

#: Speculative suffix GET that holds a piece's footer (a few KiB: PIECE_ENTRIES / GROUP_ROWS
#: row groups of three columns); the row groups a probe needs are read by range after it.
PROBE_TAIL: Final = 8 << 10


def _span(c: Any) -> tuple[int, int]:
    """``[start, end)`` of a column chunk (DESIGN §4.1: from the dictionary page if any)."""
    d, p = c.dictionary_page_offset, c.data_page_offset
    s = d if d is not None and 0 < d < p else p
    return int(s), int(s + c.total_compressed_size)


_Probed: TypeAlias = tuple[tuple[int, bytes], ...]  # (offset, bytes) of what was read

#: The bytes of the pieces this process probed, keyed by (bucket, key, ETag): a piece is
#: immutable, so the scrub that follows a delete's probe reads them from here
#: (:func:`read_entries`; issue 37 item 3: a purge's index upkeep reads each piece once).
PROBED: LruCache[_Probed] = LruCache(
    256, max_bytes=64 << 20, weigh=lambda v: sum(len(d) for _, d in v)
)
_MAGIC = b"PAR1"


def read_entries(store: S3Store, key: str, piece: IndexPiece) -> pa.Table:
    """Every entry of ``piece`` (at ``key``): from what a probe of this process read of it
    (:data:`PROBED`), only the gaps fetched (pinned ranged GETs); else one pinned GET."""
    held = PROBED.get((store.bucket, key, piece.etag))
    if held is None:
        return pq.read_table(pa.BufferReader(store.get(key, etag=piece.etag).body))
    buf = bytearray(piece.size)
    buf[: len(_MAGIC)] = _MAGIC  # the format's leading magic: known, not read
    have = [(0, len(_MAGIC))]
    for start, data in held:
        buf[start : start + len(data)] = data
        have.append((start, start + len(data)))
    gaps: list[tuple[int, int]] = []
    at = 0
    for s, e in sorted(have):
        if s > at:
            gaps.append((at, s))
        at = max(at, e)
    if at < piece.size:
        gaps.append((at, piece.size))
    for s, e in _coalesced(gaps):  # a held range between two gaps is read again (same ETag)
        buf[s:e] = store.get(key, etag=piece.etag, start=s, end=e).body
    return pq.read_table(pa.BufferReader(bytes(buf)))


GAP_GET: Final = 64 << 10
"""Gaps of a piece closer than this are read by one GET (the bytes between them again): a
scrub of a probed piece then takes one or two GETs, not one per row group (issue 37)."""


def _coalesced(gaps: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``gaps`` (sorted, disjoint) with those less than :data:`GAP_GET` apart merged."""
    out: list[tuple[int, int]] = []
    for s, e in gaps:
        if out and s - out[-1][1] < GAP_GET:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _read_piece(
    store: S3Store, prefix: str, piece: IndexPiece, t: pa.DataType, wanted: Sequence[Any]
) -> list[pa.Table]:
    """The row groups of one piece whose statistics can hold one of ``wanted`` (sorted,
    comparable form), decoded (the bytes read kept in :data:`PROBED`)."""
    key = piece_key(store, prefix, piece.path)
    n = min(piece.size, PROBE_TAIL)
    data = store.get(key, etag=piece.etag, suffix=n).body
    flen = int.from_bytes(data[-8:-4], "little")
    if data[-4:] != b"PAR1" or flen + 8 > piece.size:
        raise errors.CorruptManifest(f"index object {piece.path} is not a Parquet file")
    if flen + 8 > n:
        data = (
            store.get(key, etag=piece.etag, start=piece.size - flen - 8, end=piece.size - n).body
            + data
        )
        n = len(data)
    md = pq.read_metadata(pa.BufferReader(data[-(flen + 8) :]))
    sparse = SparseFile(
        piece.size, lambda s, e: store.get(key, etag=piece.etag, start=s, end=e).body
    )
    sparse.add(piece.size - n, data)
    held: list[tuple[int, bytes]] = [(piece.size - n, data)]
    pf = pq.ParquetFile(pa.PythonFile(sparse, mode="r"), metadata=md, pre_buffer=False)
    groups: list[int] = []
    need: list[tuple[int, int]] = []
    for rg in range(md.num_row_groups):
        st = md.row_group(rg).column(0).statistics
        if st is not None and st.has_min_max:
            try:
                lo, hi = comparable(st.min, t), comparable(st.max, t)
                i = bisect.bisect_left(wanted, lo)
                if not (i < len(wanted) and wanted[i] <= hi):
                    continue
            except (TypeError, ValueError, errors.LetheError):
                pass  # unknown order: read the group
        g = md.row_group(rg)
        spans = [_span(g.column(i)) for i in range(g.num_columns)]
        start, end = min(a for a, _ in spans), max(b for _, b in spans)
        groups.append(rg)
        if start < piece.size - n:  # not already in the tail (a group is read as one extent)
            need.append((start, end))
    for start, end in _coalesced(sorted(need)):  # neighbouring groups: one GET
        held.append((start, store.get(key, etag=piece.etag, start=start, end=end).body))
        sparse.add(*held[-1])
    out = [pf.read_row_group(rg, use_threads=False) for rg in groups]
    PROBED.put((store.bucket, key, piece.etag), tuple(held))
    return out


def probe(
    store: S3Store, prefix: str, ix: ColumnIndex, t: pa.DataType, values: Iterable[Any]
) -> pa.Table:
    """The entries of ``ix`` whose value is one of ``values`` (comparable form): every run,
    only the pieces and row groups whose bounds can hold a value, values probed sorted."""
    wanted = sorted(set(values))
    if not wanted:
        return empty_entries(t)
    value_set = value_array(wanted, t)
    todo = [p for r in ix.runs for p in r.pieces if piece_may_hold(p, t, wanted)]
    if len(todo) > 1:  # one piece per run: their GETs in parallel (they wait on nothing else)
        futures = [io_pool().submit(_read_piece, store, prefix, p, t, wanted) for p in todo]
        groups = [g for f in futures for g in f.result()]
    else:
        groups = [g for p in todo for g in _read_piece(store, prefix, p, t, wanted)]
    parts: list[pa.Table] = []
    for g in groups:
        hit = g.filter(pc.is_in(g.column("value"), value_set=value_set))
        if hit.num_rows:
            parts.append(hit.cast(empty_entries(t).schema))
    return pa.concat_tables(parts) if parts else empty_entries(t)


def piece_may_hold(piece: IndexPiece, t: pa.DataType, wanted: Sequence[Any]) -> bool:
    """Whether ``piece``'s ``[min, max]`` holds one of ``wanted`` (sorted, comparable form)."""
    lo, hi = from_json(piece.min, t), from_json(piece.max, t)
    if lo is None or hi is None:
        return True
    i = bisect.bisect_left(wanted, lo)
    return i < len(wanted) and wanted[i] <= hi
