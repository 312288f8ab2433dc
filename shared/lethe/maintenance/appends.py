"""An append's step in a transaction (``Table.append``, ``tx.append``): the rows conformed to
the schema they are written under, sorted by the table's clustering, written as data files
and indexed, staged as the one :class:`~lethe.catalog.changes.AddFiles` update of the commit.

It sits above clustering (a batch is laid out as compaction lays out its window,
:func:`lethe.maintenance.clustering.cluster_order`) and the indexes (the entries of rows just
written need no read-back, :func:`lethe.index.runs.maintain`).
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from lethe import errors
from lethe.catalog.changes import AddFiles
from lethe.catalog.context import TableContext
from lethe.catalog.evolution import SchemaMode, conform, renamed
from lethe.catalog.manifest import DataFile, Operation
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import Staged, Step
from lethe.catalog.transforms.schema import aliases
from lethe.index.runs import maintain
from lethe.maintenance.clustering import ClusterSpec, cluster_order
from lethe.progress import Progress
from lethe.writing.writer import WriteOptions, write_files

__all__ = ["append_step", "conform_to", "write_data_files", "write_options", "write_step"]


def conform_to(
    data: Any, snap: Snapshot, mode: SchemaMode = "strict"
) -> pa.Table | pa.RecordBatchReader:
    """``data`` as rows of ``snap``'s schema (an earlier name of a column is its alias)."""
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        data = renamed(data, aliases(snap))
    return conform(data, snap.arrow_schema(), mode)


def write_options(snap: Snapshot) -> WriteOptions:
    """How files of ``snap``'s table are written (its sizes, key and schema id)."""
    p = snap.properties
    return WriteOptions(
        key=p.key,
        target_file_bytes=p.target_file_bytes,
        row_group_bytes=p.row_group_bytes,
        schema_id=snap.current_schema_id or None,
    )


def write_data_files(
    ctx: TableContext, data: Any, progress: Progress | None = None
) -> list[DataFile]:
    """``data`` written as data files of ``ctx``'s snapshot, not committed
    (``Table.write_data_files``)."""
    rows, snap = conform_to(data, ctx.snapshot), ctx.snapshot
    schema, opts = snap.arrow_schema(), write_options(snap)
    return write_files(ctx.store, ctx.prefix, rows, schema, opts, progress=progress, task="append")


def append_step(ctx: TableContext, data: Any, mode: SchemaMode, progress: Progress | None) -> Step:
    """The step that writes ``data`` as files and adds them: in strict mode under the
    schema of ``ctx``'s snapshot (files keep the schema id they were written under), after a
    schema change of the same transaction (a merge's included) under the schema that change
    made, on the snapshot the commit lands on. A stream is read once: a second preparation
    (another commit changed the schema first) fails cleanly."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    stream = isinstance(data, pa.RecordBatchReader)
    used = False

    def step(mid: Snapshot, evolved: bool) -> Staged:
        nonlocal used
        if used and stream:
            raise errors.CommitConflict(
                "another commit changed the table's schema while this append's stream was "
                "written; a stream is read once: nothing was committed, append it again"
            )
        used = True
        return write_step(ctx, data, mid if evolved else ctx.snapshot, mid, mode, progress)

    return step


def write_step(
    ctx: TableContext,
    data: Any,
    snap: Snapshot,
    mid: Snapshot,
    mode: SchemaMode,
    progress: Progress | None,
) -> Staged:
    """``data`` written under ``snap``'s schema as files added to ``mid`` (the snapshot the
    step is given), with their index entries."""
    written_at = time.time()
    data = conform_to(data, snap, mode)
    spec = ClusterSpec.of(mid.properties)
    if spec is not None and isinstance(data, pa.Table) and data.num_rows > 1:
        data = data.take(pa.array(cluster_order(data, spec)))
    opts, schema = write_options(snap), snap.arrow_schema()
    files = write_files(ctx.store, ctx.prefix, data, schema, opts, progress=progress, task="append")
    renewable = isinstance(data, pa.Table)
    if not files:
        return Staged(None, renewable=renewable)
    rows = sum(f.rows for f in files)
    # the files hold the table's rows in order: their index entries need no read-back
    values = None  # (when written under the schema the indexes name their columns in)
    same = snap.manifest.schema_b64 == mid.manifest.schema_b64
    if isinstance(data, pa.Table) and data.num_rows == rows and same:
        values = {c.column: data.column(c.column) for c in mid.indexes}
    runs, merges, pieces = maintain(ctx.store, ctx.prefix, mid, files, values=values)
    op = Operation(kind="append", rows_added=rows, files_added=len(files))
    return Staged(
        AddFiles(tuple(files), op, runs, tuple(merges)),
        written=(*(f.path for f in files), *pieces),
        written_at=written_at,
        renewable=renewable,
        rows=rows,
        files=len(files),
    )
