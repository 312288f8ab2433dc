"""The public table API (DESIGN §9): each method checks its arguments, hands them to a library
function (a ``TableContext`` in, what it committed out) and moves the handle to that version.

    >>> import pyarrow as pa, lethe                                     # doctest: +SKIP
    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())]) # doctest: +SKIP
    >>> t = lethe.Table.create("s3://bucket/people", schema, key="id")  # doctest: +SKIP
    >>> t.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))  # doctest: +SKIP
    >>> t.lookup(2).to_pylist()                                         # doctest: +SKIP
    [{'id': 2, 'name': 'b'}]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lethe import errors, iceberg
from lethe.audit.receipts import ErasureReceipt, request_receipt, retention_receipts
from lethe.catalog.changes import DropIndex, SetProperties, UpdateSchema, UpgradeFormat
from lethe.catalog.commit import Catalog, Change, CommitOutcome, Direct, RetryPolicy
from lethe.catalog.committed import CommitResult
from lethe.catalog.context import TableContext
from lethe.catalog.evolution import SchemaMode, SchemaUpdate, check_create, describe_changes
from lethe.catalog.history import SnapshotInfo, snapshot_history
from lethe.catalog.manifest import ColumnIndex, DataFile, IndexRun, Operation, TableProperties
from lethe.catalog.schemas import Evolution
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.spec import TableSpec
from lethe.catalog.tables import create_table
from lethe.catalog.transaction import Step, Totals, Transaction
from lethe.dv.lineage import at_version
from lethe.erasure.deletes import BatchDeleteResult, DeleteRequest, DeleteResult, delete_batch
from lethe.erasure.erase import EraseResult, erase, purge
from lethe.erasure.retention import RetentionSweepResult, RowRetention, check_retention
from lethe.erasure.retention import sweep as retention_sweep
from lethe.index.commits import add_files, declare_index
from lethe.index.runs import initial_indexes, maintain
from lethe.maintenance.appends import append_step, write_data_files, write_options
from lethe.maintenance.clustering import cluster_properties
from lethe.maintenance.compaction import CompactionOptions, CompactionResult, RunTasks, compact
from lethe.progress import Progress
from lethe.reading.filters import Dnf
from lethe.reading.reader import FileHandle
from lethe.reading.rows import arrow_reader, plan_rows, rows_reader
from lethe.storage.counters import IOCounters
from lethe.storage.store import S3Store, parse_s3_uri
from lethe.writing.writer import WriteOptions

if TYPE_CHECKING:  # pragma: no cover
    from lethe.adopt.core import AdoptOptions
    from lethe.adopt.plan import AdoptPlan

log = logging.getLogger(__name__)

__all__ = ["CommitResult", "SnapshotInfo", "Table"]


def _catalog(uri: str, s3: Any | None, retry: RetryPolicy | None = None) -> Catalog:
    """The catalog of the table at ``uri`` (``s3``: a boto3 client, else the environment's)."""
    bucket, prefix = parse_s3_uri(uri)
    return Catalog(S3Store(bucket, client=s3), prefix, retry=retry)


def _checked(schema: pa.Schema, spec: TableSpec) -> tuple[TableProperties, tuple[ColumnIndex, ...]]:
    """The properties and the declared indexes of a new table of ``spec``, each keyword
    checked by the module that owns its rule first (no I/O)."""
    check_create(schema, spec.key, spec.sizes, spec.iceberg_format_version)
    declared = initial_indexes(schema, spec.indexes)
    clustering = cluster_properties(
        schema, spec.cluster_by, spec.cluster_window, spec.cluster_file_subjects
    )
    ttl = check_retention(schema, *spec.retention) if spec.retention is not None else (None, None)
    return spec.properties(clustering, ttl), declared


class Table:
    """A handle on one snapshot of a Lethe table. Create with :meth:`create` or :meth:`open`."""

    def __init__(self, catalog: Catalog, manifest: Snapshot) -> None:
        self._catalog = catalog
        self._m = manifest
        if iceberg.publish_view not in catalog.after_commit:
            catalog.after_commit.append(iceberg.publish_view)

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

        ``gc_grace`` (``"7d"``, ``"1h"``, seconds; fixed for the table's life) is how long GC
        keeps objects no manifest references yet: every writer commits within it or refuses
        (docs/format.md §9). ``segment_target_files`` (file entries per manifest segment) and
        ``dv_overlay_max`` (DV changes the root carries before folding them into segments)
        tune the format-2 metadata (§3). ``iceberg_view``: every commit publishes the Iceberg
        view (:meth:`publish_iceberg`) in ``iceberg_format_version``, a failed publish never
        failing the commit. ``indexes``: secondary indexes on erasure keys
        (:meth:`create_index`). ``cluster_by`` (subject columns) with ``cluster_window``
        (``"1d"`` or ``("ts", "1d")``): compaction sorts each time window by the subject, so
        one person's rows sit in one file per window (:mod:`lethe.maintenance.clustering`),
        of at most ``cluster_file_subjects`` subjects. ``retention=(column, "400d")``: a row
        TTL (:meth:`set_retention`). The keywords travel on as one :class:`TableSpec`.

        Raises:
            TableExists: a table already lives at ``uri``.
            InvalidRequest: ``key`` is not a column, sizes are not positive, an index names
                an unknown or unsupported column (or one twice), or the clustering an
                unknown column or an ambiguous time column.
        """
        spec = TableSpec(
            key, target_file_bytes, row_group_bytes, gc_grace, segment_target_files,
            dv_overlay_max, iceberg_view, iceberg_format_version, tuple(indexes), cluster_by,
            cluster_window, cluster_file_subjects, retention,
        )  # fmt: skip
        properties, declared = _checked(schema, spec)
        cat = _catalog(uri, s3, retry)
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
        cat = _catalog(uri, s3, retry)
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
        if snap is not None and snap.table_uuid != self._m.table_uuid:
            raise errors.InvalidRequest("snapshot belongs to another table")
        self._m = snap or self._m

    # --- writes ------------------------------------------------------------------------------
    def write_options(self, snap: Snapshot | None = None) -> WriteOptions:
        return write_options(snap or self._m)

    def write_data_files(self, data: Any, *, progress: Progress | None = None) -> list[DataFile]:
        """Write ``data`` as data files (not yet committed; see :meth:`commit_files`)."""
        return write_data_files(self.context, data, progress)

    def append(
        self,
        data: pa.Table | pa.RecordBatchReader,
        *,
        progress: Progress | None = None,
        schema_mode: SchemaMode = "strict",
    ) -> CommitResult:
        """Append rows: write data files, then commit them by CAS (appends never conflict;
        :mod:`lethe.maintenance.appends`). ``progress`` hears of the rows written (task
        ``"append"``). With ``cluster_by``, an in-memory table's rows are sorted by time
        window and subject first, so one person's rows of a batch sit in few pages.
        ``schema_mode="merge"``: columns the table lacks are added and narrower table types
        widened first, in the same commit; anything else refused.

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
        """Changes committed together as one version (PyIceberg's ``Transaction``,
        :mod:`lethe.catalog.transaction`): leaving the ``with`` block commits them once, an
        error in it commits nothing; appends, schema updates and properties are taken,
        deletes refused (they read the committed rows). The handle moves to the version::

            with t.transaction() as tx:
                tx.update_schema().add_column("country", pa.string())
                tx.append(rows)                 # written under the evolved schema
                tx.set_properties(uploads_evolve=True)
        """
        index = partial(maintain, self.store, self._catalog.prefix)
        return Transaction(self._append_step, self._commit, self._forget, index)

    def _forget(self, keys: Sequence[str]) -> None:
        """Delete uncommitted objects (table-relative keys; best effort: GC removes the rest)."""
        if not keys:
            return
        try:
            self.store.delete_many([self._catalog.key(k) for k in keys])
        except errors.LetheError as e:
            log.warning("could not remove %d uncommitted objects (%s); GC will", len(keys), e)

    def _append_step(self, data: Any, mode: SchemaMode, progress: Progress | None) -> Step:
        return append_step(self.context, data, mode, progress)

    def _commit(self, change: Change[Any]) -> CommitResult:
        """Commit ``change`` through the one loop, move the handle to the version it made,
        and say what it did (a transaction counts its files and rows)."""
        before = self.store.stats.snapshot()
        outcome = self._catalog.commit_change(change)
        landed = outcome.manifest is not None
        t = outcome.detail if landed and isinstance(outcome.detail, Totals) else Totals()
        return self._result(outcome, before, (t.files, t.rows), committed=landed)

    def _result(
        self,
        outcome: CommitOutcome[Any],
        before: IOCounters,
        added: tuple[int, int] = (0, 0),
        *,
        version: int | None = None,
        committed: bool = True,
    ) -> CommitResult:
        """Move to what ``outcome`` committed; what it did (``before``: the counters then)."""
        self._m = outcome.manifest if outcome.manifest is not None else outcome.base
        io = self.store.stats.snapshot() - before
        v = self.version if version is None else version
        return CommitResult(v, *added, outcome.attempts, io, committed=committed)

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
        """Commit already-written data files (ingest jobs and the trigger): see
        :func:`lethe.index.commits.add_files` for ``written_at`` (the GC grace clock) and
        ``own`` (the caller's uncommitted copies, removed when the commit provably did not
        land); otherwise the caller decides what happens to uncommitted files."""
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
        counts = (added.files_added, added.rows_added)
        return self._result(added.outcome, before, counts, version=added.version)

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

    def to_batches(
        self, columns: Sequence[str] | None = None, filters: Any = None, *, page_index: bool = True
    ) -> pa.RecordBatchReader:
        """Stream the snapshot's rows (DVs applied), projected and filtered: only the needed
        column chunks of row groups that survive pruning, by ETag-pinned ranged GETs
        prefetched a few groups ahead; with a selective filter only the pages that can
        match, through the page indexes (``page_index=False``: whole row groups)."""
        return rows_reader(self.context, columns, filters, page_index=page_index)

    def to_arrow_reader(
        self, columns: Sequence[str] | None = None, filters: Any = None, version: int | None = None
    ) -> pa.RecordBatchReader:
        """A streaming ``pyarrow.RecordBatchReader`` of a snapshot's rows, deletes applied:
        the one-call door for DuckDB, Polars and other Arrow consumers. ``version``: time
        travel; ``filters``: DNF as for :meth:`scan`, or ``--where`` text. ``reader =
        t.to_arrow_reader(); duckdb.sql("select count(*) from reader")``;
        ``pl.from_arrow(t.to_arrow_reader(filters="amount > 10"))``."""
        return arrow_reader(self.context, columns, filters, version)

    def scan(
        self, columns: Sequence[str] | None = None, filters: Any = None, *, page_index: bool = True
    ) -> pa.Table:
        """All rows of the snapshot (DVs applied) as one table; see :meth:`to_batches`."""
        return self.to_batches(columns, filters, page_index=page_index).read_all()

    def lookup(
        self, key_value: Any, columns: Sequence[str] | None = None, *, page_index: bool = True
    ) -> pa.Table:
        """Rows whose key equals ``key_value``: files and row groups pruned by the key
        stats, pages by the page index (a warm snapshot reads the key's page, then the other
        columns' pages holding the matches: two rounds of parallel ranged GETs)."""
        return self.scan(columns, [(self.key, "=", key_value)], page_index=page_index)

    def delete(self, filters: Any, *, request_id: str | None = None) -> DeleteResult:
        """Delete the rows matching ``filters`` from the latest version (deletion vectors):
        at most 3 PUTs (DV container, manifest, head); no match, no commit; a ``request_id``
        already committed returns the earlier result. The handle moves to the new version."""
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
        """Delete the matching rows, then remove them physically by row-group splices
        (:func:`lethe.erasure.erase.erase`): bytes copied server-side, uploaded, downloaded.
        ``max_bytes`` bounds the bytes spliced in this call (the rest stays pending).
        ``progress`` hears of each file spliced."""
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
        """Physically remove every row a deletion vector hides (Databricks' ``REORG TABLE
        ... APPLY (PURGE)``) by row-group splices, with an erasure record. ``max_bytes`` as
        for :meth:`erase`; ``complete`` says whether anything is left: call again with the
        same ``request_id`` (or ``lethe purge --queue-url``). ``progress`` as for erase."""
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
        """Rewrite files with many deleted rows, and small files, into fewer files in one
        commit (:func:`lethe.maintenance.compaction.compact`); ``run_tasks`` runs the
        rewrites elsewhere (``spark_jobs/compact.py``). The handle moves to the new version."""
        r = compact(self.context, options, dry_run=dry_run, run_tasks=run_tasks, progress=progress)
        self._move_to(r.snapshot)
        return r

    def upgrade(self) -> CommitResult:
        """Rewrite the latest manifest in format 2 (segmented) if it is still format 1 (as
        any other commit does); ``committed=False`` when there is nothing to do."""
        return self._commit(Direct(UpgradeFormat()))

    def publish_iceberg(
        self, *, format_version: Literal[2, 3] | None = None, progress: Progress | None = None
    ) -> str:
        """Publish this handle's snapshot as an Apache Iceberg table; returns the URI of its
        ``metadata/v<N>.metadata.json`` (docs/format.md §10). Data files are the snapshot's
        own, deletes its Puffin DVs (format 3, the default ``iceberg_format_version``) or
        position-delete files (``format_version=2``). A version published again writes
        nothing; after one, only what changed. ``progress`` hears of each manifest written.

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
        """Change table properties (:class:`~lethe.catalog.manifest.TableProperties` fields)
        in one commit over the latest version; ``key`` and ``gc_grace_seconds`` are fixed.

        Raises:
            InvalidRequest: a fixed or unknown property, or a bad value.
        """
        op = Operation(kind="properties", params={"changed": len(changes)})
        change = SetProperties(changes, op)
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
        ``keep`` (``"400d"``) are erased by :meth:`sweep_retention` (the GC workflow's
        schedule runs it); ``set_retention(None)`` clears it.

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
        """Erase the rows past the table's retention (:func:`lethe.erasure.retention.sweep`;
        ``progress``: task ``"retention"``); the handle moves to the last version committed."""
        r = retention_sweep(
            self.context, now=now, dry_run=dry_run, max_bytes=max_bytes, progress=progress
        )
        self._move_to(r.snapshot)
        return r

    def retention_receipts(self) -> list[ErasureReceipt]:
        """The receipt of every retention sweep the request log still holds, oldest first."""
        return retention_receipts(self._catalog)

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
        """Declare an index on ``column`` and backfill it from the live files: in process
        (that column's chunks; ``progress`` hears of each file, task ``"index backfill"``)
        or by ``build`` (files -> runs written already; ``spark_jobs/index.py``). Files
        appended meanwhile are indexed by their own commits.

        Raises:
            InvalidRequest: unknown or unsupported column, or already indexed.
        """
        before = self.store.stats.snapshot()
        outcome = declare_index(self.refresh().context, column, build=build, progress=progress)
        return self._result(outcome, before)

    def drop_index(self, column: str) -> CommitResult:
        """Drop the index on ``column`` (GC removes its pieces).

        Raises:
            InvalidRequest: ``column`` is not indexed.
        """
        return self._commit(Direct(DropIndex(column)))

    def erasure_status(
        self, request_id: str, *, audit_values: Sequence[Any] | None = None
    ) -> ErasureReceipt:
        """The receipt of a delete or erase request (:mod:`lethe.audit.receipts`):
        received, hidden, physically removed, complete (GC), the objects that held the rows.
        Rebuilt from manifests, GC's markers and reports; it names the request by its hash.
        ``audit_values``: key values to look for in the current objects (never kept).

        Example:
            >>> t.erasure_status("ticket-4711").state                 # doctest: +SKIP
            'complete'
        """
        return request_receipt(self._catalog, self.key, request_id, audit_values)

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
        ``glue://db/table``. Creates the table (``key`` required) or adds to it, ``batch_files``
        files a commit, idempotent by path and ETag. ``take_ownership``: erasure may rewrite
        the originals and GC delete them (else erase refuses). ``dry_run`` returns the
        :class:`~lethe.adopt.AdoptPlan`. ``progress``: tasks ``"adopt footers"``, ``"adopt"``.
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

        cat = _catalog(uri, opts.s3)
        cat.after_commit.append(iceberg.publish_view)  # adoption's commits publish the view too
        got = adopt(cat, source, opts)
        return got if not isinstance(got, Snapshot) else cls(cat, got)
