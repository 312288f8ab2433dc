"""Erasure reaches the index (DESIGN §6b, docs/format.md §3c), whatever the erase's filter.

The splices of an erase or a purge remove known physical positions per file, and hand the
indexed columns' values of exactly those rows, read from the bytes they hold
(:mod:`lethe.erasure.upkeep`, issue 37 item 3); their commit rewrites every piece whose
``[min, max]`` can hold one of those values without the entries that name a removed row.
Other rows sharing a value stay indexed. Entries of such a value that point nowhere live (a
file compacted away, a row a splice already removed) go too: after the erase no referenced
index object holds an erased value except for rows still live in the table. Where no splice
holds the rows, their values are read here (only the pages holding them,
:func:`lethe.reading.filtered.read_positions`), and files leaving whole are scrubbed from
their statistics without a read (:class:`Dropped`). The old pieces join the erasure's
``superseded``: GC treats them like spliced-away data files.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from lethe.catalog.manifest import DataFile, IndexPiece, IndexRun
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import from_json, to_json
from lethe.index.origins import as_array, index_path, origin_positions, origin_removed
from lethe.index.pieces import PIECE_ENTRIES, value_array, write_pieces
from lethe.index.probe import piece_may_hold, read_entries
from lethe.reading.filtered import read_positions
from lethe.reading.reader import FileHandle
from lethe.reading.scan import Projections
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store

__all__ = [
    "Dropped",
    "Erased",
    "ErasedRows",
    "erased_entries",
    "file_values",
    "known_entries",
    "scrub",
    "scrub_rows",
]


@dataclass(slots=True)
class Erased:
    """What an erasure removes from the index on one column: ``values`` (comparable form)
    of the erased rows and ``rows`` (index path -> positions in the index's coordinates)."""

    values: set[Any] = field(default_factory=set)
    rows: dict[str, BitMap64] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ErasedRows:
    """Per indexed column what goes (:class:`Erased`), and the live files the rows were in."""

    columns: dict[str, Erased]
    files: tuple[DataFile, ...] = ()

    def __bool__(self) -> bool:
        return any(e.values for e in self.columns.values())


def erased_entries(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    found: Mapping[str, BitMap64],
) -> ErasedRows:
    """Per index of ``m``: the entries erasing the rows ``found`` (file -> physical positions)
    removes, read from the indexed columns' pages holding those rows."""
    out = {ix.column: Erased() for ix in m.indexes}
    if not out:
        return ErasedRows(out)
    projections = Projections(m)
    files = _note_rows(m, found, out)
    for f in files:
        h = FileHandle(store, object_key(prefix, f.path), f)
        for c, vals in file_values(h, m, list(out), found[f.path], projections).items():
            out[c].values.update(vals)
    return ErasedRows(out, tuple(files))


def _note_rows(
    m: Snapshot, found: Mapping[str, BitMap64], out: Mapping[str, Erased]
) -> list[DataFile]:
    """Record in every column's ``out`` the index positions of the rows ``found`` (file ->
    physical positions) names; the files of ``m`` holding some, in path order."""
    files: list[DataFile] = []
    for path in sorted(found):
        f, bm = m.file(path), found[path]
        if f is None or not bm:
            continue
        files.append(f)
        ipath, ipos = index_path(f), origin_positions(f, bm)
        for e in out.values():
            e.rows.setdefault(ipath, BitMap64()).update(ipos)
    return files


def file_values(
    h: FileHandle,
    m: Snapshot,
    columns: list[str],
    at: BitMap64,
    projections: Projections | None = None,
) -> dict[str, set[Any]]:
    """Per column of ``m``'s schema, the distinct non-null values (comparable form) of the
    file ``h`` at the physical positions ``at``: only the pages holding them are read,
    through ``h`` (a splice hands a handle over the bytes it holds: issue 37 item 3)."""
    f, schema = h.file, m.arrow_schema()
    p = (projections or Projections(m)).of(f)  # an older schema's file: its names, by id
    p = p.within(h.tail().schema) if p is not None and f.file_names else p
    got = (
        read_positions(h, columns, at)
        if p is None
        else p.apply(read_positions(h, p.file_columns(columns), at), columns)
    )
    out: dict[str, set[Any]] = {}
    for c in columns:
        t = schema.field(c).type
        uniq = pc.unique(got.column(c).drop_null().cast(t))
        out[c] = {from_json(to_json(s), t) for s in uniq}
    return out


def known_entries(
    m: Snapshot, found: Mapping[str, BitMap64], values: Mapping[str, Iterable[Any]]
) -> ErasedRows:
    """:func:`erased_entries` when the values are known already (a splice decoded them:
    issue 37 item 3): ``values`` is indexed column -> the values of the rows ``found``
    (file -> physical positions) holds. Reads nothing."""
    out = {ix.column: Erased() for ix in m.indexes}
    files = _note_rows(m, found, out)
    for c, vals in values.items():
        if c in out:
            out[c].values.update(vals)
    return ErasedRows(out, tuple(files))


class _Live:
    """Index paths of the live files of ``m`` with the origin positions already removed
    (loaded on first need: most entries of an erased value name a file the erase read)."""

    def __init__(self, m: Snapshot, known: Iterable[DataFile]) -> None:
        self.m = m
        self.paths: dict[str, BitMap64] = {index_path(f): origin_removed(f) for f in known}
        self.complete = False

    def removed(self, path: str) -> BitMap64 | None:
        """Positions of ``path`` no live row has (None: no live file has this index path)."""
        if path not in self.paths and not self.complete:
            self.paths.update({index_path(f): origin_removed(f) for f in self.m.files})
            self.complete = True
        return self.paths.get(path)


def _doomed(
    entries: pa.Table, e: Erased, value_set: pa.Array, live: _Live, dead: frozenset[str]
) -> np.ndarray:
    """The mask of the entries of one piece that go (per file named, not per entry: a
    purge hits many entries of few files): entries of an erased value naming a row no live
    file holds, and every entry naming a ``dead`` path."""
    out = np.zeros(entries.num_rows, dtype=bool)
    if dead:
        named = pa.array(sorted(dead), type=pa.string())
        gone = pc.is_in(entries.column("file").cast(pa.string()), value_set=named)
        out |= gone.to_numpy(zero_copy_only=False)
    if not len(value_set):
        return out
    hit = pc.is_in(entries.column("value"), value_set=value_set).to_numpy(zero_copy_only=False)
    if not hit.any():
        return out
    at = np.flatnonzero(hit)
    files = (
        pc.take(entries.column("file"), pa.array(at))
        .cast(pa.string())
        .to_numpy(zero_copy_only=False)
    )
    pos = entries.column("pos").to_numpy()[at]
    for p in np.unique(files):
        mine = files == p
        gone_pos = live.removed(str(p))
        if gone_pos is None:
            out[at[mine]] = True
            continue
        doomed = gone_pos | e.rows.get(str(p), BitMap64())
        out[at[mine]] |= np.isin(pos[mine], as_array(doomed))
    return out


@dataclass(frozen=True, slots=True)
class Dropped:
    """Files leaving the table whole (a retention sweep's drop): every index entry naming
    one goes, without reading the file; only pieces whose ``[min, max]`` meets the file's
    statistics of the column are read. Runs covering no file left live are skipped (the
    commit drops them whole: :func:`dead_run_pieces`)."""

    files: tuple[DataFile, ...]
    live_versions: frozenset[int]
    cache: dict[tuple[str, str], Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, m: Snapshot, files: Iterable[DataFile]) -> Dropped:
        out = tuple(files)
        gone = {f.path for f in out}
        live = frozenset(f.index_version for f in m.files if f.path not in gone)
        return cls(out, live)

    def run_lives(self, run: IndexRun) -> bool:
        return any(run.covers_version(v) for v in self.live_versions)

    def paths(self, run: IndexRun) -> frozenset[str]:
        """Index paths of the dropped files ``run`` covers."""
        return frozenset(index_path(f) for f in self.files if run.covers_version(f.index_version))

    def may_name(self, piece: IndexPiece, run: IndexRun, column: str, t: pa.DataType) -> bool:
        """Whether ``piece`` (of ``run``) may hold an entry of a dropped file (by its stats:
        one bisection over the dropped files' ranges, however many there are)."""
        lo, hi = from_json(piece.min, t), from_json(piece.max, t)
        spans = self._spans(run, column, t)
        if lo is None or hi is None or spans is None:
            return True
        lows, tops = spans
        i = bisect.bisect_right(lows, hi)  # the files whose min is at most the piece's max
        return bool(i) and tops[i - 1] >= lo

    def _spans(
        self, run: IndexRun, column: str, t: pa.DataType
    ) -> tuple[list[Any], list[Any]] | None:
        """The dropped files ``run`` covers as their ``column`` minimums, sorted, and the
        running maximum of their maximums (None: a file without bounds, read every piece)."""
        k = (run.id, column)
        if k not in self.cache:
            got: list[tuple[Any, Any]] = []
            for f in (f for f in self.files if run.covers_version(f.index_version)):
                st = f.columns.get(column)
                if st is not None and st.min is None and f.rows and st.null_count == f.rows:
                    continue  # every value null: no entry (nulls are not indexed)
                if st is None or st.min is None or st.max is None:
                    self.cache[k] = None
                    return None
                got.append((from_json(st.min, t), from_json(st.max, t)))
            try:
                got.sort(key=lambda s: s[0])
                self.cache[k] = ([a for a, _ in got], list(accumulate((b for _, b in got), max)))
            except TypeError:
                self.cache[k] = None
        got_spans: tuple[list[Any], list[Any]] | None = self.cache[k]
        return got_spans


def scrub(
    store: S3Store, prefix: str, m: Snapshot, erased: ErasedRows, dropped: Dropped | None = None
) -> tuple[dict[str, tuple[IndexPiece, ...]], list[str]]:
    """Rewrite every piece of ``m`` holding an entry ``erased`` removes (only pieces whose
    ``[min, max]`` can hold an erased value are read), or an entry of a ``dropped`` file.
    Returns old piece path -> its replacement pieces (none if emptied), and the keys
    written."""
    out: dict[str, tuple[IndexPiece, ...]] = {}
    written: list[str] = []
    schema = m.arrow_schema()
    live = _Live(m, erased.files)
    for ix in m.indexes:
        e = erased.columns.get(ix.column) or Erased()
        t = schema.field(ix.column).type
        wanted = sorted(e.values)
        value_set = value_array(wanted, t)
        for run in ix.runs:
            if dropped is not None and not dropped.run_lives(run):
                continue  # the commit drops this run whole
            dead = dropped.paths(run) if dropped is not None else frozenset()
            for piece in run.pieces:
                by_value = bool(wanted) and piece_may_hold(piece, t, wanted)
                by_file = (
                    dropped is not None
                    and bool(dead)
                    and dropped.may_name(piece, run, ix.column, t)
                )
                if not (by_value or by_file):
                    continue
                key = object_key(prefix, piece.path)
                entries = read_entries(store, key, piece)  # what a probe read: not again
                doomed = _doomed(entries, e, value_set, live, dead if by_file else frozenset())
                if not doomed.any():
                    continue
                keep = entries.filter(pa.array(~doomed))
                new, keys = write_pieces(store, prefix, ix.column, keep, PIECE_ENTRIES)
                out[piece.path] = new
                written.extend(keys)
    return out, written


def scrub_rows(
    store: S3Store,
    prefix: str,
    m: Snapshot,
    found: Mapping[str, BitMap64],
    dropped: Iterable[DataFile] = (),
    *,
    values: Mapping[str, Iterable[Any]] | None = None,
) -> tuple[dict[str, tuple[IndexPiece, ...]], list[str]]:
    """:func:`scrub` for the rows ``found`` (file -> physical positions) that splices
    remove, and for the files ``dropped`` whole, in one pass over the pieces whatever the
    number of files (the values of every file in ``found`` are read first, then each piece
    that can hold one is read once; a dropped file is never read). ``values``: indexed
    column -> the values of the rows ``found``, known already (the splices read them from
    the bytes they hold: no data file read here, issue 37 item 3)."""
    whole = tuple(dropped)
    if not m.indexes or not (any(found.values()) or whole):
        return {}, []
    erased = (
        known_entries(m, found, values)
        if values is not None
        else erased_entries(store, prefix, m, found)
    )
    if not erased and not whole:
        return {}, []
    return scrub(store, prefix, m, erased, Dropped.of(m, whole) if whole else None)
