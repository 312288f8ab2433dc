"""``lethe verify`` for secondary indexes (docs/format.md §3c).

Shallow: every index piece a snapshot references exists with its recorded size and ETag; a
run's ``covers`` are well-formed ranges of committed versions; its pieces are in value order
with ``min <= max``. Deep: every piece is decoded (entry count, order and bounds as the
root records them), and for every live file the index covers the entries naming it
(through its origin, if spliced) are exactly its rows' non-null values at their positions:
none missing (rows its DV deletes aside: an erasure drops their entries at once), none
pointing at another value or position, and none naming a row a splice removed (erase and
purge scrub the entries of every row their splices remove). Entries naming files that are
no longer live are not problems: readers drop them (compaction and retention drops scrub the
entries of the files they remove, but tables written before that may hold some), and nothing
in a snapshot tells them apart from rows erased out of a file. Problems name objects and
counts, never values.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import ColumnIndex, DataFile, IndexPiece
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import from_json, to_json
from lethe.dv import store as dvstore
from lethe.index.origins import index_path, origin_positions, origin_removed
from lethe.index.runs import entries_of
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store

__all__ = ["IndexCheck", "check_indexes"]


@dataclass(frozen=True, slots=True)
class IndexCheck:
    """What :func:`check_indexes` looked at and found wrong."""

    pieces: int
    entries: int
    problems: tuple[str, ...]


def check_indexes(
    store: S3Store, prefix: str, m: Snapshot, files: list[DataFile], *, deep: bool = False
) -> IndexCheck:
    """Check the indexes of ``m`` (``files``: its live files), see the module docstring."""
    problems: list[str] = []
    pieces = entries = 0
    schema = m.arrow_schema()
    for ix in m.indexes:
        if schema.get_field_index(ix.column) < 0:
            problems.append(f"index on {ix.column!r}: not a column of the table")
            continue
        t = schema.field(ix.column).type
        problems += _check_runs(ix, m.version, t)
        for run in ix.runs:
            for p in run.pieces:
                pieces += 1
                problems += _check_object(store, prefix, p)
        if deep:
            n, found = _check_entries(store, prefix, ix, files, t, m)
            entries += n
            problems += found
    return IndexCheck(pieces, entries, tuple(problems))


def _check_runs(ix: ColumnIndex, version: int, t: pa.DataType) -> list[str]:
    out: list[str] = []
    for run in ix.runs:
        what = f"index run {run.id}"
        if any(not 0 <= lo <= hi <= version for lo, hi in run.covers) or not run.covers:
            out.append(f"{what}: covers {list(run.covers)} are not ranges of versions <= {version}")
        if any(a[1] >= b[0] for a, b in pairwise(run.covers)):
            out.append(f"{what}: covers are not increasing and disjoint")
        bounds = [(from_json(p.min, t), from_json(p.max, t)) for p in run.pieces]
        if any(lo is None or hi is None or lo > hi for lo, hi in bounds):
            out.append(f"{what}: a piece has no or inverted min/max")
        elif any(a[1] > b[0] for a, b in pairwise(bounds)):
            out.append(f"{what}: pieces are not in value order")
    return out


def _check_object(store: S3Store, prefix: str, p: IndexPiece) -> list[str]:
    try:
        info = store.head(object_key(prefix, p.path))
    except errors.NotFound:
        return [f"{p.path}: index piece missing"]
    if info.etag != p.etag or info.size != p.size:
        return [f"{p.path}: ETag/size {info.etag}/{info.size} != manifest {p.etag}/{p.size}"]
    return []


def _read(store: S3Store, prefix: str, p: IndexPiece, t: pa.DataType) -> tuple[pa.Table, list[str]]:
    key = object_key(prefix, p.path)
    try:
        got = pq.read_table(pa.BufferReader(store.get(key, etag=p.etag).body))
    except (errors.LetheError, pa.ArrowException) as e:
        return pa.table({}), [f"{p.path}: index piece unreadable: {type(e).__name__}"]
    if got.schema.names != ["value", "file", "pos"]:
        return pa.table({}), [f"{p.path}: columns {got.schema.names} != value, file, pos"]
    out: list[str] = []
    v = got.column("value")
    if got.num_rows != p.entries:
        out.append(f"{p.path}: {got.num_rows} entries, manifest says {p.entries}")
    elif got.num_rows and (to_json(v[0]) != p.min or to_json(v[-1]) != p.max):
        out.append(f"{p.path}: first/last value differ from the manifest's min/max")
    got = got.cast(pa.schema([("value", t), ("file", pa.string()), ("pos", pa.int64())]))
    order = got.sort_by([("value", "ascending"), ("file", "ascending"), ("pos", "ascending")])
    if not order.equals(got):
        out.append(f"{p.path}: entries are not sorted by (value, file, pos)")
    return got, out


def _check_entries(
    store: S3Store,
    prefix: str,
    ix: ColumnIndex,
    files: list[DataFile],
    t: pa.DataType,
    m: Snapshot | None = None,
) -> tuple[int, list[str]]:
    """Decode every piece of ``ix``; compare the entries of each covered live file with its
    rows (read from its column chunks)."""
    problems: list[str] = []
    parts: list[pa.Table] = []
    for run in ix.runs:
        for p in run.pieces:
            got, found = _read(store, prefix, p, t)
            problems += found
            if got.num_columns:
                parts.append(got)
    if not parts:
        return 0, problems
    every = pa.concat_tables(parts)
    keys = ["value", "file", "pos"]
    for f in (f for f in files if ix.covers(f)):
        want = entries_of(store, prefix, [f], ix.column, t, snap=m)  # by id: any schema
        have = every.filter(pc.equal(every.column("file"), index_path(f)))
        gone = origin_removed(f)
        if gone:  # rows a splice removed: an erasure or purge scrubs their entries
            out = pc.is_in(have.column("pos"), value_set=pa.array(list(gone), pa.int64()))
            stale = pc.sum(out.cast(pa.int64())).as_py() or 0
            if stale:
                problems.append(
                    f"{f.path}: index on {ix.column!r} has {stale} entries naming rows a "
                    f"splice removed from {index_path(f)} (their values must leave the index)"
                )
            have = have.filter(pc.invert(out))
        if f.dv is not None:  # deleted rows need no entry (an erasure drops theirs)
            dv = dvstore.load(store, prefix, f.dv, what=f"DV of {f.path}")
            hidden = origin_positions(f, dv)
            want_live = want.filter(
                pc.invert(
                    pc.is_in(want.column("pos"), value_set=pa.array(list(hidden), pa.int64()))
                )
            )
        else:
            want_live = want
        missing = want_live.join(have, keys, join_type="left anti").num_rows
        wrong = have.join(want, keys, join_type="left anti").num_rows
        if missing or wrong:
            problems.append(
                f"{f.path}: index on {ix.column!r} misses {missing} of its rows and has "
                f"{wrong} entries naming no row of it with that value"
            )
    return every.num_rows, problems
