"""The public table API (DESIGN §9).

Example:
    >>> import pyarrow as pa, lethe                                     # doctest: +SKIP
    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())]) # doctest: +SKIP
    >>> t = lethe.Table.create("s3://bucket/people", schema, key="id")  # doctest: +SKIP
    >>> t.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))  # doctest: +SKIP
    >>> t.lookup(2).to_pylist()                                         # doctest: +SKIP
    [{'id': 2, 'name': 'b'}]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lethe import errors, iceberg
from lethe.audit.evidence import gather
from lethe.audit.receipts import ErasureReceipt, audit, receipt
from lethe.catalog.changes import (
    AddFiles,
    DropIndex,
    SetProperties,
    UpdateSchema,
    UpgradeFormat,
)
from lethe.catalog.commit import Catalog, Change, CommitOutcome, Direct, RetryPolicy
from lethe.catalog.context import TableContext
from lethe.catalog.evolution import (
    SchemaMode,
    SchemaUpdate,
    check_create,
    conform,
    describe_changes,
    renamed,
)
from lethe.catalog.grace import parse_duration
from lethe.catalog.history import SnapshotInfo, snapshot_history
from lethe.catalog.manifest import (
    DataFile,
    IndexRun,
    Operation,
    TableProperties,
    request_hash,
)
from lethe.catalog.schemas import Evolution
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.tables import create_table
from lethe.catalog.transaction import Staged, Step, Totals, Transaction
from lethe.catalog.transforms.schema import aliases
from lethe.dv.lineage import at_version
from lethe.erasure.deletes import BatchDeleteResult, DeleteRequest, DeleteResult, delete_batch
from lethe.erasure.erase import EraseResult, erase, purge
from lethe.erasure.retention import RetentionSweepResult, RowRetention, check_retention
from lethe.erasure.retention import sweep as retention_sweep
from lethe.index.commits import FilesAdded, add_files, declare_index
from lethe.index.runs import initial_indexes, maintain
from lethe.maintenance.clustering import ClusterSpec, cluster_order, cluster_properties
from lethe.maintenance.compaction import CompactionOptions, CompactionResult, RunTasks, compact
from lethe.progress import Progress
from lethe.reading.filters import Dnf, normalize
from lethe.reading.reader import FileHandle
from lethe.reading.rows import batches, plan_rows
from lethe.storage.store import IOCounters, S3Store, parse_s3_uri
from lethe.writing.writer import WriteOptions, write_files

if TYPE_CHECKING:  # pragma: no cover
    from lethe.adopt.core import AdoptOptions
    from lethe.adopt.plan import AdoptPlan

log = logging.getLogger(__name__)

__all__ = ["CommitResult", "SnapshotInfo", "Table"]


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What an append (or another file-adding commit) did."""

    version: int
    files_added: int
    rows_added: int
    attempts: int
    io: IOCounters = field(default_factory=IOCounters)
    committed: bool = True  # False: nothing to do (or another process had done it)


def _publish_view(catalog: Catalog, m: Snapshot) -> None:
    """After-commit hook: publish the Iceberg view when the table asks for it."""
    if not m.properties.iceberg_view:
        return
    iceberg.publish(catalog, m, format_version=m.properties.iceberg_format_version)


def _store_for(uri: str, s3: Any | None) -> tuple[S3Store, str]:
    bucket, prefix = parse_s3_uri(uri)
    return S3Store(bucket, client=s3), prefix


