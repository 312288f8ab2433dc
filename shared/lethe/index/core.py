"""Secondary indexes on erasure keys (DESIGN §6b, docs/format.md §3c): build, probe, plan.

An index on column ``c`` is a list of *runs* in the manifest root
(:class:`~lethe.catalog.manifest.ColumnIndex`). A run is a sorted list of immutable Parquet
*pieces* under ``index/``, each holding entries ``(value, file, pos)`` sorted by value, with
disjoint value ranges whose min/max the root records. A run covers the live files whose
``added_version`` lies in its ``covers`` ranges; a live file no run covers is simply read
the unindexed way, so a writer that does not (yet) index its files stays correct.

Lookup of a value: the root names the pieces whose ``[min, max]`` holds it (one per run);
per piece one suffix GET of :data:`PROBE_TAIL` bytes gives the footer, then ranged GETs of
the row groups whose statistics can hold the value (:data:`GROUP_ROWS` entries, ~30 KiB;
groups less than :data:`GAP_GET` apart by one GET).
A piece holds at most :data:`PIECE_ENTRIES` entries, so its footer stays a few KiB: the
cost of a probe depends on the number of runs, not on the table's size.

A spliced file keeps its rows' entries: its :class:`~lethe.catalog.manifest.IndexOrigin` names the
file the splices started from and the positions they removed, entries name the origin, and
hits are shifted down past the removed positions (:func:`from_origin`).

Entries are never trusted beyond the snapshot: hits on files that are no longer live are
dropped, and readers still apply each file's DV.
"""

from __future__ import annotations

import base64
import bisect
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.manifest import ColumnIndex, DataFile, IndexOrigin, IndexPiece, IndexRun
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms.indexes import Merge, check_indexable, piece_paths
from lethe.catalog.values import comparable, exact_scalar, from_json
from lethe.index.pieces import (
    FILE_TYPE,
    GROUP_ROWS,
    PIECE_ENTRIES,
    index_key,
    write_pieces,
)
from lethe.index.pieces import empty_entries as _empty
from lethe.index.pieces import one_file as _one_file
from lethe.index.pieces import order as _order
from lethe.index.pieces import piece_key as _key
from lethe.index.pieces import with_file_dictionary as _with_file_dictionary
from lethe.progress import Progress, track
from lethe.reading.filters import Dnf
from lethe.reading.reader import FileHandle, LruCache, SparseFile, read_row_group
from lethe.reading.scan import candidate_files, plan_files, reader_of
from lethe.storage.layout import INDEX_PREFIX, object_key
from lethe.storage.objects import io_pool
from lethe.storage.store import S3Store

__all__ = [
    "GROUP_ROWS",
    "INDEX_PREFIX",
    "MAX_RUNS",
    "PIECE_ENTRIES",
    "PROBED",
    "IndexPlan",
    "Merge",
    "backfill_task",
    "build_run",
    "catch_up",
    "check_indexable",
    "entries_of",
    "from_origin",
    "hit_rows",
    "index_key",
    "index_path",
    "index_plan",
    "index_plans",
    "initial_indexes",
    "maintain",
    "merge",
    "origin_positions",
    "origin_removed",
    "piece_may_hold",
    "piece_paths",
    "plan_merges",
    "probe",
    "read_entries",
    "row_groups_of",
    "runs_for_files",
    "spliced_origin",
    "usable",
    "write_pieces",
]

#: Speculative suffix GET that holds a piece's footer (a few KiB: PIECE_ENTRIES / GROUP_ROWS
#: row groups of three columns); the row groups a probe needs are read by range after it.
PROBE_TAIL: Final = 8 << 10


# --- where a file's entries are (splices keep their origin's, docs/format.md §3c) -----------
def index_path(f: DataFile) -> str:
    """The path the index entries of ``f``'s rows name (its origin's, if spliced)."""
    return f.index_origin.path if f.index_origin is not None else f.path


def origin_removed(f: DataFile) -> BitMap64:
    """Positions of :func:`index_path` no row of ``f`` has any more."""
    o = f.index_origin
    if o is None or not o.removed:
        return BitMap64()
    return BitMap64.deserialize(base64.b64decode(o.removed))


def _sorted(bm: BitMap64) -> npt.NDArray[np.int64]:
    return np.fromiter(bm, dtype=np.int64, count=len(bm))


