"""Scan planning over one manifest: which row groups may hold matching rows (pruned by the
segments' summaries, the manifest's file stats, then footer statistics), and the deletion
vectors of one read. Only the segments whose summary can match are loaded.

Operations take ``(store, prefix, manifest)`` rather than the :class:`~lethe.table.Table`
façade, so lower layers (deletes, erase) plan reads without building a table handle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np
import pyarrow as pa

from lethe.catalog.manifest import ColumnStats, DataFile, SegmentSummary
from lethe.catalog.schemas import Projection, field_id, json_value, projection, widen_comparable
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import comparable, from_json
from lethe.dv import store as dvstore
from lethe.reading.filters import Dnf
from lethe.reading.reader import FileHandle, read_row_group
from lethe.storage.layout import object_key
from lethe.storage.objects import io_pool
from lethe.storage.store import S3Store

__all__ = ["DVCache", "Projections", "candidate_files", "plan", "plan_files", "reader_of"]


class Projections:
    """How each file of a snapshot reads as its schema (:func:`lethe.catalog.schemas.projection`
    from the schema the file was written under): None for a file written under it."""

    def __init__(self, snap: Snapshot) -> None:
        self.schema = snap.arrow_schema()
        self._current = snap.current_schema_id
        self._history = dict(snap.schema_history()) if snap.manifest.schemas else {}
        self._memo: dict[int, Projection | None] = {}
        self._parts: dict[tuple[int, tuple[tuple[str, Any], ...]], Projection] = {}
        fields = [{f.name: (field_id(f), f.type) for f in s} for s in self._history.values()]
        # columns with the same id and type in every schema: segment summaries prune on them
        self.stable = (
            {
                f.name
                for f in self.schema
                if all(m.get(f.name) == fields[-1].get(f.name) for m in fields)
            }
            if fields
            else set(self.schema.names)
        )

    def file_schema(self, f: DataFile) -> pa.Schema:
        """The schema ``f`` was written under."""
        return self._history.get(f.schema_id or 0, self.schema)

    def of(self, f: DataFile) -> Projection | None:
        sid = f.schema_id or 0
        if f.partition or f.file_names:  # adopted in place: columns by name (some
            return self._partitioned(f)  # may be missing), partition values as constants
        if sid == self._current or not self._history:
            return None
        if sid not in self._memo:
            p = projection(self._history[sid], self.schema)
            self._memo[sid] = None if p.identity else p
        return self._memo[sid]

    def _partitioned(self, f: DataFile) -> Projection:
        sid = f.schema_id or 0
        mk = (sid, tuple(sorted(f.partition.items(), key=lambda kv: kv[0])))
        if mk in self._parts:
            return self._parts[mk]
        plain = f.model_copy(update={"partition": {}})
        base = None if sid == self._current or not self._history else self.of(plain)
        sources = dict(base.sources) if base is not None else {x.name: x for x in self.schema}
        constants = {}
        for n, v in f.partition.items():
            sources[n] = None
            constants[n] = json_value(v, self.schema.field(n).type)
        self._parts[mk] = Projection(self.schema, sources, constants)
        return self._parts[mk]


def reader_of(snap: Snapshot, columns: list[str]) -> Callable[[FileHandle, int], pa.Table]:
    """A read of ``columns`` (the snapshot's names) of one row group of any of its files:
    the file's own columns by id, renamed, widened, missing ones as default or null."""
    projections = Projections(snap)

    def read(h: FileHandle, rg: int) -> pa.Table:
        p = projections.of(h.file)
        tail = h.tail()
        p = p.within(tail.schema) if p is not None and h.file.file_names else p
        cols = columns if p is None else p.file_columns(columns)
        t = read_row_group(h, tail, rg, cols, h.prefetch(tail, rg, cols))
        return t if p is None else p.apply(t, columns)

    return read


def _projected_lookup(f: DataFile, p: Projection, schema: pa.Schema) -> Any:
    """Stats of ``f`` under the table's names, decoded by the file's own types, then widened."""

    def lookup(col: str) -> tuple[Any, Any, int | None] | None:
        if col in p.constants:  # a partition value: its stats are min = max = the value
            got: tuple[Any, Any, int | None] | None = _stats_lookup(f.columns, schema)(col)
            return got
        src = p.sources.get(col)
        st = f.columns.get(src.name) if src is not None else None
        if src is None or st is None:
            return None
        t = schema.field(col).type
        lo, hi = from_json(st.min, src.type), from_json(st.max, src.type)
        return widen_comparable(lo, src.type, t), widen_comparable(hi, src.type, t), st.null_count

    return lookup


def _stats_lookup(columns: Mapping[str, ColumnStats], schema: pa.Schema) -> Any:
    def lookup(col: str) -> tuple[Any, Any, int | None] | None:
        st = columns.get(col)
        if st is None:
            return None
        t = schema.field(col).type
        return from_json(st.min, t), from_json(st.max, t), st.null_count

    return lookup


def _file_lookup(f: DataFile, schema: pa.Schema, projections: Projections) -> Any:
    p = projections.of(f)
    return _stats_lookup(f.columns, schema) if p is None else _projected_lookup(f, p, schema)


def candidate_files(
    manifest: Snapshot, dnf: Dnf | None, *, physical: bool = False
) -> list[DataFile]:
    """Files of ``manifest`` that may hold rows matching ``dnf``, loading only the segments
    whose summary can match (live rows only unless ``physical``)."""
    schema = manifest.arrow_schema()
    projections = Projections(manifest)

    def keep(s: SegmentSummary) -> bool:
        if s.files == 0 or (s.live_rows == 0 and not physical):
            return False
        columns = {c: st for c, st in s.columns.items() if c in projections.stable}
        return dnf is None or dnf.may_match(_stats_lookup(columns, schema))

    return [
        f
        for f in manifest.files_where(keep)
        if (physical or f.live_rows > 0)
        and (dnf is None or dnf.may_match(_file_lookup(f, schema, projections)))
    ]


def plan(
    store: S3Store, prefix: str, manifest: Snapshot, dnf: Dnf | None, *, physical: bool = False
) -> list[tuple[FileHandle, int, int]]:
    """``(file, row group, first row position)`` that may hold rows matching ``dnf``.

    Files are pruned by manifest stats, row groups by the manifest's key stats and, for
    other columns, by the footer's row-group statistics. Files whose rows are all
    deleted are skipped unless ``physical`` (an erasure looks for rows still in files).
    """
    return plan_files(
        store, prefix, manifest, candidate_files(manifest, dnf, physical=physical), dnf
    )


def plan_files(
    store: S3Store, prefix: str, manifest: Snapshot, files: list[DataFile], dnf: Dnf | None
) -> list[tuple[FileHandle, int, int]]:
    """:func:`plan` over the given candidate ``files`` (row groups pruned by stats)."""
    schema = manifest.arrow_schema()
    key = manifest.key
    out: list[tuple[FileHandle, int, int]] = []
    other_cols = [c for c in (dnf.columns if dnf else []) if c != key]
    projections = Projections(manifest)
    for f in files:
        h = FileHandle(store, object_key(prefix, f.path), f)
        tail = h.tail() if (dnf is not None and other_cols) else None
        first = 0
        for i, rg in enumerate(f.row_groups):
            start = first
            first += rg.rows
            if rg.rows == 0:
                continue
            if dnf is not None:
                md = tail.arrow.row_group(i) if tail else None
                lookup = _RowGroupStats(schema, key, rg, md, projections.of(f))
                if not dnf.may_match(lookup):
                    continue
            out.append((h, i, start))
    return out


class _RowGroupStats:
    """Min/max of one row group: the key from the manifest, other columns from the footer."""

    def __init__(
        self, schema: pa.Schema, key: str, rg: Any, md: Any, p: Projection | None = None
    ) -> None:
        self.schema, self.key, self.rg, self.md, self.p = schema, key, rg, md, p

    def __call__(self, col: str) -> tuple[Any, Any, int | None] | None:
        if col == self.key:  # the key never changes name or type
            if self.rg.key_min is None:
                return None
            t = self.schema.field(col).type
            return from_json(self.rg.key_min, t), from_json(self.rg.key_max, t), None
        if self.md is None:
            return None
        t = ft = self.schema.field(col).type
        name: str | None = col
        if self.p is not None:  # the file's own name and type of the column
            name, ft = self.p.file_column(col), self.p.file_type(col) or t
        for j in range(self.md.num_columns):
            c = self.md.column(j)
            if name is None or c.path_in_schema != name:
                continue
            st = c.statistics
            if st is None or not st.has_min_max:
                return None
            try:
                lo, hi = comparable(st.min, ft), comparable(st.max, ft)
            except (TypeError, ValueError, pa.ArrowException):
                return None
            return widen_comparable(lo, ft, t), widen_comparable(hi, ft, t), st.null_count
        return None


class DVCache:
    """Deletion vectors of one read, loaded once per file (and DV: a file's DV changes from
    version to version; a cache serves the reads of one manifest).

    :meth:`prefetch` starts the loads of the files a read will open on the I/O pool, so a
    DV's GET overlaps the data's instead of following it (on S3, one round trip less for a
    lookup or a scan of a file with deletes); blobs of one container come in one ranged GET
    per dense span (:func:`lethe.dv.store.spans`, the rule of every DV read: a delete writes
    the DVs of every file it touches into one container). Files not prefetched load on first
    use, in the caller's thread.
    """

    def __init__(self, store: S3Store, prefix: str) -> None:
        self._store, self._prefix = store, prefix
        self._loads: dict[tuple[Any, ...], Future[Any]] = {}
        self._lock = threading.Lock()

    def prefetch(self, files: Iterable[DataFile]) -> None:
        """Start loading the DVs of ``files`` (those that have one) in the background, the
        blobs of a container by :func:`lethe.dv.store.spans` (one GET per dense span)."""
        todo: dict[tuple[Any, ...], tuple[DataFile, Future[Any]]] = {}
        with self._lock:
            for f in files:
                if f.dv is None or _key(f) in self._loads:
                    continue
                fut: Future[Any] = Future()
                self._loads[_key(f)] = fut
                todo[_key(f)] = (f, fut)
        for f, fut in todo.values():
            assert f.dv is not None
            if f.dv.inline is not None or f.dv.container is None:
                io_pool().submit(_settle, [(f, fut)], self._load)
        refs = {k: f.dv for k, (f, _) in todo.items() if f.dv is not None}
        for span in dvstore.spans(refs):
            io_pool().submit(self._load_span, span, [todo[k] for k in span.names])

    def _load_span(
        self, span: dvstore.Span[tuple[Any, ...]], files: list[tuple[DataFile, Future[Any]]]
    ) -> None:
        """One ranged GET of ``span``; each file's DV decoded from it."""
        try:
            data = span.read(self._store, self._prefix)
        except BaseException as e:
            for _, fut in files:
                fut.set_exception(e)
            return

        def decode(f: DataFile) -> Any:
            assert f.dv is not None
            return _decoded(f, span.blob(data, f.dv))

        _settle(files, decode)

    def bitmap(self, f: DataFile) -> Any:
        if f.dv is None:
            return None
        with self._lock:
            fut = self._loads.get(_key(f))
            mine = fut is None
            if mine:
                fut = self._loads[_key(f)] = Future()
        assert fut is not None
        if mine:
            _settle([(f, fut)], self._load)
        return fut.result()

    def _load(self, f: DataFile) -> Any:
        assert f.dv is not None
        return _decoded(f, dvstore.blob_bytes(self._store, self._prefix, f.dv))

    def keep_mask(self, f: DataFile, start: int, n: int) -> pa.Array | None:
        """Arrow mask of rows ``[start, start + n)`` of ``f``: True = kept; None when the
        DV deletes none of them."""
        bm = self.bitmap(f)
        if bm is None or not bm.range_cardinality(start, start + n):
            return None
        from lethe.dv.blob import keep_mask

        # packed here: pa.array over numpy booleans costs ~150x more (0.7 ms for 90k rows)
        bits = np.packbits(keep_mask(bm, start, n), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])


def _decoded(f: DataFile, blob: bytes) -> Any:
    """``f``'s DV from its blob bytes, checked against the manifest."""
    assert f.dv is not None
    return dvstore.checked(blob, f.dv, what=f"DV of {f.path}")


def _settle(files: list[tuple[DataFile, Future[Any]]], load: Callable[[DataFile], Any]) -> None:
    """Resolve each file's future with ``load(file)`` or the error it raised."""
    for f, fut in files:
        try:
            fut.set_result(load(f))
        except BaseException as e:
            fut.set_exception(e)


def _key(f: DataFile) -> tuple[Any, ...]:
    """A file's DV, identified: its path and where its current blob lives."""
    assert f.dv is not None
    return (f.path, f.dv.container, f.dv.offset, f.dv.crc32, f.dv.cardinality)
