"""Writing index runs (DESIGN §6b): the entries ``(value, file, pos)`` of files, sorted and
written as the pieces of a run; a run over the files a commit adds (:func:`maintain`), over
the live files no run covers (:func:`catch_up`), a Spark task's share of a backfill
(:func:`backfill_task`), and the size-tiered merges (LSM) that bound the runs per index.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import (
    EVOLVED_FORMAT_VERSION,
    ColumnIndex,
    DataFile,
    IndexRun,
    Manifest,
    Operation,
    SchemaVersion,
    TableProperties,
    schema_from_b64,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms.indexes import Merge, check_indexable
from lethe.index.origins import as_array, index_path, origin_positions
from lethe.index.pieces import (
    FILE_TYPE,
    PIECE_ENTRIES,
    empty_entries,
    one_file,
    order,
    piece_key,
    with_file_dictionary,
    write_pieces,
)
from lethe.progress import Progress, track
from lethe.reading.reader import FileHandle, read_row_group
from lethe.reading.scan import reader_of
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store, parse_s3_uri

__all__ = [
    "MAX_RUNS",
    "backfill_task",
    "build_run",
    "catch_up",
    "entries_of",
    "initial_indexes",
    "maintain",
    "merge",
    "plan_merges",
    "runs_for_files",
    "stub_snapshot",
]


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
        at = rows if f.index_origin is None else as_array(origin_positions(f, rows))
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
                    "file": one_file(index_path(f), n),
                    "pos": pos,
                }
            )
            parts.append(part.filter(pc.is_valid(part.column("value"))))
        tracker.advance()
    tracker.finish()
    if not parts:
        return empty_entries(t)
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
    entries = with_file_dictionary(entries)
    ordered = entries.take(order(entries))
    pieces, written = write_pieces(store, prefix, column, ordered, piece_entries)
    return IndexRun(id=uuid.uuid4().hex[:16], covers=(), pieces=pieces), written


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
    if not files:
        return {}, []
    schema, rows = m.arrow_schema(), sum(f.rows for f in files)

    def entries(column: str) -> pa.Table:
        t, v = schema.field(column).type, (values or {}).get(column)
        if v is not None and len(v) == rows:
            return _entries_in_memory(files, v, t)
        return entries_of(store, prefix, files, column, t, snap=m)

    return _build_runs(store, prefix, ((ix.column, entries(ix.column), ()) for ix in m.indexes))


def _build_runs(
    store: S3Store,
    prefix: str,
    todo: Iterable[tuple[str, pa.Table, tuple[tuple[int, int], ...]]],
) -> tuple[dict[str, IndexRun], list[str]]:
    """A run per ``(column, entries, covers)`` of ``todo`` (built one after the other), and
    the keys written."""
    runs: dict[str, IndexRun] = {}
    written: list[str] = []
    for column, entries, covers in todo:
        run, keys = build_run(store, prefix, column, entries)
        runs[column] = run.model_copy(update={"covers": covers}) if covers else run
        written += keys
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
    bucket, prefix = parse_s3_uri(table_uri)
    store = S3Store(bucket)
    t = schema_from_b64(type_b64).field(column).type
    history = [SchemaVersion(schema_id=i, schema_b64=b) for i, b in schemas]
    key = TableProperties(key="-")
    snap = stub_snapshot(type_b64, key, (), history, current_schema_id) if schemas else None
    entries = entries_of(store, prefix, files, column, t, snap=snap)
    run, _ = build_run(store, prefix, column, entries)
    return run


def stub_snapshot(
    schema_b64: str,
    properties: TableProperties,
    files: Sequence[DataFile] = (),
    schemas: Sequence[SchemaVersion] = (),
    schema_id: int = 0,
    *,
    kind: Literal["compact", "index"] = "index",
) -> Snapshot:
    """A snapshot of just ``files`` (with their DVs) and a schema history (``schemas``, the
    current ``schema_id``), to read them in file and row order, by field id: what a
    compaction task or an index backfill task reads through (``kind``: its operation)."""
    return Snapshot(
        Manifest(
            table_uuid=f"{kind}-stub",
            version=0,
            created_at=datetime.now(UTC),
            operation=Operation(kind=kind),
            schema_b64=schema_b64,
            properties=properties,
            files=tuple(files),  # with files: inline, format 1 (the validator sets it)
            schemas=tuple(schemas),
            current_schema_id=schema_id,
            format_version=EVOLVED_FORMAT_VERSION,  # a history without files needs it
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
            body = store.get(piece_key(store, prefix, p.path), etag=p.etag).body
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
    if not m.indexes:
        return {}, []
    skip = set(exclude)
    schema = m.arrow_schema()
    live = [f for f in m.files if f.path not in skip]
    todo = {ix.column: [f for f in live if not ix.covers(f)] for ix in m.indexes}
    return _build_runs(
        store,
        prefix,
        (
            (
                c,
                entries_of(store, prefix, fs, c, schema.field(c).type, snap=m),
                _union((f.index_version, f.index_version) for f in fs),
            )
            for c, fs in todo.items()
            if fs
        ),
    )