class Table:
    """A handle on one snapshot of a Lethe table. Create with :meth:`create` or :meth:`open`."""

    def __init__(self, catalog: Catalog, manifest: Snapshot) -> None:
        self._catalog = catalog
        self._m = manifest
        if _publish_view not in catalog.after_commit:
            catalog.after_commit.append(_publish_view)

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        uri: str,
        schema: pa.Schema,
        key: str = "id",
        *,
        s3: Any | None = None,
        target_file_bytes: int = 256 << 20,
        row_group_bytes: int = 16 << 20,
        retry: RetryPolicy | None = None,
        gc_grace: str | timedelta | float = "7d",
        segment_target_files: int = 1000,
        dv_overlay_max: int = 256,
        iceberg_view: bool = False,
        iceberg_format_version: Literal[2, 3] = 3,
        indexes: Sequence[str] = (),
        cluster_by: Sequence[str] | str | None = None,
        cluster_window: str | tuple[str, str] | None = None,
        cluster_file_subjects: int | None = None,
        retention: tuple[str, str | timedelta | float] | None = None,
    ) -> Table:
        """Create an empty table at ``uri`` (``s3://bucket/prefix``) with a key column.

        ``gc_grace`` (``"7d"``, ``"1h"``, seconds) is how long GC keeps objects no manifest
        references yet; every writer commits within it or refuses (docs/format.md §9). It is
        fixed for the life of the table. ``segment_target_files`` (file entries per manifest
        segment) and ``dv_overlay_max`` (DV changes the root carries before folding them into
        segments) tune the format-2 metadata (docs/format.md §3). With ``iceberg_view``,
        every commit publishes the table's Iceberg view (:meth:`publish_iceberg`) in
        ``iceberg_format_version``; a failed publish never fails the commit. ``indexes``
        declares secondary indexes on erasure keys (see :meth:`create_index`).
        ``cluster_by`` (subject columns) with ``cluster_window`` (``"1d"`` or ``("ts", "1d")``)
        lays the table out for forgetting: compaction sorts each time window by the subject,
        so one person's rows sit in one file per window (:mod:`lethe.maintenance.clustering`), of at most
        ``cluster_file_subjects`` subjects.
        ``retention=(column, "400d")`` declares a row TTL (see :meth:`set_retention`).

        Raises:
            TableExists: a table already lives at ``uri``.
            InvalidRequest: ``key`` is not a column, sizes are not positive, or an index
                names an unknown or unsupported column (or one twice), or the clustering
                names an unknown column or an ambiguous time column.
        """
        check_create(
            schema,
            key,
            (target_file_bytes, row_group_bytes, segment_target_files, dv_overlay_max),
            iceberg_format_version,
        )
        declared = initial_indexes(schema, indexes)
        clustering = cluster_properties(schema, cluster_by, cluster_window, cluster_file_subjects)
        ttl = check_retention(schema, *retention) if retention is not None else (None, None)
        grace = parse_duration(gc_grace).total_seconds()
        if grace <= 0:
            raise errors.InvalidRequest("gc_grace must be positive")
        store, prefix = _store_for(uri, s3)
        cat = Catalog(store, prefix, retry=retry)
        properties = TableProperties(
            key=key,
            target_file_bytes=target_file_bytes,
            row_group_bytes=row_group_bytes,
            gc_grace_seconds=grace,
            segment_target_files=segment_target_files,
            dv_overlay_max=dv_overlay_max,
            iceberg_view=iceberg_view,
            iceberg_format_version=iceberg_format_version,
            **clustering,  # type: ignore[arg-type]
            retention_column=ttl[0],
            retention_seconds=ttl[1],
        )
        snap = create_table(cat, schema, properties, indexes=declared)
        log.info("created table %s (key=%s)", cat.uri, key)
        return cls(cat, snap)

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        version: int | None = None,
        s3: Any | None = None,
        retry: RetryPolicy | None = None,
    ) -> Table:
        """Open the latest snapshot of ``uri``, or ``version`` for time travel.

        Raises:
            TableNotFound: nothing at ``uri``.
            SnapshotNotFound: ``version`` was never committed or has expired.
            CorruptManifest: the head or manifest cannot be read as a Lethe manifest.
        """
        store, prefix = _store_for(uri, s3)
        cat = Catalog(store, prefix, retry=retry)
        return cls(cat, at_version(cat, version))

    # --- properties --------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        return self._catalog.uri

    @property
    def version(self) -> int:
        return self._m.version

    @property
    def manifest(self) -> Snapshot:
        return self._m

    @property
    def schema(self) -> pa.Schema:
        return self._m.arrow_schema()

    @property
    def key(self) -> str:
        return self._m.key

    @property
    def store(self) -> S3Store:
        return self._catalog.store

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @property
    def io(self) -> IOCounters:
        """Requests and bytes of every operation made through this handle's store."""
        return self.store.stats.snapshot()

    def __repr__(self) -> str:
        return f"Table({self.uri!r}, version={self.version}, files={self._m.file_count})"

    def refresh(self) -> Table:
        """Move this handle to the latest committed version (returns self)."""
        self._m, _ = self._catalog.current()
        return self

    def key_of(self, rel: str) -> str:
        return self._catalog.key(rel)

    @property
    def context(self) -> TableContext:
        """What library operations take: this table's catalog and this handle's snapshot."""
        return TableContext(self._catalog, self._m)

    def _move_to(self, snap: Snapshot | None) -> None:
        """Move this handle to ``snap`` (a version an operation of this handle committed;
        None: it committed nothing, the handle stays)."""
        if snap is None:
            return
        if snap.table_uuid != self._m.table_uuid:
            raise errors.InvalidRequest("snapshot belongs to another table")
        self._m = snap

    def _adopt(self, outcome: CommitOutcome[Any]) -> None:
        self._m = outcome.manifest if outcome.manifest is not None else outcome.base

    # --- writes ------------------------------------------------------------------------------
    def _conform(
        self, data: Any, mode: SchemaMode = "strict", snap: Snapshot | None = None
    ) -> pa.Table | pa.RecordBatchReader:
        snap = snap or self._m
        if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
            data = renamed(data, aliases(snap))  # an earlier name is its column's alias
        return conform(data, snap.arrow_schema(), mode)

    def write_options(self, snap: Snapshot | None = None) -> WriteOptions:
        snap = snap or self._m
        p = snap.properties
        return WriteOptions(
            key=p.key,
            target_file_bytes=p.target_file_bytes,
            row_group_bytes=p.row_group_bytes,
            schema_id=snap.current_schema_id or None,
        )

    def write_data_files(self, data: Any, *, progress: Progress | None = None) -> list[DataFile]:
        """Write ``data`` as data files (not yet committed; see :meth:`commit_files`)."""
        conformed, opts = self._conform(data), self.write_options()
        prefix = self._catalog.prefix
        return write_files(
            self.store, prefix, conformed, self.schema, opts, progress=progress, task="append"
        )

    def append(
        self,
        data: pa.Table | pa.RecordBatchReader,
        *,
        progress: Progress | None = None,
        schema_mode: SchemaMode = "strict",
    ) -> CommitResult:
        """Append rows: write data files, then commit them by CAS (appends never conflict).

        ``progress`` hears of the rows written (task ``"append"``; :mod:`lethe.progress`).
        A table with ``cluster_by`` gets an in-memory table's rows sorted by time window
        and subject first (:func:`lethe.maintenance.clustering.cluster_order`), so one person's rows of
        a batch sit in few pages before compaction clusters the window.

        ``schema_mode="merge"``: columns the table lacks are added and narrower table types
        widened first (a schema commit of its own, then the append's), anything else refused.

        Raises:
            SchemaMismatch: the data does not fit (every differing column listed).
            GraceExpired: the files took longer than the table's GC grace rule allows to
                commit (they are removed again; append anew).
        """
        tx = self.transaction()
        tx.name = "append"
        tx.append(data, schema_mode=schema_mode, progress=progress)
        return tx.commit()  # type: ignore[no-any-return]

    # --- transactions (lethe.catalog.transaction) ----------------------------------------------
    def transaction(self) -> Transaction:
        """Changes committed together as one version (PyIceberg's ``Transaction``): leaving
        the ``with`` block commits them once, an error in it commits nothing
        (:mod:`lethe.catalog.transaction`)::

            with t.transaction() as tx:
                tx.update_schema().add_column("country", pa.string())
                tx.append(rows)                 # written under the evolved schema
                tx.set_properties(uploads_evolve=True)

        ``tx.append(data, schema_mode=...)``, ``tx.update_schema()`` and
        ``tx.set_properties(...)`` are taken; deletes are refused (they read the committed
        rows). The handle moves to the version committed."""
        return Transaction(self._append_step, self._commit, self._forget, self._index_for)

    def _index_for(
        self, snap: Snapshot, files: Sequence[DataFile], values: Any = None
    ) -> tuple[dict[str, IndexRun], list[Any], list[str]]:
        """The index upkeep of ``files`` added to ``snap`` (:func:`lethe.index.runs.maintain`)."""
        return maintain(self.store, self._catalog.prefix, snap, files, values=values)

    def _forget(self, keys: Sequence[str]) -> None:
        """Delete uncommitted objects (table-relative keys; best effort: GC removes the rest)."""
        if not keys:
            return
        try:
            self.store.delete_many([self._catalog.key(k) for k in keys])
        except errors.LetheError as e:
            log.warning("could not remove %d uncommitted objects (%s); GC will", len(keys), e)

    def _append_step(self, data: Any, mode: SchemaMode, progress: Progress | None) -> Step:
        """The step of a transaction that writes ``data`` as files and adds them: in strict
        mode under this handle's schema (files keep the schema id they were written under),
        after a schema change of the same transaction (a merge's included) under the schema
        that change made, on the snapshot the commit lands on. A stream is read once: a
        second preparation (another commit changed the schema first) fails cleanly."""
        handle = self._m
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
            return self._write_step(data, mid if evolved else handle, mid, mode, progress)

        return step

    def _write_step(
        self, data: Any, snap: Snapshot, mid: Snapshot, mode: SchemaMode, progress: Progress | None
    ) -> Staged:
        written_at = time.time()
        data = self._conform(data, mode, snap)
        spec = ClusterSpec.of(mid.properties)
        if spec is not None and isinstance(data, pa.Table) and data.num_rows > 1:
            data = data.take(pa.array(cluster_order(data, spec)))
        prefix, schema = self._catalog.prefix, snap.arrow_schema()
        opts = self.write_options(snap)
        files = write_files(
            self.store, prefix, data, schema, opts, progress=progress, task="append"
        )
        renewable = isinstance(data, pa.Table)
        if not files:
            return Staged(None, renewable=renewable)
        rows = sum(f.rows for f in files)
        # the files hold the table's rows in order: their index entries need no read-back
        values = None  # (when written under the schema the indexes name their columns in)
        same = snap.manifest.schema_b64 == mid.manifest.schema_b64
        if isinstance(data, pa.Table) and data.num_rows == rows and same:
            values = {c.column: data.column(c.column) for c in mid.indexes}
        runs, merges, pieces = self._index_for(mid, files, values)
        op = Operation(kind="append", rows_added=rows, files_added=len(files))
        return Staged(
            AddFiles(tuple(files), op, runs, tuple(merges)),
            written=(*(f.path for f in files), *pieces),
            written_at=written_at,
            renewable=renewable,
            rows=rows,
            files=len(files),
        )

    def _commit(
        self,
        change: Change[Any],
        *,
        before: IOCounters | None = None,
        added: tuple[int, int] = (0, 0),
    ) -> CommitResult:
        """Commit ``change`` through the one loop, move the handle to the version it made,
        and say what it did (``added``: files and rows of a change that adds them; a
        transaction counts its own)."""
        before = before or self.store.stats.snapshot()
        outcome = self._catalog.commit_change(change)
        self._adopt(outcome)
        files, rows = added
        if isinstance(outcome.detail, Totals):
            files, rows = outcome.detail.files, outcome.detail.rows
        landed = outcome.manifest is not None
        io = self.store.stats.snapshot() - before
        if not landed:
            files = rows = 0
        return CommitResult(self.version, files, rows, outcome.attempts, io, committed=landed)

    def discard(self, files: Iterable[DataFile]) -> None:
        """Delete uncommitted data files (best effort: GC removes what is left)."""
        self._forget([f.path for f in files])

    def commit_files(
        self,
        files: Sequence[DataFile],
        *,
        kind: str = "append",
        params: dict[str, Any] | None = None,
        request_id: str | None = None,
        written_at: float | None = None,
        own: bool = False,
    ) -> CommitResult:
        """Commit already-written data files (used by append, ingest jobs and the trigger;
        :func:`lethe.index.commits.add_files`).

        ``written_at`` is the writer's ``time.time()`` before the first of ``files`` was
        uploaded; without it the files' ``LastModified`` is read (one HEAD per file). The
        commit is refused with :class:`~lethe.errors.GraceExpired` once the table's GC grace
        rule says GC may have removed them. With ``own``, the files are the caller's
        uncommitted copies: they are removed when the commit provably did not land, or when a
        redelivered twin (same ``request_id``) committed first; otherwise the caller decides.
        """
        before = self.store.stats.snapshot()
        added = add_files(
            self.context,
            files,
            kind=kind,
            params=params,
            request_id=request_id,
            written_at=written_at,
            own=own,
        )
        return self._added(added, before)

    def _added(self, added: FilesAdded, before: IOCounters) -> CommitResult:
        """Move to what :func:`~lethe.index.commits.add_files` committed; its result."""
        self._adopt(added.outcome)
        io = self.store.stats.snapshot() - before
        attempts = added.outcome.attempts
        return CommitResult(added.version, added.files_added, added.rows_added, attempts, io)

    # --- reads -------------------------------------------------------------------------------
    def _handle(self, f: DataFile, store: S3Store | None = None) -> FileHandle:
        return FileHandle(store or self.store, self._catalog.key(f.path), f)

    def plan(
        self, dnf: Dnf | None, store: S3Store | None = None, *, physical: bool = False
    ) -> list[tuple[FileHandle, int, int]]:
        """``(file, row group, first row position)`` that may hold rows matching ``dnf``
        (see :func:`lethe.reading.scan.plan`)."""
        return plan_rows(
            store or self.store, self._catalog.prefix, self._m, dnf, physical=physical
        )[0]

    def _output_schema(self, columns: Sequence[str] | None) -> pa.Schema:
        schema = self.schema
        if columns is None:
            return schema
        bad = [c for c in columns if schema.get_field_index(c) < 0]
        if bad:
            raise errors.InvalidRequest(f"unknown columns {bad}; columns are {schema.names}")
        return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)

    def to_batches(
        self, columns: Sequence[str] | None = None, filters: Any = None, *, page_index: bool = True
    ) -> pa.RecordBatchReader:
        """Stream the snapshot's rows (DVs applied), projected and filtered.

        Only the needed column chunks of row groups that survive pruning are read, with
        ETag-pinned ranged GETs, prefetched a few row groups ahead. With a selective filter
        only the pages that can hold matching rows are read, through the files' page
        indexes (``page_index=False`` reads whole row groups, as before).
        """
        out_schema = self._output_schema(columns)
        dnf = normalize(filters, self.schema) if filters is not None else None
        rows = batches(
            self.store, self._catalog.prefix, self._m, out_schema, dnf, page_index=page_index
        )
        return pa.RecordBatchReader.from_batches(out_schema, rows)

    def to_arrow_reader(
        self,
        columns: Sequence[str] | None = None,
        filters: Any = None,
        version: int | None = None,
    ) -> pa.RecordBatchReader:
        """A streaming ``pyarrow.RecordBatchReader`` of a snapshot's rows, deletes applied:
        the one-call door for DuckDB, Polars and anything else that takes Arrow streams.

        ``version``: another snapshot (time travel); ``filters``: DNF as for :meth:`scan`, or
        ``--where`` text (:mod:`lethe.reading.where`). ``reader = t.to_arrow_reader(); duckdb.sql("select
        count(*) from reader")``; ``pl.from_arrow(t.to_arrow_reader(filters="amount > 10"))``.
        """
        if isinstance(filters, str):
            from lethe.reading.where import parse_dnf

            filters = parse_dnf(filters)
        snap = self
        if version is not None and version != self.version:
            snap = Table(self._catalog, at_version(self._catalog, version))
        reader = snap.to_batches(columns, filters)

        def at_least_one() -> Iterator[pa.RecordBatch]:  # pl.from_arrow needs one batch
            seen = False
            for b in reader:
                seen = True
                yield b
            if not seen:
                yield pa.RecordBatch.from_pylist([], schema=reader.schema)

        return pa.RecordBatchReader.from_batches(reader.schema, at_least_one())

    def scan(
        self, columns: Sequence[str] | None = None, filters: Any = None, *, page_index: bool = True
    ) -> pa.Table:
        """All rows of the snapshot (DVs applied) as one table; see :meth:`to_batches`."""
        reader = self.to_batches(columns, filters, page_index=page_index)
        return reader.read_all()

    def lookup(
        self, key_value: Any, columns: Sequence[str] | None = None, *, page_index: bool = True
    ) -> pa.Table:
        """Rows whose key equals ``key_value``.

        Files and row groups are pruned by the manifest's key stats, pages by the page
        index: a warm snapshot reads the key's page, then the other columns' pages holding
        the matching rows (two rounds of parallel ranged GETs, a few pages per column).
        """
        return self.scan(columns, [(self.key, "=", key_value)], page_index=page_index)

    def delete(self, filters: Any, *, request_id: str | None = None) -> DeleteResult:
        """Delete the rows matching ``filters`` from the latest version (deletion vectors).

        Commits with at most 3 PUTs (DV container, manifest, head); a delete that matches
        nothing commits nothing; a ``request_id`` already committed returns the earlier
        result without a new version. The handle moves to the new version.
        """
        r = self.delete_batch([DeleteRequest(filters, request_id)])
        one = r.results[0]
        if one.error is not None:
            raise errors.RequestIdConflict(one.error)
        return DeleteResult(
            one.version, one.rows_deleted, one.files_touched, one.duplicate, r.attempts, r.io
        )

    def delete_batch(
        self, requests: Sequence[DeleteRequest], *, kind: str = "delete"
    ) -> BatchDeleteResult:
        """Several deletes in one commit (an SQS batch for one table)."""
        r = delete_batch(self.context, requests, kind=kind)
        self._move_to(r.snapshot)
        return r

    def erase(
        self,
        filters: Any,
        *,
        request_id: str | None = None,
        max_bytes: int | None = None,
        progress: Progress | None = None,
    ) -> EraseResult:
        """Delete the matching rows, then remove them physically by row-group splices.

        Returns the bytes copied server-side, uploaded and downloaded. ``max_bytes`` bounds
        the row-group bytes spliced in this call (the rest stays pending, see
        :func:`lethe.erasure.erase.process_erasure`). ``progress`` hears of each file spliced.
        """
        r = erase(
            self.context, filters, request_id=request_id, max_bytes=max_bytes, progress=progress
        )
        self._move_to(r.snapshot)
        return r

    def purge(
        self,
        *,
        request_id: str | None = None,
        max_bytes: int | None = None,
        progress: Progress | None = None,
    ) -> EraseResult:
        """Physically remove every row a deletion vector hides (what Databricks calls
        ``REORG TABLE ... APPLY (PURGE)``), by row-group splices, with an erasure record.

        ``max_bytes`` bounds the row-group bytes spliced in this call; ``complete`` says
        whether anything is left; call again with the same ``request_id`` to go on (or let
        the stack's splice worker do it: ``lethe purge --queue-url``). ``progress`` hears of
        each file spliced.
        """
        r = purge(self.context, request_id=request_id, max_bytes=max_bytes, progress=progress)
        self._move_to(r.snapshot)
        return r

    def compact(
        self,
        options: CompactionOptions | None = None,
        *,
        dry_run: bool = False,
        run_tasks: RunTasks | None = None,
        progress: Progress | None = None,
    ) -> CompactionResult:
        """Rewrite files with many deleted rows, and small files, into fewer files (one
        commit; concurrent deletes are mapped onto the outputs). ``run_tasks`` runs the
        rewrite tasks elsewhere (``spark_jobs/compact.py``); see
        :func:`lethe.maintenance.compaction.compact`. The handle moves to the new version."""
        r = compact(self.context, options, dry_run=dry_run, run_tasks=run_tasks, progress=progress)
        self._move_to(r.snapshot)
        return r

    def upgrade(self) -> CommitResult:
        """Rewrite the latest manifest in format 2 (segmented) if it is still format 1;
        returns the commit (``files_added`` 0), or this version with ``committed=False`` when
        there is nothing to do (also when another process upgraded it first).
        Any other commit upgrades a format-1 table as well."""
        return self._commit(Direct(UpgradeFormat()))

    def publish_iceberg(
        self, *, format_version: Literal[2, 3] | None = None, progress: Progress | None = None
    ) -> str:
        """Publish this handle's snapshot as an Apache Iceberg table; returns the URI of its
        ``metadata/v<N>.metadata.json`` (docs/format.md §10).

        Data files are this snapshot's own Parquet files and deletes its Puffin deletion
        vectors (format 3, the default of the table's ``iceberg_format_version``), or
        position-delete files written from them (``format_version=2``, for engines without
        format 3). Publishing the same version again writes nothing; after a published
        version, only what changed is written. ``progress`` hears of each manifest written.

        Raises:
            IcebergUnsupported: a column type has no exact Iceberg equivalent.

        Example:
            >>> t.publish_iceberg()                                  # doctest: +SKIP
            's3://bucket/people/metadata/v12.metadata.json'
        """
        fv = format_version or self._m.properties.iceberg_format_version
        return iceberg.publish(self._catalog, self._m, format_version=fv, progress=progress).uri

    # --- schema evolution (lethe.catalog.evolution) --------------------------------------------------
    def update_schema(self) -> SchemaUpdate:
        """A builder of schema changes committed once, by ``with`` or ``.commit()``
        (:mod:`lethe.catalog.evolution`)."""
        return SchemaUpdate(self._evolve)

    def _evolve(self, changes: tuple[Evolution, ...]) -> CommitResult:
        op = Operation(kind="schema", params=describe_changes(changes))
        return self._commit(Direct(UpdateSchema(changes, op)))

    @property
    def schema_history(self) -> list[tuple[int, pa.Schema]]:
        """Every schema of the table by id, oldest first (fields carry their ids)."""
        return self._m.schema_history()

    # --- table properties and row retention (lethe.erasure.retention) ------------------------------
    def set_properties(self, **changes: Any) -> CommitResult:
        """Change table properties (fields of :class:`~lethe.catalog.manifest.TableProperties`) in
        one commit, over the latest version; ``key`` and ``gc_grace_seconds`` are fixed.

        Raises:
            InvalidRequest: a fixed or unknown property, or a bad value.
        """
        change = SetProperties(
            changes, Operation(kind="properties", params={"changed": len(changes)})
        )
        change.properties(self._m.properties)  # refuse early, before any I/O
        return self._commit(Direct(change))

    @property
    def retention(self) -> RowRetention | None:
        """The row retention of this snapshot (None: rows never expire)."""
        return RowRetention.of(self._m.properties)

    def set_retention(
        self, column: str | None, keep: str | timedelta | float | None = None
    ) -> CommitResult:
        """Declare a row TTL: rows whose ``column`` (timestamp or date) is older than
        ``keep`` (``"400d"``) are erased by :meth:`sweep_retention` (the GC workflow runs it on
        its schedule). ``set_retention(None)`` clears it.

        Raises:
            InvalidRequest: not a timestamp or date column, or not a positive duration.

        Example:
            >>> t.set_retention("event_time", "400d")                    # doctest: +SKIP
        """
        if column is None:
            return self.set_properties(retention_column=None, retention_seconds=None)
        if keep is None:
            raise errors.InvalidRequest("set_retention needs a duration, e.g. '400d'")
        col, seconds = check_retention(self.refresh().schema, column, keep)
        return self.set_properties(retention_column=col, retention_seconds=seconds)

    def sweep_retention(
        self,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        max_bytes: int | None = None,
        progress: Progress | None = None,
    ) -> RetentionSweepResult:
        """Erase the rows past the table's retention (:func:`lethe.retention.sweep`; ``progress``
        hears of each file spliced, task ``"retention"``); the handle moves to the last
        version it committed."""
        r = retention_sweep(
            self.context, now=now, dry_run=dry_run, max_bytes=max_bytes, progress=progress
        )
        self._move_to(r.snapshot)
        return r

    def retention_receipts(self) -> list[ErasureReceipt]:
        """The receipt of every retention sweep the request log still holds, oldest first."""
        ev = gather(self._catalog)
        hashes = [r.id_hash for r in ev.head.requests if r.kind == "retention"]
        return [receipt(ev, h) for h in hashes]

    # --- secondary indexes (DESIGN §6b; lethe.index.core) ----------------------------------------
    @property
    def indexes(self) -> tuple[str, ...]:
        """The columns with a secondary index in this snapshot."""
        return tuple(ix.column for ix in self._m.indexes)

    def create_index(
        self,
        column: str,
        *,
        build: Callable[[list[DataFile]], Sequence[IndexRun]] | None = None,
        progress: Progress | None = None,
    ) -> CommitResult:
        """Declare an index on ``column`` and backfill it from the live files: in process by
        default (reads only that column's chunks), or by ``build`` (files -> runs written
        already; ``spark_jobs/index.py`` spreads large tables over Spark tasks). Files
        appended meanwhile are indexed by their own commits. ``progress`` hears of each
        file read by the in-process backfill (task ``"index backfill"``).

        Raises:
            InvalidRequest: unknown or unsupported column, or already indexed.
        """
        before = self.store.stats.snapshot()
        self.refresh()
        outcome = declare_index(self.context, column, build=build, progress=progress)
        self._adopt(outcome)
        io = self.store.stats.snapshot() - before
        return CommitResult(self.version, 0, 0, outcome.attempts, io)

    def drop_index(self, column: str) -> CommitResult:
        """Drop the index on ``column`` (GC removes its pieces).

        Raises:
            InvalidRequest: ``column`` is not indexed.
        """
        return self._commit(Direct(DropIndex(column)))

    def erasure_status(
        self, request_id: str, *, audit_values: Sequence[Any] | None = None
    ) -> ErasureReceipt:
        """The receipt of a delete or erase request: received, hidden, physically removed,
        complete (GC), and the objects that held the rows (see :mod:`lethe.audit.receipts`).

        Reconstructed from the manifests, GC's markers and reports; it names the request by
        its hash only. ``audit_values``: key values to look for in the current objects (the
        receipt holds counts and paths, never the values).

        Example:
            >>> t.erasure_status("ticket-4711").state                 # doctest: +SKIP
            'complete'
        """
        ev = gather(self._catalog)
        found = None
        if audit_values is not None:
            found = audit(self._catalog, ev, self.key, list(audit_values))
        return receipt(ev, request_hash(request_id), audit_result=found)

    def history(self) -> list[SnapshotInfo]:
        """Snapshot infos from this handle's version back to the oldest retained one."""
        return snapshot_history(self._catalog, self._m)

    # --- adoption in place (lethe.adopt) ------------------------------------------------------
    @classmethod
    def adopt(
        cls,
        uri: str,
        source: str,
        *,
        partitioning: Literal["hive"] | None = "hive",
        schema: pa.Schema | None = None,
        partition_types: Mapping[str, pa.DataType] | None = None,
        key: str | None = None,
        take_ownership: bool = True,
        indexes: Sequence[str] = (),
        dry_run: bool = False,
        source_format: Literal["auto", "parquet", "iceberg", "delta", "glue"] = "auto",
        batch_files: int = 1000,
        s3: Any | None = None,
        glue: Any | None = None,
        progress: Progress | None = None,
    ) -> Table | AdoptPlan:
        """Adopt existing Parquet files in place, no copy (:mod:`lethe.adopt`): a Parquet
        prefix (Hive ``key=value/`` directories as partition columns, strings unless typed by
        ``schema``/``partition_types``), an Iceberg ``*.metadata.json``, a Delta table or
        ``glue://db/table``. Creates the table (``key`` required) or adds to it; commits
        ``batch_files`` files per commit, idempotent by path and ETag. ``take_ownership``:
        erasure may rewrite the originals and GC delete them (else erase refuses).
        ``dry_run`` returns the :class:`~lethe.adopt.AdoptPlan` (erasure readiness included).
        ``progress`` hears of each footer read (task ``"adopt footers"``) and each file
        committed (``"adopt"``).
        """
        from lethe.adopt.core import AdoptOptions

        opts = AdoptOptions(
            partitioning, schema, partition_types, key, take_ownership, tuple(indexes),
            dry_run, source_format, batch_files, s3, glue, progress=progress,
        )  # fmt: skip
        return cls.adopt_with(uri, source, opts)

    @classmethod
    def adopt_with(cls, uri: str, source: str, opts: AdoptOptions) -> Table | AdoptPlan:
        """:meth:`adopt` with its options as one value (the CLI and ``spark_jobs/adopt.py``,
        which reads the footers in Spark: ``AdoptOptions.footers``)."""
        from lethe.adopt.core import adopt

        store, prefix = _store_for(uri, opts.s3)
        cat = Catalog(store, prefix)
        cat.after_commit.append(_publish_view)  # adoption's commits publish the view too
        got = adopt(cat, source, opts)
        return got if not isinstance(got, Snapshot) else cls(cat, got)
