"""Writing data files: the one Parquet layout every Lethe writer produces.

zstd, statistics, page index, a bloom filter on the key column, row groups of about
``row_group_bytes`` and files of about ``target_file_bytes``; sorted-by-key files declare
``sorting_columns``. Files stream to S3 through a multipart writer (never buffered whole).
:func:`describe` turns a Parquet footer into manifest entries (also for foreign files).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import ColumnStats, DataFile, RowGroupInfo
from lethe.catalog.schemas import same_but_nullability, schema_diff
from lethe.catalog.values import JsonScalar, is_orderable, to_json
from lethe.parquet.footer import row_group_span
from lethe.progress import Progress, Tracker, track
from lethe.storage.layout import data_key, object_key
from lethe.storage.store import S3Store

__all__ = [
    "WriteOptions",
    "describe",
    "new_data_path",
    "only_tighter",
    "row_group_range",
    "write_files",
]


@dataclass(frozen=True, slots=True)
class WriteOptions:
    key: str
    target_file_bytes: int = 256 << 20
    row_group_bytes: int = 16 << 20
    compression: str = "zstd"
    compression_level: int | None = None
    bloom_fpp: float = 0.01
    part_bytes: int = 16 << 20
    data_page_size: int | None = None  # pyarrow's default: 1 MiB
    data_page_version: Literal["1.0", "2.0"] = "1.0"
    max_rows_per_page: int | None = None  # pyarrow's default: 20,000
    dictionary_pagesize_limit: int | None = None  # pyarrow's default: 1 MiB
    use_dictionary: bool = True
    """Dictionary-encode columns; True leaves out the columns whose values hardly repeat
    (sampled from the first batch, see :func:`dictionary_columns`)."""
    write_page_index: bool = True
    schema_id: int | None = None  # the table schema the files are written under (None: 0)


def new_data_path(now: datetime | None = None) -> str:
    """Table-relative path of a new data file: ``data/YYYY/MM/DD/HH/<uuid>.parquet``."""
    return data_key(now)


def row_group_range(rg: pq.RowGroupMetaData) -> tuple[int, int]:
    """``[start, end)`` of a row group by :func:`~lethe.parquet.footer.row_group_span` (from
    its column chunks, not ``RowGroup.file_offset``), read from pyarrow's metadata."""
    if not rg.num_columns:
        return 4, 0
    r = row_group_span(rg.column(i) for i in range(rg.num_columns))
    return (r.start or 4), r.end


def _stat_json(v: Any, t: pa.DataType) -> JsonScalar:
    if v is None:
        return None
    try:
        return to_json(pa.scalar(v, type=t))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def describe(
    md: pq.FileMetaData, schema: pa.Schema, key: str
) -> tuple[tuple[RowGroupInfo, ...], dict[str, ColumnStats]]:
    """Row-group entries (byte ranges, key stats) and file-level column stats of a footer.

    Stats come from the footer's statistics, which for Lethe's own files are exact; a column
    without usable statistics gets none (and is never pruned on).
    """
    top = {schema.field(i).name: schema.field(i).type for i in range(len(schema))}
    leaf_index: dict[str, int] = {}
    for i in range(md.num_columns):
        path = md.schema.column(i).path
        if path in top and is_orderable(top[path]):
            leaf_index[path] = i
    groups: list[RowGroupInfo] = []
    agg: dict[str, list[Any]] = {c: [None, None, 0, True] for c in leaf_index}
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        start, end = row_group_range(rg) if rg.num_columns else (4, 4)
        kmin: JsonScalar = None
        kmax: JsonScalar = None
        for col, i in leaf_index.items():
            st = rg.column(i).statistics
            t = top[col]
            if st is None or not st.has_min_max:
                if rg.num_rows and not (st is not None and st.null_count == rg.num_rows):
                    agg[col][3] = False  # unknown bounds somewhere: no file-level stats
                if st is not None and st.has_null_count:
                    agg[col][2] += st.null_count
                continue
            lo, hi = _stat_json(st.min, t), _stat_json(st.max, t)
            if lo is None or hi is None:
                agg[col][3] = False
                continue
            a = agg[col]
            from lethe.catalog.values import from_json

            if a[0] is None or from_json(lo, t) < from_json(a[0], t):
                a[0] = lo
            if a[1] is None or from_json(hi, t) > from_json(a[1], t):
                a[1] = hi
            if st.has_null_count:
                a[2] += st.null_count
            if col == key:
                kmin, kmax = lo, hi
        groups.append(
            RowGroupInfo(
                rows=rg.num_rows, offset=start, length=end - start, key_min=kmin, key_max=kmax
            )
        )
    rows = md.num_rows
    cols = {  # an all-null column's stats say so (a retention sweep need not read it)
        c: ColumnStats(min=a[0], max=a[1], null_count=a[2])
        for c, a in agg.items()
        if a[3] and (a[0] is not None or (rows and a[2] == rows))
    }
    return tuple(groups), cols