def origin_positions(f: DataFile, positions: Iterable[int]) -> BitMap64:
    """Positions of ``f`` in the coordinates of its index entries (the origin's)."""
    pos = np.fromiter(positions, dtype=np.int64)
    removed = _sorted(origin_removed(f))
    if not len(removed):
        return BitMap64(pos)
    # by rank: kept position p of f is origin position q = p + |{r in removed: r <= q}|, and
    # removed[i] - i kept positions lie before removed[i] (no pass over every row)
    shifted = removed - np.arange(len(removed), dtype=np.int64)
    return BitMap64(pos + np.searchsorted(shifted, pos, side="right"))


def from_origin(f: DataFile, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index entries' positions (origin coordinates) as positions of ``f``; positions a
    splice removed are dropped."""
    removed = _sorted(origin_removed(f))
    if not len(removed):
        return positions
    pos = positions[~np.isin(positions, removed)]
    return pos - np.searchsorted(removed, pos, side="right")


def spliced_origin(f: DataFile, removed: BitMap64) -> IndexOrigin:
    """The index origin of the file a splice of ``f`` removing ``removed`` (positions of
    ``f``) writes: ``f``'s own origin (chains keep the first) with those rows added."""
    gone = origin_removed(f) | origin_positions(f, removed)
    return IndexOrigin(
        path=index_path(f),
        added_version=f.index_version,
        removed=base64.b64encode(gone.serialize()).decode("ascii") if gone else "",
    )


# --- building --------------------------------------------------------------------------------
def entries_of(
    store: S3Store,
    prefix: str,
    files: Sequence[DataFile],
    column: str,
    t: pa.DataType,
    *,
    progress: Progress | None = None,
    snap: Snapshot | None = None,
) -> pa.Table:
    """The entries ``(value, file, pos)`` of ``files`` (reads only their ``column`` chunks;
    nulls are not indexed; a spliced file's entries name its origin, :func:`index_path`).
    ``progress`` hears of each file read (``"index backfill"``). With ``snap``, files of
    its older schemas are read by field id (``column`` is its name in ``snap``)."""
    parts: list[pa.Table] = []
    read = reader_of(snap, [column]) if snap is not None else None
    tracker = track(progress, "index backfill", total=len(files), unit="files")
    for f in files:
        h = FileHandle(store, object_key(prefix, f.path), f)
        tail = h.tail()
        first = 0
        rows = np.arange(f.rows, dtype=np.int64)
        at = rows if f.index_origin is None else _sorted(origin_positions(f, rows))
        for rg in range(tail.arrow.num_row_groups):
            n = tail.arrow.row_group(rg).num_rows
            if read is not None:
                col = read(h, rg).column(0)
            else:
                col = read_row_group(h, tail, rg, [column], h.prefetch(tail, rg, [column])).column(
                    0
                )
            pos = pa.array(at[first : first + n])
            first += n
            part = pa.table(
                {
                    "value": col.cast(t),
                    "file": _one_file(index_path(f), n),
                    "pos": pos,
                }
            )
            parts.append(part.filter(pc.is_valid(part.column("value"))))
        tracker.advance()
    tracker.finish()
    if not parts:
        return _empty(t)
    return pa.concat_tables(parts)


def build_run(
    store: S3Store,
    prefix: str,
    column: str,
    entries: pa.Table,
    *,
    piece_entries: int = PIECE_ENTRIES,
) -> tuple[IndexRun, list[str]]:
    """Sort ``entries`` and write them as the pieces of one run (``covers`` left empty: the
    commit sets it). Returns the run and the table-relative keys written."""
    entries = _with_file_dictionary(entries)
    ordered = entries.take(_order(entries))
    pieces, written = write_pieces(store, prefix, column, ordered, piece_entries)
    return IndexRun(id=uuid.uuid4().hex[:16], covers=(), pieces=pieces), written


# --- probing ---------------------------------------------------------------------------------
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
    key = _key(store, prefix, piece.path)
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
        return _empty(t)
    value_set = pa.array([exact_scalar(v, t).cast(t) for v in wanted], type=t)
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
            parts.append(hit.cast(_empty(t).schema))
    return pa.concat_tables(parts) if parts else _empty(t)


# --- planning --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IndexPlan:
    """What the index says about one filter in one snapshot.

    ``hits``: per indexed candidate file, the positions whose value the filter pins (a
    superset of the matching rows when the filter has other predicates; exact when
    ``exact``). ``unindexed``: candidate files no run covers (read the unindexed way)."""

    column: str
    hits: dict[str, BitMap64]
    indexed: tuple[DataFile, ...]
    unindexed: tuple[DataFile, ...]
    exact: bool


def usable(m: Snapshot, dnf: Dnf | None) -> tuple[ColumnIndex, list[Any], bool] | None:
    """The index a filter can use (every clause pins the column by ``=``/``in``), the values
    it pins, and whether the filter is exactly "column in values"."""
    if dnf is None:
        return None
    for ix in m.indexes:
        if not ix.runs:
            continue
        vals = dnf.key_values(ix.column)
        if vals is None or any(v is None for v in vals):
            continue
        if any(p.has_null for c in dnf.clauses for p in c if p.column == ix.column):
            continue
        exact = all(len(c) == 1 for c in dnf.clauses)
        return ix, vals, exact
    return None


def index_plans(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    dnfs: Sequence[Dnf | None],
    *,
    physical: Sequence[bool] | None = None,
) -> list[IndexPlan | None]:
    """Per filter, its :class:`IndexPlan` (None: the index cannot serve it). Filters on the
    same column share one probe of all their values, sorted."""
    phys = list(physical) if physical is not None else [False] * len(dnfs)
    found = [usable(m, d) for d in dnfs]
    schema = m.arrow_schema()
    by_col: dict[str, set[Any]] = {}
    for u in found:
        if u is not None:
            by_col.setdefault(u[0].column, set()).update(u[1])
    probed: dict[str, pa.Table] = {}
    for col, all_vals in by_col.items():
        ix = m.index(col)
        assert ix is not None
        probed[col] = probe(store, prefix, ix, schema.field(col).type, all_vals)
    out: list[IndexPlan | None] = []
    for dnf, u, ph in zip(dnfs, found, phys, strict=True):
        if u is None or dnf is None:
            out.append(None)
            continue
        ix, vals, exact = u
        t = schema.field(ix.column).type
        files = candidate_files(m, dnf, physical=ph)
        indexed = tuple(f for f in files if ix.covers(f))
        entries = probed[ix.column]
        mine = entries.filter(
            pc.is_in(
                entries.column("value"),
                value_set=pa.array([exact_scalar(v, t).cast(t) for v in vals], type=t),
            )
        )
        hits = _hits(mine, indexed)
        unindexed = tuple(f for f in files if not ix.covers(f))
        out.append(IndexPlan(ix.column, hits, indexed, unindexed, exact))
    return out


def _hits(entries: pa.Table, indexed: Sequence[DataFile]) -> dict[str, BitMap64]:
    """Per live file of ``indexed``, the positions ``entries`` name (a spliced file's
    through its origin: removed positions dropped, the others shifted down)."""
    by_path = {index_path(f): f for f in indexed}
    found: dict[str, list[int]] = {}
    for path, pos in zip(
        entries.column("file").to_pylist(), entries.column("pos").to_pylist(), strict=True
    ):
        if path in by_path:
            found.setdefault(path, []).append(pos)
    hits: dict[str, BitMap64] = {}
    for path, pos in found.items():
        f = by_path[path]
        at = from_origin(f, np.array(pos, dtype=np.int64))
        if len(at):
            hits[f.path] = BitMap64(at)
    return hits


def row_groups_of(f: DataFile, positions: BitMap64) -> list[tuple[int, int]]:
    """``(row group, first position)`` of the groups of ``f`` holding any of ``positions``."""
    starts: list[int] = []
    first = 0
    for rg in f.row_groups:
        starts.append(first)
        first += rg.rows
    out: dict[int, int] = {}
    for p in positions:
        i = bisect.bisect_right(starts, p) - 1
        if 0 <= i < len(starts):
            out[i] = starts[i]
    return sorted(out.items())


def index_plan(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    dnf: Dnf | None,
    *,
    physical: bool = False,
) -> tuple[list[tuple[FileHandle, int, int]], dict[str, BitMap64]] | None:
    """The scan plan of ``dnf`` through an index (None: no index serves it): the row groups
    of indexed files that hold a hit, and the unindexed files planned as usual; with the
    hits (file -> positions) that let a read fetch only the pages holding them."""
    ip = index_plans(store, prefix, m, [dnf], physical=[physical])[0]
    if ip is None:
        return None
    out: list[tuple[FileHandle, int, int]] = []
    for f in ip.indexed:
        bm = ip.hits.get(f.path)
        if not bm:
            continue
        h = FileHandle(store, _key(store, prefix, f.path), f)
        out.extend((h, rg, first) for rg, first in row_groups_of(f, bm))
    out.extend(plan_files(store, prefix, m, list(ip.unindexed), dnf))
    return out, ip.hits


def hit_rows(hits: Mapping[str, BitMap64]) -> Any:
    """A :class:`~lethe.reading.filtered.RowFilter` ``rows`` callback: the hit positions of a file in
    ``[start, start + n)`` as row ranges relative to ``start`` (None: file not indexed)."""

    def rows(f: DataFile, start: int, n: int) -> tuple[tuple[int, int], ...] | None:
        bm = hits.get(f.path)
        if bm is None:
            return None
        return tuple((p - start, p - start + 1) for p in bm if start <= p < start + n)

    return rows


# --- declaring and maintaining ---------------------------------------------------------------
def _entries_in_memory(
    files: Sequence[DataFile], values: pa.ChunkedArray, t: pa.DataType
) -> pa.Table:
    """The entries of new ``files`` (no origins) from their rows' ``values`` (in file
    order), laid out in (file, pos) order."""
    starts = np.cumsum([0, *(f.rows for f in files)])
    by_path = sorted(range(len(files)), key=lambda i: files[i].path)
    value = values.cast(t)
    if by_path != list(range(len(files))):
        value = value.take(np.concatenate([np.arange(starts[i], starts[i + 1]) for i in by_path]))
    which = np.repeat(np.array(by_path, dtype=np.int32), [files[i].rows for i in by_path])
    pos = np.concatenate([np.arange(files[i].rows, dtype=np.int64) for i in by_path])
    names = pa.array([f.path for f in files], pa.string())
    file_ = pa.DictionaryArray.from_arrays(pa.array(which), names)
    part = pa.table({"value": value, "file": file_, "pos": pos})
    return part.filter(pc.is_valid(part.column("value")))


def runs_for_files(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    files: Sequence[DataFile],
    values: Mapping[str, pa.ChunkedArray] | None = None,
) -> tuple[dict[str, IndexRun], list[str]]:
    """One run per index declared in ``m`` over new ``files`` (written now, committed with
    them: :func:`with_new_runs`), and the keys written. ``values``: per column, the values
    of the files' rows in order, if the writer has them (else they are read back)."""
    runs: dict[str, IndexRun] = {}
    written: list[str] = []
    if not files:
        return runs, written
    schema = m.arrow_schema()
    for ix in m.indexes:
        t = schema.field(ix.column).type
        v = (values or {}).get(ix.column)
        if v is not None and len(v) == sum(f.rows for f in files):
            entries = _entries_in_memory(files, v, t)
        else:
            entries = entries_of(store, prefix, files, ix.column, t, snap=m)
        run, keys = build_run(store, prefix, ix.column, entries)
        runs[ix.column] = run
        written.extend(keys)
    return runs, written


def backfill_task(
    table_uri: str,
    column: str,
    type_b64: str,
    files: Sequence[DataFile],
    *,
    schemas: Sequence[tuple[int, str]] = (),
    current_schema_id: int = 0,
) -> IndexRun:
    """One run over ``files`` of the table at ``table_uri`` (what a Spark task of
    ``spark_jobs/index.py`` does for its share of the files, with its own S3 client);
    ``type_b64`` is the table's schema (:func:`lethe.catalog.manifest.schema_to_b64`). ``schemas``
    (the history: id, base64 schema) and ``current_schema_id``: files written under older
    schemas are read by field id (a renamed column under the name the file has)."""
    from lethe.catalog.manifest import schema_from_b64
    from lethe.storage.store import parse_s3_uri

    bucket, prefix = parse_s3_uri(table_uri)
    store = S3Store(bucket)
    t = schema_from_b64(type_b64).field(column).type
    snap = _history_stub(type_b64, schemas, current_schema_id) if schemas else None
    entries = entries_of(store, prefix, files, column, t, snap=snap)
    run, _ = build_run(store, prefix, column, entries)
    return run


def _history_stub(
    schema_b64: str, schemas: Sequence[tuple[int, str]], current_schema_id: int
) -> Snapshot:
    """A snapshot holding only a schema history (files are read by id through it)."""
    from datetime import UTC, datetime

    from lethe.catalog.manifest import Manifest, Operation, SchemaVersion, TableProperties

    return Snapshot(
        Manifest(
            table_uuid="index-backfill",
            version=0,
            created_at=datetime.now(UTC),
            operation=Operation(kind="index"),
            schema_b64=schema_b64,
            properties=TableProperties(key="-"),
            schemas=tuple(SchemaVersion(schema_id=i, schema_b64=b) for i, b in schemas),
            current_schema_id=current_schema_id,
            format_version=3,
        )
    )


def initial_indexes(schema: pa.Schema, columns: Iterable[str]) -> tuple[ColumnIndex, ...]:
    """The indexes of a new table (checked: known, indexable, each once)."""
    cols = list(columns)
    if isinstance(columns, str):
        raise errors.InvalidRequest("indexes must be a sequence of column names, not a string")
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise errors.InvalidRequest(f"columns indexed twice: {dup}")
    for c in cols:
        check_indexable(schema, c)
    return tuple(ColumnIndex(column=c, created_version=0) for c in cols)


# --- erasure ---------------------------------------------------------------------------------
def piece_may_hold(piece: IndexPiece, t: pa.DataType, wanted: Sequence[Any]) -> bool:
    """Whether ``piece``'s ``[min, max]`` holds one of ``wanted`` (sorted, comparable form)."""
    lo, hi = from_json(piece.min, t), from_json(piece.max, t)
    if lo is None or hi is None:
        return True
    i = bisect.bisect_left(wanted, lo)
    return i < len(wanted) and wanted[i] <= hi


# --- merging (LSM) ---------------------------------------------------------------------------
#: A column with this many runs gets its smallest runs merged by the next append.
MAX_RUNS: Final = 8
#: Runs merged in one step, and the bound on the entries one step rewrites.
MERGE_FANOUT: Final = 4
MERGE_MAX_ENTRIES: Final = 1 << 22


def _union(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Version ranges, merged where they touch.

    >>> _union([(3, 3), (0, 1), (2, 2), (5, 6)])
    ((0, 3), (5, 6))
    """
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def plan_merges(m: Snapshot) -> list[tuple[str, tuple[IndexRun, ...]]]:
    """Per index with at least :data:`MAX_RUNS` runs: its smallest runs to merge (bounded:
    :data:`MERGE_FANOUT` runs, :data:`MERGE_MAX_ENTRIES` entries). Size-tiered, so an entry
    is rewritten O(log entries) times."""
    out: list[tuple[str, tuple[IndexRun, ...]]] = []
    for ix in m.indexes:
        if len(ix.runs) < MAX_RUNS:
            continue
        small: list[IndexRun] = []
        for r in sorted(ix.runs, key=lambda r: r.entries):
            if len(small) == MERGE_FANOUT or sum(x.entries for x in small) + r.entries > (
                MERGE_MAX_ENTRIES
            ):
                break
            small.append(r)
        if len(small) >= 2:
            out.append((ix.column, tuple(small)))
    return out


def merge(
    store: S3Store, prefix: str, m: Snapshot, column: str, runs: Sequence[IndexRun]
) -> tuple[Merge, list[str]]:
    """Read ``runs`` whole and write them as one run covering all they covered."""
    t = m.arrow_schema().field(column).type
    schema = pa.schema([("value", t), ("file", FILE_TYPE), ("pos", pa.int64())])
    parts = [schema.empty_table()]
    for r in runs:
        for p in r.pieces:
            body = store.get(_key(store, prefix, p.path), etag=p.etag).body
            got = pq.read_table(pa.BufferReader(body), read_dictionary=["file"])
            parts.append(got.cast(schema))
    run, written = build_run(store, prefix, column, pa.concat_tables(parts))
    covers = _union(c for r in runs for c in r.covers)
    return Merge(column, tuple(runs), run.model_copy(update={"covers": covers})), written


def maintain(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    files: Sequence[DataFile],
    *,
    values: Mapping[str, pa.ChunkedArray] | None = None,
) -> tuple[dict[str, IndexRun], list[Merge], list[str]]:
    """What a commit adding ``files`` to (a successor of) ``m`` writes for the indexes: a
    run per index over the new files (``values``: see :func:`runs_for_files`), and the
    merges ``m``'s runs are due for."""
    runs, written = runs_for_files(store, prefix, m, files, values)
    merges: list[Merge] = []
    for column, old in plan_merges(m):
        mg, keys = merge(store, prefix, m, column, old)
        merges.append(mg)
        written.extend(keys)
    return runs, merges, written


def catch_up(
    store: S3Store, prefix: str, m: Snapshot, exclude: Iterable[str] = ()
) -> tuple[dict[str, IndexRun], list[str]]:
    """Per index, one run over the live files of ``m`` it does not cover (spliced files,
    files of writers that did not index; ``exclude``: files about to be replaced), covering
    their added versions: every uncovered live file of those versions is in it."""
    out: dict[str, IndexRun] = {}
    written: list[str] = []
    if not m.indexes:
        return out, written
    skip = set(exclude)
    schema = m.arrow_schema()
    live = [f for f in m.files if f.path not in skip]
    for ix in m.indexes:
        todo = [f for f in live if not ix.covers(f)]
        if not todo:
            continue
        t = schema.field(ix.column).type
        run, keys = build_run(
            store, prefix, ix.column, entries_of(store, prefix, todo, ix.column, t, snap=m)
        )
        covers = _union((f.index_version, f.index_version) for f in todo)
        out[ix.column] = run.model_copy(update={"covers": covers})
        written.extend(keys)
    return out, written
