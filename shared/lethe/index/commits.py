"""The commits that change what the secondary indexes cover, taking a table's context and
returning what they committed (the :class:`~lethe.Table` façade adopts it):

* :func:`add_files`: data files written already, committed with their index entries
  (append, registration, ingest jobs, :meth:`lethe.Table.commit_files`);
* :func:`declare_index`: a new index, backfilled from the live files
  (:meth:`lethe.Table.create_index`, adoption's ``indexes=``);
* :func:`transaction`: several changes as one commit for library code (a registration or an
  adoption batch with the schema changes it needs: :mod:`lethe.catalog.transaction`), whose
  ``commit()`` returns the :class:`~lethe.catalog.commit.CommitOutcome`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lethe import errors
from lethe.catalog.changes import AddFiles, DeclareIndex
from lethe.catalog.commit import CommitOutcome, Direct
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile, IndexRun, Operation, request_hash
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import Step, Transaction
from lethe.catalog.transforms import check_indexable
from lethe.index.runs import build_run, entries_of, maintain
from lethe.progress import Progress

__all__ = ["FilesAdded", "add_files", "declare_index", "transaction"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FilesAdded:
    """What :func:`add_files` committed: ``version`` holds the files (a redelivered twin's
    version when it committed them first: then nothing was added)."""

    outcome: CommitOutcome[Any]
    version: int
    files_added: int
    rows_added: int


def add_files(
    ctx: TableContext,
    files: Sequence[DataFile],
    *,
    kind: str = "append",
    params: Mapping[str, Any] | None = None,
    request_id: str | None = None,
    written_at: float | None = None,
    own: bool = False,
    index_values: Mapping[str, pa.ChunkedArray] | None = None,
) -> FilesAdded:
    """Commit already-written data files with their index entries (one ``kind`` commit).

    ``written_at`` is the writer's ``time.time()`` before the first of ``files`` was
    uploaded; without it the files' ``LastModified`` is read (one HEAD per file). The commit
    is refused with :class:`~lethe.errors.GraceExpired` once the table's GC grace rule says
    GC may have removed them. With ``own``, the files are the caller's uncommitted copies:
    they are removed when the commit provably did not land, or when a redelivered twin (same
    ``request_id``) committed first. ``index_values``: the indexed columns of ``files``' rows
    in order (the writer has them: no read-back for the index entries).
    """
    rid = request_hash(request_id) if request_id else None
    rows = sum(f.rows for f in files)
    op = Operation(
        kind=kind,  # type: ignore[arg-type]
        rows_added=rows,
        files_added=len(files),
        request_id_hash=rid,
        params=dict(params or {}),
    )
    runs, merges, pieces = maintain(ctx.store, ctx.prefix, ctx.snapshot, files, values=index_values)
    if written_at is None and files:
        written_at = ctx.written_at(files)
    outcome = ctx.catalog.commit_change(
        Direct(
            AddFiles(tuple(files), op, runs, tuple(merges)),
            written_at,
            owned=(*(f.path for f in files), *pieces) if own else tuple(pieces),
            name=kind,
        )
    )
    if outcome.manifest is None:  # a twin with this request id committed first
        twin = outcome.base.find_request(rid) if rid is not None else None
        version = twin.version if twin is not None else outcome.base.version
        return FilesAdded(outcome, version, 0, 0)
    return FilesAdded(outcome, outcome.manifest.version, len(files), rows)


def declare_index(
    ctx: TableContext,
    column: str,
    *,
    build: Callable[[list[DataFile]], Sequence[IndexRun]] | None = None,
    progress: Progress | None = None,
) -> CommitOutcome[Any]:
    """Declare an index on ``column`` of ``ctx.snapshot`` and backfill it from its live files:
    in process (reads only that column's chunks) or by ``build`` (files -> runs written
    already); one commit (files appended meanwhile are indexed by their own commits).

    Raises:
        InvalidRequest: unknown or unsupported column, or already indexed.
    """
    base = ctx.snapshot
    t = check_indexable(ctx.schema, column)
    if base.index(column) is not None:
        raise errors.InvalidRequest(f"column {column!r} is already indexed")
    written_at = time.time()
    files = list(base.files)
    if build is None:
        entries = entries_of(ctx.store, ctx.prefix, files, column, t, progress=progress, snap=base)
        runs: Sequence[IndexRun] = [build_run(ctx.store, ctx.prefix, column, entries)[0]]
    else:
        runs = build(files)
    return ctx.catalog.commit_change(
        Direct(
            DeclareIndex(column, tuple(runs), base.version),
            written_at,
            owned=tuple(p.path for r in runs for p in r.pieces),
        )
    )


def transaction(ctx: TableContext, name: str) -> Transaction:
    """A transaction on ``ctx``'s table for library code: steps it stages
    (:meth:`~lethe.catalog.transaction.Transaction.stage`), files it adds with their index
    entries (:meth:`~lethe.catalog.transaction.Transaction.add_files`), schema updates and
    properties, committed once through ``ctx.catalog`` (one version, or none). Its
    ``commit()`` returns the :class:`~lethe.catalog.commit.CommitOutcome` (``detail``: the
    :class:`~lethe.catalog.transaction.Totals` staged): the caller moves on with
    ``ctx.at(outcome)``, the façade adopts it. Appending data is the façade's
    (:meth:`lethe.Table.transaction`): refused here."""

    def no_append(data: Any, mode: Any, progress: Any) -> Step:
        raise errors.InvalidRequest(
            "a library transaction stages steps and adds written files; append data "
            "through lethe.Table.transaction()"
        )

    def discard(keys: Sequence[str]) -> None:
        if not keys:
            return
        try:
            ctx.store.delete_many([ctx.key_of(k) for k in keys])
        except errors.LetheError as e:
            log.warning("could not remove %d uncommitted objects (%s); GC will", len(keys), e)

    def index(
        snap: Snapshot, files: Sequence[DataFile]
    ) -> tuple[Mapping[str, IndexRun], Sequence[Any], Sequence[str]]:
        return maintain(ctx.store, ctx.prefix, snap, files)

    tx = Transaction(no_append, ctx.catalog.commit_change, discard, index)
    tx.name = name
    return tx