def _batches(
    data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    if isinstance(data, pa.Table):
        yield from data.to_batches(max_chunksize=64 * 1024)
    else:
        yield from data


def _is_sorted(arr: pa.Array) -> bool:
    if len(arr) < 2:
        return True
    if arr.null_count:
        return False
    try:
        a = arr.slice(0, len(arr) - 1)
        b = arr.slice(1)
        return bool(pc.all(pc.less_equal(a, b)).as_py())
    except pa.ArrowNotImplementedError:
        return False


class _FileSink:
    """One data file being written: Parquet writer over a streaming multipart upload."""

    def __init__(
        self,
        store: S3Store,
        prefix: str,
        schema: pa.Schema,
        opts: WriteOptions,
        sorted_key: bool,
        rg_rows: int,
        dictionary: bool | list[str],
    ):
        self.path = new_data_path()
        self.key = object_key(prefix, self.path)
        self.out = store.open_writer(self.key, part_bytes=opts.part_bytes)
        key_idx = schema.get_field_index(opts.key)
        self.writer = pq.ParquetWriter(
            pa.PythonFile(self.out, mode="w"),
            schema,
            compression=opts.compression,
            compression_level=opts.compression_level,
            write_statistics=True,
            write_page_index=opts.write_page_index,
            data_page_size=opts.data_page_size,
            data_page_version=opts.data_page_version,
            max_rows_per_page=opts.max_rows_per_page,
            dictionary_pagesize_limit=opts.dictionary_pagesize_limit,
            use_dictionary=dictionary,
            bloom_filter_options={opts.key: {"ndv": max(1024, rg_rows), "fpp": opts.bloom_fpp}},
            sorting_columns=[pq.SortingColumn(key_idx)] if sorted_key else None,
            store_schema=True,
        )
        self.rows = 0
        self.sorted = sorted_key
        self.last_key: Any = None

    def bytes_written(self) -> int:
        return self.out.tell()

    def write_group(self, t: pa.Table, key: str, group_sorted: bool) -> None:
        self.writer.write_table(t, row_group_size=max(1, t.num_rows))
        self.rows += t.num_rows
        if self.sorted and t.num_rows:
            col = t.column(key)
            first = col[0].as_py()
            if not group_sorted or (
                self.last_key is not None and (first is None or first < self.last_key)
            ):
                self.sorted = False
            self.last_key = col[t.num_rows - 1].as_py()

    def close(self) -> tuple[str, pq.FileMetaData, int, str]:
        self.writer.close()
        md = self.writer.writer.metadata
        self.out.close()
        assert self.out.etag is not None
        return self.path, md, self.out.tell(), self.out.etag

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        self.out.abort()


def write_files(
    store: S3Store,
    prefix: str,
    data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch],
    schema: pa.Schema,
    opts: WriteOptions,
    *,
    progress: Progress | None = None,
    task: str = "write",
) -> list[DataFile]:
    """Write ``data`` as data files under ``prefix`` and describe them for the manifest.

    Row groups are cut when their estimated encoded size reaches ``row_group_bytes`` (the
    estimate adapts to the measured compression ratio); a file is closed when the next group
    would push it past ``target_file_bytes``. Sortedness by key is detected per file.
    ``progress`` hears of the rows written, one row group at a time, as ``task`` (its total
    is known for a ``pa.Table``; :mod:`lethe.progress`).
    """
    total = data.num_rows if isinstance(data, pa.Table) else None
    tracker = track(progress, task, total=total, unit="rows")
    cutter = _Cutter(store, prefix, schema, opts, tracker)
    try:
        for b in _batches(data):
            b = _as_table_schema(b, schema)
            if b.num_rows:
                cutter.add(b)
        files = cutter.finish()
    except BaseException:
        cutter.abort()
        raise
    tracker.finish()
    return files


