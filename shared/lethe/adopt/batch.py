"""One ``adopt`` commit: a batch of adopted files (their manifest entries, the DVs of the rows
the source had deleted, index runs, the ownership claims and ledger), with the schema changes
that make the table take them when given (one version)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pyroaring import BitMap64

from lethe.adopt.footers import Footer
from lethe.adopt.names import describe_file
from lethe.adopt.source import HistoryObject, SourceFile
from lethe.catalog.changes import AdoptFiles
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile, Operation
from lethe.catalog.partitions import partition_stats
from lethe.catalog.schemas import Evolution
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import Staged
from lethe.dv import store as dvstore
from lethe.erasure.ownership import (
    Ledger,
    LedgerEntry,
    TableRef,
    claim,
    ledger_for_commit,
    legacy_entries,
)
from lethe.index.commits import transaction
from lethe.index.runs import maintain

__all__ = ["BatchOf", "commit_batch", "data_file"]


def data_file(ft: Footer, snap: Snapshot, own: bool) -> DataFile:
    """The manifest entry of one adopted file, described under ``snap``'s schema (its stats
    from the footer, partition values as constant-column stats)."""
    groups, cols = describe_file(ft, snap.arrow_schema(), snap.key)
    # a partition column the file holds itself is read from the file
    part = {k: v for k, v in ft.source.partition.items() if k not in ft.schema.names}
    return DataFile(
        path=ft.source.uri,
        size=ft.size,
        etag=ft.etag,
        rows=ft.metadata.num_rows,
        row_groups=groups,
        columns=cols | partition_stats(part, ft.metadata.num_rows),
        added_version=0,
        schema_id=snap.current_schema_id or None,
        partition=part,
        owned=own,
        mapped=True if ft.physical else None,
    )


def commit_batch(
    table: TableContext,
    batch: Sequence[Footer],
    *,
    fmt: str,
    own: bool,
    number: int = 0,
    history: Sequence[SourceFile | HistoryObject] = (),
    source: str = "",
    evolve: Sequence[Evolution] = (),
) -> TableContext:
    """Commit one batch of adopted files (one ``adopt`` commit; with ``evolve``, the schema
    changes that make the table take them join it: one version, a transaction at the
    catalog level, :func:`lethe.index.commits.transaction`), with DVs for the rows the
    source had deleted and the index runs of the declared indexes. The batch's objects (and
    ``history``: a source's earlier snapshots and metadata, taken as owned and superseded)
    are claimed first (ownership markers) and recorded in the commit's ledger
    (:mod:`lethe.erasure.ownership`). Returns the table at the commit."""
    written_at = time.time()  # before the DV container and index pieces: the GC grace clock
    me = TableRef(uri=table.uri, uuid=table.snapshot.table_uuid)
    claim(table.store, me, [ft.source.uri for ft in batch], own)
    claim(table.store, me, [h.uri for h in history], True)
    tx = transaction(table, "adopt")
    if evolve:
        tx.update_schema().extend(evolve)  # staged in the transaction
    batch_of = BatchOf(table, me, tuple(batch), fmt, own, number, tuple(history), source)
    tx.stage(lambda snap, _: batch_of.staged(snap, written_at))
    return table.at(tx.commit())


@dataclass(frozen=True, slots=True)
class BatchOf:
    """One batch of adopted files, staged on the snapshot a transaction gives it."""

    table: TableContext
    me: TableRef
    batch: tuple[Footer, ...]
    fmt: str
    own: bool
    number: int
    history: tuple[SourceFile | HistoryObject, ...]
    source: str

    def staged(self, snap: Snapshot, written_at: float) -> Staged:
        """The batch's ``adopt`` update on ``snap``: its ledger, DVs and index runs written
        (removed again when the commit does not land)."""
        table, batch, history = self.table, self.batch, self.history
        ledger_key, ledger, merged = ledger_for_commit(
            table.store,
            table.prefix,
            snap,
            Ledger(
                table_uuid=self.me.uuid,
                at=datetime.now(UTC),
                source=self.source,
                owned=self.own,
                objects=(
                    *legacy_entries(snap, live=True),  # a table from before ledgers
                    *(LedgerEntry(path=ft.source.uri, etag=ft.etag, size=ft.size) for ft in batch),
                    *(
                        LedgerEntry(path=h.uri, etag=h.etag, size=h.size, kind="history")
                        for h in history
                    ),
                ),
            ),
        )
        files = [data_file(ft, snap, self.own) for ft in batch]
        deleted = {ft.source.uri: BitMap64(ft.source.deleted) for ft in batch if ft.source.deleted}
        containers: tuple[str, ...] = ()
        if deleted:
            refs = dvstore.write_dvs(table.store, table.prefix, deleted)
            files = [f.model_copy(update={"dv": refs.get(f.path)}) for f in files]
            containers = tuple({table.key_of(r.container) for r in refs.values() if r.container})
        runs, merges, pieces = maintain(table.store, table.prefix, snap, files)
        op = Operation(
            kind="adopt",
            rows_added=sum(f.rows for f in files),
            rows_deleted=sum(len(b) for b in deleted.values()),
            files_added=len(files),
            params={
                "format": self.fmt,
                "batch": self.number,
                "bytes": sum(f.size for f in files),
                **({"history": len(history)} if history else {}),
            },
        )
        update = AdoptFiles(tuple(files), op, runs, tuple(merges), ledger, len(history), merged)
        written = (*containers, *pieces, ledger_key)
        return Staged(update, written, written_at, rows=op.rows_added, files=len(files))
