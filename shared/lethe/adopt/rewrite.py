"""``lethe adopt --rewrite-unready``: the adopted files the erasure-readiness report marks
(no page index, or a codec/encoding the splice refuses) rewritten once by Lethe's writer
(page index, bloom filter on the key, field ids) under ``data/``, in one commit.

Each file is rewritten on its own (one or more outputs), so its partition values stay in the
manifest, out of the new files. Files with a DV are left (their deleted rows would have to
move with the erasure records: erase or purge them first); so are files Lethe does not own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from lethe.adopt.footers import read_footers
from lethe.adopt.source import SourceFile
from lethe.catalog.changes import ReplaceFiles
from lethe.catalog.commit import Direct
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.manifest import DataFile, Operation
from lethe.catalog.partitions import partition_stats
from lethe.index.erase import scrub_rows
from lethe.index.runs import maintain
from lethe.reading.reader import FileHandle, read_row_group
from lethe.reading.scan import Projections
from lethe.storage.layout import is_external
from lethe.writing.writer import WriteOptions, write_files

__all__ = ["RewriteResult", "rewrite_unready"]


@dataclass(frozen=True, slots=True)
class RewriteResult:
    """What :func:`rewrite_unready` did: ``files`` rewritten into ``outputs`` new files at
    ``version`` (None: nothing to do); ``skipped``: unready files left (a DV, or unowned)."""

    version: int | None
    files: int
    outputs: int
    bytes_written: int
    skipped: int


def _unready(table: TableContext) -> tuple[list[DataFile], int]:
    adopted = [f for f in table.snapshot.files if is_external(f.path)]
    footers = read_footers(
        table.store, [SourceFile(f.path, f.size, f.etag, f.partition) for f in adopted]
    )
    marked = [f for f, ft in zip(adopted, footers, strict=True) if not ft.readiness.ready]
    ok = [f for f in marked if f.owned and f.dv is None]
    return ok, len(marked) - len(ok)


def _rows(table: TableContext, f: DataFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    p = Projections(table.snapshot).of(f)
    h = FileHandle(table.store, f.path, f)
    tail = h.tail()
    p = p.within(tail.schema) if p is not None else p
    for rg in range(len(f.row_groups)):
        want = p.file_columns(columns) if p is not None else columns
        t = read_row_group(h, tail, rg, want, h.prefetch(tail, rg, want))
        yield from (p.apply(t, columns) if p is not None else t).to_batches()


def rewrite_unready(target: TableContext | HasContext) -> RewriteResult:
    """Rewrite the unready adopted files of ``target``'s snapshot (a :class:`~lethe.Table` or
    its context; one ``compact`` commit, whose version the result names)."""
    table = context_of(target)
    files, skipped = _unready(table)
    if not files:
        return RewriteResult(None, 0, 0, 0, skipped)
    props = table.snapshot.properties
    opts = WriteOptions(
        key=table.key,
        target_file_bytes=props.target_file_bytes,
        row_group_bytes=props.row_group_bytes,
        schema_id=table.snapshot.current_schema_id or None,
    )
    written_at = time.time()
    out: list[DataFile] = []
    for f in files:
        schema = pa.schema([c for c in table.schema if c.name not in f.partition])
        for new in write_files(
            table.store, table.prefix, _rows(table, f, schema.names), schema, opts
        ):
            out.append(
                new.model_copy(
                    update={
                        "partition": dict(f.partition),
                        "columns": {**new.columns, **partition_stats(f.partition, new.rows)},
                    }
                )
            )
    runs, merges, pieces = maintain(table.store, table.prefix, table.snapshot, out)
    del merges  # a rewrite adds runs only; merges come with the next append
    # one exit (tests/test_one_exit.py): the sources' entries leave the older runs
    scrubbed, keys = scrub_rows(table.store, table.prefix, table.snapshot, {}, dropped=files)
    op = Operation(
        kind="compact",
        rows_added=sum(f.rows for f in out),
        files_added=len(out),
        files_removed=len(files),
        params={"rewrite_unready": len(files)},
    )
    update = ReplaceFiles(
        removed=tuple(f.path for f in files),
        dv_seen={f.path: None for f in files},
        added=tuple(out),
        operation=op,
        plan_version=table.snapshot.version,
        runs=runs,
        pieces=scrubbed,
    )
    owned = (*(table.key_of(f.path) for f in out), *pieces, *keys)
    outcome = table.catalog.commit_change(Direct(update, written_at, owned=owned, name="rewrite"))
    version = outcome.manifest.version if outcome.manifest is not None else None
    return RewriteResult(version, len(files), len(out), sum(f.size for f in out), skipped)