def _as_table_schema(b: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``b`` labelled with the table schema: field metadata aside, they must be equal, except
    that a column the data declares required may go into a nullable column (a table adopted
    from files whose writer declared every column nullable takes rows with a required key),
    and a column the data declares nullable goes into a required one when it holds no null
    (``pa.table({...})`` declares every field nullable); nulls there are refused, counted."""
    if b.schema.equals(schema, check_metadata=True):
        return b
    if not b.schema.equals(schema, check_metadata=False) and not only_tighter(b.schema, schema):
        loose = _nullable_into_required(b, schema)
        if loose is None:
            raise errors.SchemaMismatch(schema_diff(b.schema, schema))
        nulls = {n: b.column(n).null_count for n in loose if b.column(n).null_count}
        if nulls:
            raise errors.SchemaMismatch(
                "data does not match the table schema: "
                + "; ".join(f"column {n!r} holds {k} null(s)" for n, k in nulls.items())
                + " where the table requires values (fill or drop those rows)"
            )
    return pa.RecordBatch.from_arrays(b.columns, schema=schema)


def only_tighter(got: pa.Schema, want: pa.Schema) -> bool:
    """Whether ``got`` differs from ``want`` only by top-level columns that ``got`` declares
    required where ``want`` allows nulls (safe: no value changes, none is dropped)."""
    return got.names == want.names and all(
        g.type.equals(w.type) and (g.nullable == w.nullable or (w.nullable and not g.nullable))
        for g, w in zip(got, want, strict=True)
    )


def _nullable_into_required(b: pa.RecordBatch, want: pa.Schema) -> list[str] | None:
    """The columns ``b`` declares nullable where ``want`` requires values, when nullability
    is the only difference; else None."""
    if not same_but_nullability(b.schema, want):
        return None
    return [g.name for g, w in zip(b.schema, want, strict=True) if g.nullable and not w.nullable]


class _Cutter:
    """The state of one :func:`write_files`: batches pending for the next row group, the open
    file, the files written, and the encoded-bytes-per-memory-byte estimate."""

    def __init__(
        self, store: S3Store, prefix: str, schema: pa.Schema, opts: WriteOptions, tracker: Tracker
    ):
        self.store, self.prefix, self.schema, self.opts = store, prefix, schema, opts
        self.tracker = tracker
        self.files: list[DataFile] = []
        self.sink: _FileSink | None = None
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.ratio = 0.35  # encoded bytes per in-memory byte; refined after each group
        self.mem_per_row: float | None = None
        self.dictionary: bool | list[str] = opts.use_dictionary

    def add(self, b: pa.RecordBatch) -> None:
        """Queue a (non-empty) batch; write every row group it completes."""
        if self.mem_per_row is None:
            self.mem_per_row = max(1.0, b.nbytes / b.num_rows)
            if self.opts.use_dictionary:
                self.dictionary = dictionary_columns(b)
            self.ratio = _sample_ratio(b, self.schema, self.opts, self.dictionary)
        self.pending.append(b)
        self.pending_rows += b.num_rows
        while self.pending_rows >= self._rg_target_rows():
            self._flush(self._rg_target_rows())

    def finish(self) -> list[DataFile]:
        """Write the last row group, close the last file; the files written."""
        if self.pending_rows:
            self._flush(self.pending_rows)
        if self.sink is not None:
            self.files.append(self._close(self.sink))
            self.sink = None
        return self.files

    def abort(self) -> None:
        """Abort the open file's upload (the closed ones are the caller's to remove)."""
        if self.sink is not None:
            self.sink.abort()

    def _rg_target_rows(self) -> int:
        assert self.mem_per_row is not None
        return max(1, int(self.opts.row_group_bytes / max(1e-9, self.mem_per_row * self.ratio)))

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` pending rows as one row group (closing the open file first
        when the group would push it past the target size)."""
        opts = self.opts
        t = pa.Table.from_batches(self.pending, schema=self.schema)
        group, rest = t.slice(0, rows), t.slice(rows)
        sorted_key = _is_sorted(group.column(opts.key).combine_chunks()) if group.num_rows else True
        if self.sink is not None:
            est = group.nbytes * self.ratio
            if self.sink.bytes_written() + est > opts.target_file_bytes * 1.05 and self.sink.rows:
                self.files.append(self._close(self.sink))
                self.sink = None
        if self.sink is None:
            self.sink = _FileSink(
                self.store, self.prefix, self.schema, opts, sorted_key, rows, self.dictionary
            )
        before = self.sink.bytes_written()
        self.sink.write_group(group, opts.key, sorted_key)
        written = self.sink.bytes_written() - before
        self.tracker.advance(group.num_rows)
        if group.nbytes and written > 0:
            self.ratio = 0.5 * self.ratio + 0.5 * (written / group.nbytes)
        self.pending = rest.to_batches() if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def _close(self, s: _FileSink) -> DataFile:
        path, md, size, etag = s.close()
        groups, cols = describe(md, self.schema, self.opts.key)
        return DataFile(
            path=path,
            size=size,
            etag=etag,
            rows=md.num_rows,
            row_groups=groups,
            columns=cols,
            added_version=0,
            sorted_by_key=s.sorted,
            schema_id=self.opts.schema_id,
        )


