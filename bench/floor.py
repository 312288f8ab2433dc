"""The physical floor of an erasure (issue 37): what any engine must move to take rows out of
Parquet files on S3, given which rows leave, the files' pages, and S3's multipart rules.

For one file:

* **edited bytes**: every data page holding a removed row (found through the page index;
  without one, the whole column chunk), the bloom filter of a touched column where a removed
  value is in no kept row of the group (its bits would still answer "maybe" for the person),
  and the tail (page indexes, footer), which changes whenever a row leaves. A dictionary
  page stays: the kept values are all in it.
* **parts**: the new object is assembled by multipart upload from *copy* parts (a range of
  the old object, copied server-side, no transfer) and *upload* parts; every part but the
  last is at least 5 MiB (:data:`MIN_PART`). Edited bytes must be uploaded; an upload part
  shorter than 5 MiB that is not the last takes its neighbours' bytes along (they are
  downloaded and uploaded again), and a gap shorter than 5 MiB between two upload parts cannot
  be a copy part. :func:`plan_parts` finds the assembly that uploads the fewest bytes
  (a dynamic programme over the places a part may start or end).
* **bytes**: the 5 MiB rule binds requests, not bytes. An edited run of any size can travel
  alone as the last part of a *staging* multipart object whose other parts are server-side
  copies, and the new object then copies its parts from the staging object (Lethe's chained
  splice does this: ``lethe.parquet.parts``). So **down** = the edited bytes (they must be
  decoded), **up** = the same less the removed rows' share of the edited pages. Only a file of
  one part (at most 5 MiB) goes down and up whole.
* **requests** = those of the assembly with the fewest: :func:`plan_parts` pads each upload
  part to 5 MiB (one ranged GET per upload part, plus create, the parts, complete; a file
  whose whole body is one part is a GET and a PUT). Bytes and requests are each a lower
  bound: no one assembly need reach both.
* **CPU**: decoding and re-encoding only the edited pages, measured with pyarrow: the touched
  columns of each touched row group are decoded and the rows of the edited pages re-encoded
  (``pq.write_table``), the decode scaled by the edited share of the chunk's bytes.

A file under 5 MiB has one part: any engine moves all of it (the floor is a copy-on-write).

>>> MiB = 1 << 20
>>> plan_parts(100 * MiB, [(50 * MiB, 50 * MiB + 1000)], tail_from=100 * MiB - 4096)
(5246976, 4, 2)
>>> plan_parts(3 * MiB, [(10, 20)], tail_from=3 * MiB - 100)
(3145728, 1, 1)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import Moved
from lethe.parquet.footer import chunk_range, footer_length, parse_tail, read_offset_index

MIN_PART = 5 << 20  # S3: every part of a multipart upload but the last


@dataclass(frozen=True, slots=True)
class Floor(Moved):
    """The floor of one erasure (or the sum over its files)."""

    requests: int = 0
    cpu: float = 0.0

    def __add__(self, o: Floor) -> Floor:
        return Floor(
            self.files + o.files,
            self.down + o.down,
            self.up + o.up,
            self.requests + o.requests,
            self.cpu + o.cpu,
        )


def _merge(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def plan_parts(
    size: int, edited: Sequence[tuple[int, int]], tail_from: int, min_part: int = MIN_PART
) -> tuple[int, int, int]:
    """``(bytes uploaded, parts, upload parts)`` of the cheapest assembly of a ``size``-byte
    object whose ``edited`` ranges and tail ``[tail_from, size)`` must be uploaded.

    Parts cover ``[0, size)`` in order; a part is a copy (no edited byte in it) or an upload;
    each but the last is at least ``min_part`` (:data:`MIN_PART`). The boundaries worth considering are the
    edges of edited ranges and those edges moved by :data:`min_part`."""
    runs = _merge([*edited, (tail_from, size)])
    if size <= min_part:
        return size, 1, 1
    # Upload intervals cover groups of consecutive runs; gaps between them are copy parts.
    # For a grouping, each upload interval is as short as allowed and as far left as the gap
    # before it allows (that leaves the next gap the most room): front[j] holds the Pareto
    # set of (uploaded, end of the last upload, parts) over groupings of runs[:j].
    front: list[list[tuple[int, int, int, int]]] = [[] for _ in range(len(runs) + 1)]
    front[0] = [(0, -1, 0, 0)]  # -1: nothing placed yet; (uploaded, end, parts, upload parts)
    for j in range(len(runs)):
        for c, v_prev, parts, ups in front[j]:
            lo = 0 if v_prev < 0 else v_prev + min_part
            for k in range(j, len(runs)):
                s, e = runs[j][0], runs[k][1]
                length = e - s if e == size else max(min_part, e - s)
                u = max(lo, e - length) if e != size else s
                starts = [u]
                if v_prev < 0 and 0 < u < min_part:  # a copy before it would be too short:
                    starts = [0, min_part]  # upload from the start, or copy a whole part
                for u in starts:
                    if u > s or (v_prev >= 0 and v_prev < u < lo):
                        continue
                    v = size if e == size else max(u + length, e)
                    gap = u > max(v_prev, 0)
                    front[k + 1].append((c + v - u, v, parts + 1 + gap, ups + 1))
        for k in range(j + 1, len(runs) + 1):
            front[k] = _pareto(front[k])
    up, _, parts, uploads = min(front[-1])
    return up, parts, uploads


def _pareto(points: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    out: list[tuple[int, int, int, int]] = []
    for p in sorted(points):
        if not out or p[1] < out[-1][1]:
            out.append(p)
    return out


def _edited(
    body: bytes, removed: np.ndarray
) -> tuple[list[tuple[int, int]], int, list[tuple], int]:
    """The edited page ranges of a file, where its tail starts, per touched chunk
    ``(row group, column, edited bytes, chunk bytes, row spans)`` for the CPU measure, and
    the bytes the removed rows take in the edited pages (pro rata: the upload is that less)."""
    size = len(body)
    tail = body[-min(size, 1 << 20) :]
    footer = parse_tail(tail[-footer_length(tail, size) - 8 :], size)
    meta = footer.metadata
    tail_from = footer.start
    ranges: list[tuple[int, int]] = []
    touched: list[tuple] = []
    first = shrink = 0
    for g, rg in enumerate(meta.row_groups):
        rows = removed[first : first + rg.num_rows]
        first += rg.num_rows
        hit = np.flatnonzero(rows)
        if not hit.size:
            continue
        for c, cc in enumerate(rg.columns):
            whole = chunk_range(cc)
            spans: list[tuple[int, int]] = []
            if cc.offset_index_offset is None:
                ranges.append((whole.start, whole.end))
                spans.append((0, rg.num_rows))
                edited = whole.length
                shrink += whole.length * hit.size // max(1, rg.num_rows)
            else:
                o, n = cc.offset_index_offset, cc.offset_index_length or 0
                tail_from = min(tail_from, o)
                if cc.column_index_offset is not None:
                    tail_from = min(tail_from, cc.column_index_offset)
                locs = read_offset_index(body[o : o + n]).page_locations
                edited = 0
                for k, loc in enumerate(locs):
                    lo = loc.first_row_index
                    hi = locs[k + 1].first_row_index if k + 1 < len(locs) else rg.num_rows
                    gone = int(((hit >= lo) & (hit < hi)).sum())
                    if gone:
                        ranges.append((loc.offset, loc.offset + loc.compressed_page_size))
                        spans.append((lo, hi))
                        edited += loc.compressed_page_size
                        shrink += loc.compressed_page_size * gone // max(1, hi - lo)
            touched.append((g, c, edited, whole.length, spans))
        ranges.extend(_blooms(body, g, rows, rg))
    return ranges, tail_from, touched, shrink


def _blooms(body: bytes, g: int, rows: np.ndarray, rg: Any) -> list[tuple[int, int]]:
    """The bloom filters of row group ``g`` whose bits must change: those of the columns
    where a removed value is in no kept row (its bits would still answer "maybe" for the
    person); a filter of values all still present elsewhere may stay as it is."""
    out: list[tuple[int, int]] = []
    pf = None
    for c, cc in enumerate(rg.columns):
        md = cc.meta_data
        off, n = md.bloom_filter_offset, md.bloom_filter_length
        if off is None or not n:
            continue
        pf = pf or pq.ParquetFile(pa.BufferReader(body))
        col = pf.read_row_group(g, columns=[pf.schema_arrow.names[c]]).column(0)
        gone = pc.unique(col.filter(pa.array(rows)))
        kept = col.filter(pa.array(~rows))
        if not pc.all(pc.is_in(gone, value_set=pc.unique(kept))).as_py():
            out.append((off, off + n))
    return out


def _cpu(body: bytes, removed: np.ndarray, touched: list[tuple]) -> float:
    """Decode the touched chunks (scaled to their edited share) and re-encode the kept rows
    of the edited pages, with pyarrow: the CPU no engine can avoid."""
    pf = pq.ParquetFile(pa.BufferReader(body))
    sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    by_group: dict[int, list[tuple]] = {}
    for t in touched:
        by_group.setdefault(t[0], []).append(t)
    decode = encode = 0.0
    for g, chunks in by_group.items():
        names = [pf.schema_arrow.names[c] for _, c, *_ in chunks]
        d0 = time.process_time()
        tbl = pf.read_row_group(g, columns=names)
        share = sum(e for _, _, e, _, _ in chunks) / max(1, sum(w for _, _, _, w, _ in chunks))
        decode += (time.process_time() - d0) * share
        e0 = time.process_time()
        for (_, _, _, _, spans), name in zip(chunks, names, strict=True):
            for lo, hi in spans:
                keep = pa.array(~removed[starts[g] + lo : starts[g] + hi])
                col = tbl[name].slice(lo, hi - lo).filter(keep)
                pq.write_table(pa.table({name: col}), pa.BufferOutputStream())
        encode += time.process_time() - e0
    return decode + encode


def file_floor(body: bytes, removed: np.ndarray) -> Floor:
    """The floor of taking the rows ``removed`` (a boolean mask over the file's rows) out of
    the Parquet file ``body``: one file's share of an erasure."""
    if not removed.any():
        return Floor()
    ranges, tail_from, touched, shrink = _edited(body, removed)
    size = len(body)
    _, parts, uploads = plan_parts(size, ranges, tail_from)
    requests = 2 if parts == 1 else uploads + parts + 2  # ranged GETs; create, parts, complete
    cpu = _cpu(body, removed, touched)
    if size <= MIN_PART:  # one PUT of the whole file, every row group re-encoded: pro rata
        return Floor(1, size, size - size * int(removed.sum()) // removed.size, requests, cpu)
    down = sum(b - a for a, b in _merge([*ranges, (tail_from, size)]))  # staged: edits only
    return Floor(1, down, down - shrink, requests, cpu)