DICTIONARY_SAMPLE_ROWS = 65_536
"""Fewer rows in the first batch (at most 64Ki rows of a table) than this: every column
dictionary-encoded (a small write gains little, and keeps the layout it always had)."""
DICTIONARY_MAX_DISTINCT = 0.9
"""A column whose sample is more distinct than this share of its values gets no dictionary."""
VARIABLE_SAMPLE_ROWS = 8_192
"""Rows of a string or binary column judged (hashing 64Ki long values cost more CPU than the
dictionary decision saves: 0.15 s of a 1.6M-row write of 200-byte strings)."""


def dictionary_columns(b: pa.RecordBatch) -> bool | list[str]:
    """The columns worth a dictionary, judged on the first batch ``b`` (True: all of them).

    A column whose values in ``b`` are nearly all distinct (ids, timestamps, measurements)
    gains nothing from a dictionary: the writer would hash every value of each row group
    into a dictionary page (as large as the plain values) before falling back to plain
    encoding. Nested columns, or a batch too small to judge, keep the default.

    Example:
        >>> b = pa.record_batch({"id": list(range(70_000)), "kind": ["a", "b"] * 35_000})
        >>> dictionary_columns(b)
        ['kind']
        >>> dictionary_columns(b.slice(0, 10))
        True
    """
    if b.num_rows < DICTIONARY_SAMPLE_ROWS or any(pa.types.is_nested(t) for t in b.schema.types):
        return True
    keep = []
    for name, whole in zip(b.schema.names, b.columns, strict=True):
        t = whole.type
        variable = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
        variable = variable or pa.types.is_large_binary(t)
        col = whole.slice(0, VARIABLE_SAMPLE_ROWS) if variable else whole
        values = len(col) - col.null_count
        try:
            distinct = pc.count_distinct(col).as_py()
        except pa.ArrowNotImplementedError:
            distinct = 0
        if distinct <= DICTIONARY_MAX_DISTINCT * values:
            keep.append(name)
    return True if len(keep) == b.num_columns else keep


def _sample_ratio(
    b: pa.RecordBatch, schema: pa.Schema, opts: WriteOptions, dictionary: bool | list[str]
) -> float:
    """Encoded bytes per in-memory byte, measured on a sample of the first batch."""
    import io

    sample = pa.Table.from_batches([b.slice(0, min(b.num_rows, 4096))], schema=schema)
    if not sample.nbytes:
        return 1.0
    buf = io.BytesIO()
    pq.write_table(
        sample,
        buf,
        compression=opts.compression,
        compression_level=opts.compression_level,
        use_dictionary=dictionary,
    )
    return min(2.0, max(0.01, buf.tell() / float(sample.nbytes)))
