"""Adoption in place: a source's files become a table's data files without a copy.

:func:`adopt` lists the source (:func:`list_source`), reads only the footers, makes the schema
(the union of the footers), and commits the files in batches (change kind ``adopt``,
:class:`lethe.catalog.changes.AdoptFiles`), each an absolute ``s3://`` path with its ETag, its
partition values and ownership; the rows the source had deleted become Lethe DVs in the same
commit. Idempotent by (path, ETag): a re-run, or a run resumed after a crash between
batches, adopts only the files not adopted yet; a file whose ETag changed is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from lethe import errors
from lethe.adopt.batch import commit_batch
from lethe.adopt.footers import Footer, read_footers
from lethe.adopt.hive import list_parquet
from lethe.adopt.names import check_readable, logical, physical_names, with_aliases
from lethe.adopt.plan import AdoptPlan, plan_of, union_schema
from lethe.adopt.source import SourceFile, SourceListing
from lethe.catalog.commit import Catalog
from lethe.catalog.context import TableContext
from lethe.catalog.evolution import plan_merge
from lethe.catalog.manifest import TableProperties
from lethe.catalog.partitions import PARTITION_META
from lethe.catalog.schemas import Add, Evolution, same_type
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.tables import create_table
from lethe.erasure.ownership import (
    TableRef,
    adopted_objects,
    check_free,
    release,
)
from lethe.index.commits import declare_index
from lethe.index.runs import initial_indexes
from lethe.progress import Progress, Tracker, track
from lethe.storage.store import S3Store, parse_s3_uri

log = logging.getLogger(__name__)

__all__ = ["AdoptOptions", "adopt", "detect_format", "list_source"]

Format = Literal["auto", "parquet", "iceberg", "delta", "glue"]


@dataclass(frozen=True, slots=True)
class AdoptOptions:
    """The options of :func:`adopt` (see :meth:`lethe.Table.adopt`)."""

    partitioning: Literal["hive"] | None = "hive"
    schema: pa.Schema | None = None
    partition_types: Mapping[str, pa.DataType] | None = None
    key: str | None = None
    take_ownership: bool = True
    indexes: Sequence[str] = ()
    dry_run: bool = False
    source_format: Format = "auto"
    batch_files: int = 1000
    s3: Any | None = None
    glue: Any | None = None
    #: reads the footers (default :func:`~lethe.adopt.footers.read_footers`, in threads;
    #: ``spark_jobs/adopt.py`` reads them in Spark executors)
    footers: Callable[[S3Store, Sequence[SourceFile]], list[Footer]] | None = None
    #: hears of each footer read (task ``"adopt footers"``) and each file committed
    #: (``"adopt"``, by batch)
    progress: Progress | None = None


def detect_format(source: str, store: S3Store) -> str:
    """``iceberg`` for a ``*.metadata.json``, ``glue`` for ``glue://db/table``, ``delta`` for
    a prefix holding ``_delta_log/``, else ``parquet``."""
    if source.startswith("glue://"):
        return "glue"
    if source.endswith(".metadata.json"):
        return "iceberg"
    bucket, prefix = parse_s3_uri(source)
    src = S3Store(bucket, client=store.client, stats=store.stats)
    log_prefix = f"{prefix}/_delta_log/" if prefix else "_delta_log/"
    if next(iter(src.list(log_prefix)), None) is not None:
        return "delta"
    return "parquet"


def list_source(
    store: S3Store, source: str, fmt: str, opts: AdoptOptions, table: pa.Schema | None = None
) -> SourceListing:
    """The source's listing, by its reader (imported when needed); Hive partition values
    typed by ``opts`` or else as the columns of ``opts.schema`` or the ``table``'s schema.

    Raises:
        InvalidRequest: an unknown format, or a reader this build does not have.
    """
    if fmt == "parquet":
        return list_parquet(
            store,
            source,
            partitioning=opts.partitioning,
            partition_types=opts.partition_types,
            column_types={f.name: f.type for f in (opts.schema or table or ())},
        )
    try:
        if fmt == "iceberg":
            from lethe.adopt.iceberg import list_iceberg  # type: ignore[import-not-found,unused-ignore]

            return list_iceberg(store, source, history=True)  # type: ignore[no-any-return,unused-ignore]
        if fmt == "delta":
            from lethe.adopt.delta import list_delta  # type: ignore[import-not-found,unused-ignore]

            return list_delta(store, source, history=True)  # type: ignore[no-any-return,unused-ignore]
        if fmt == "glue":
            from lethe.adopt.glue import list_glue  # type: ignore[import-not-found,unused-ignore]

            db, _, table = source.removeprefix("glue://").partition("/")
            glue = opts.glue if opts.glue is not None else _glue_client()
            return list_glue(store, glue, db, table, history=True)  # type: ignore[no-any-return,unused-ignore]
    except ImportError as e:
        raise errors.InvalidRequest(
            f"adopting a {fmt} source is not available in this build (no lethe.adopt.{fmt})"
        ) from e
    raise errors.InvalidRequest(
        f"unknown source_format {fmt!r}: use auto, parquet, iceberg, delta or glue"
    )


def _glue_client() -> Any:
    import boto3

    return boto3.client("glue")


def _open(catalog: Catalog) -> TableContext | None:
    try:
        return TableContext(catalog, catalog.current()[0])
    except errors.TableNotFound:
        return None


def _pending(listing: SourceListing, table: TableContext | None) -> tuple[SourceListing, int, int]:
    """The listing without the files the table holds already (same path and ETag), nor those
    it adopted before and has superseded since (its ledger, :mod:`lethe.erasure.ownership`: an
    erasure's spliced originals stay in the bucket until GC); with how many of each.

    Raises:
        InvalidRequest: a file was adopted before under another ETag (it changed since).
    """
    if table is None:
        return listing, 0, 0
    ever = adopted_objects(table.store, table.prefix, table.snapshot, legacy=True)
    live = table.snapshot.files_at([f.uri for f in listing.files])
    gone = {
        f.uri
        for f in listing.files
        if f.uri not in live
        and any(a.etag is None or f.etag is None or a.etag == f.etag for a in ever.get(f.uri, ()))
    }
    history = tuple(h for h in listing.history if h.uri not in ever)
    listing = _with_files(listing, tuple(f for f in listing.files if f.uri not in gone), history)
    live = table.snapshot.files_at([f.uri for f in listing.files])
    changed = sorted(
        f.uri for f in listing.files if f.uri in live and f.etag and live[f.uri].etag != f.etag
    )
    if changed:
        raise errors.InvalidRequest(
            f"{len(changed)} adopted file(s) changed in place since their adoption (another "
            f"ETag): {', '.join(changed[:5])}; Lethe never reads a data file that changed. "
            "Restore the object, or delete its rows and adopt the new object under a new key"
        )
    todo = tuple(f for f in listing.files if f.uri not in live)
    return _with_files(listing, todo), len(listing.files) - len(todo), len(gone)


def _with_files(
    listing: SourceListing, files: tuple[Any, ...], history: tuple[Any, ...] | None = None
) -> SourceListing:
    return dataclasses.replace(
        listing, files=files, history=listing.history if history is None else history
    )


def _target_schema(
    footers: Sequence[Footer],
    listing: SourceListing,
    opts: AdoptOptions,
    table: TableContext | None,
) -> tuple[pa.Schema, list[pa.Field]]:
    """The schema the files make, checked against the given one and the table's; and the
    columns to add to the table (nullable: the schema-evolution rule of a merge).

    Raises:
        SchemaMismatch: naming the files and columns that do not fit (another type, or a
            column the given schema does not have).
    """
    union = union_schema(footers, listing)  # checks the files agree, whatever the source says
    if listing.schema is not None:
        union = _marked(listing.schema, union)
    parts = set((listing.partition_schema or pa.schema([])).names)
    additions: list[pa.Field] = []
    for want, what in (
        (opts.schema, "the given schema"),
        (table.schema if table else None, "the table"),
    ):
        if want is None:
            continue
        problems = []
        for f in union:
            i = want.get_field_index(f.name)
            files = [ft.source.uri for ft in footers if f.name in ft.schema.names][:3]
            if i < 0 and what == "the table":
                additions.append(f)  # merged in: rows adopted before read it as null
            elif i < 0:
                where = ", ".join(files) or "the partitions"
                problems.append(f"column {f.name!r} (in {where}) is not in {what}")
            elif not same_type(want.field(i).type, f.type) and f.name not in parts:
                problems.append(
                    f"column {f.name!r} is {f.type} in {', '.join(files)}, {what} has "
                    f"{want.field(i).type}"
                )
        if problems:
            raise errors.SchemaMismatch(
                f"the files to adopt do not fit {what}: " + "; ".join(problems[:10])
            )
        union = _marked(want, union) if what == "the given schema" else want
    if table is None:  # a new table records the files' own names of its columns
        union = with_aliases(union, physical_names(footers))
    else:
        check_readable(footers, union)
    return (pa.schema([*union, *additions]) if additions else union), additions


def _marked(given: pa.Schema, union: pa.Schema) -> pa.Schema:
    """``given`` with the partition marks of ``union`` (columns the files do not hold)."""
    marked = {f.name for f in union if PARTITION_META in (f.metadata or {})}
    return pa.schema(
        [
            f.with_metadata({**(f.metadata or {}), PARTITION_META: b"identity"})
            if f.name in marked
            else f
            for f in given
        ],
        metadata=given.metadata,
    )


@dataclass(frozen=True, slots=True)
class _Pending:
    """What one adoption takes: the source (its URI and format), its listing without the
    files the table holds already (``done`` of them) or has superseded (``gone``)."""

    source: str
    fmt: str
    listing: SourceListing
    done: int = 0
    gone: int = 0


def adopt(catalog: Catalog, source: str, opts: AdoptOptions) -> Snapshot | AdoptPlan:
    """Adopt ``source`` into the table of ``catalog`` (created when missing); returns the
    snapshot the adoption ends at, or the plan (``opts.dry_run``). See
    :meth:`lethe.Table.adopt`, which opens the catalog and adopts what this returns.

    The whole plan is checked before the first write (the key, the indexes, the key in every
    file, the partition types against the table's); an adoption into a new table that fails
    before its first commit leaves nothing behind (no table, no ledger, no marker)."""
    if opts.batch_files <= 0:
        raise errors.InvalidRequest("batch_files must be positive")
    t0 = time.perf_counter()
    table = _open(catalog)
    store, uri, own = catalog.store, catalog.uri, opts.take_ownership
    todo = _listed(store, source, opts, table)
    listing = todo.listing
    footers = logical(_read_footers(store, listing, opts), listing)
    if not footers:
        return _nothing_new(catalog, table, todo, opts)
    schema, additions = _target_schema(footers, listing, opts, table)
    key = _check_plan(uri, schema, footers, listing, opts, table)
    uuid = table.snapshot.table_uuid if table is not None else None
    check_free(
        store, uuid, [*(f.uri for f in listing.files), *(h.uri for h in listing.history)], own
    )
    if opts.dry_run:
        return plan_of(uri, listing, footers, schema, todo.done, own, todo.gone)
    tracker = track(opts.progress, "adopt", total=len(footers), unit="files")
    if table is None:
        before = {o.key for o in store.list(f"{catalog.prefix}/")}  # a new prefix: 1 LIST
        table = _create(catalog, schema, key, opts)
        table = _commit_new(table, footers, todo, opts, before, tracker)
    else:
        table, evolution, late = _evolve(table, additions, opts.indexes)
        table = _commit_all(table, footers, todo, opts, tracker, evolution, late)
    tracker.finish()
    log.info(
        "adopted %s files (%s bytes) in %s commits in %.2fs",
        len(footers),
        sum(ft.size for ft in footers),
        -(-len(footers) // opts.batch_files),
        time.perf_counter() - t0,
    )
    return table.snapshot


def _listed(
    store: S3Store, source: str, opts: AdoptOptions, table: TableContext | None
) -> _Pending:
    """The source's listing (its format detected when ``auto``), without what the table
    holds or superseded already (:func:`_pending`)."""
    fmt = detect_format(source, store) if opts.source_format == "auto" else opts.source_format
    _check_partition_types(opts, table)
    try:
        listed = list_source(store, source, fmt, opts, table.schema if table else None)
    except errors.InvalidRequest as e:  # a table's own prefix, emptied by erasures and GC
        if table is None or fmt != "parquet" or not str(e).startswith("no Parquet objects"):
            raise
        listed = SourceListing("parquet", source, ())
    listing, done, gone = _pending(listed, table)
    if gone:
        log.info(
            "%s file(s) of %s were adopted and superseded since: not adopted again", gone, source
        )
    return _Pending(source, fmt, listing, done, gone)


def _read_footers(store: S3Store, listing: SourceListing, opts: AdoptOptions) -> list[Footer]:
    """The footers of the listing's files, by ``opts.footers`` when given."""
    if opts.footers is None:
        return read_footers(store, listing.files, progress=opts.progress)
    with track(opts.progress, "adopt footers", total=len(listing.files), unit="files") as t:
        got = opts.footers(store, listing.files)
        t.advance(len(got))
    return got


def _nothing_new(
    catalog: Catalog, table: TableContext | None, todo: _Pending, opts: AdoptOptions
) -> Snapshot | AdoptPlan:
    """No file to adopt: the plan, or the source's history not taken yet (one commit)."""
    own, history = opts.take_ownership, todo.listing.history
    uuid = table.snapshot.table_uuid if table is not None else None
    check_free(catalog.store, uuid, [h.uri for h in history], own)
    if opts.dry_run:
        schema = table.schema if table else pa.schema([])
        return plan_of(catalog.uri, todo.listing, (), schema, todo.done, own, todo.gone)
    if table is None:
        raise errors.InvalidRequest(f"nothing to adopt at {todo.source}")
    if history and own:
        table = commit_batch(table, [], fmt=todo.fmt, own=own, history=history, source=todo.source)
    return table.snapshot


def _check_partition_types(opts: AdoptOptions, table: TableContext | None) -> None:
    """The partition types given agree with the table's types of those columns.

    Raises:
        SchemaMismatch: a partition type given differs from the table's type of the column.
    """
    if table is None:
        return
    given = dict(opts.partition_types or {})
    for name, t in given.items():
        i = table.schema.get_field_index(name)
        if i >= 0 and not same_type(table.schema.field(i).type, t):
            raise errors.SchemaMismatch(
                f"partition type {name}={t}: the table has {name!r} as "
                f"{table.schema.field(i).type}, and a column keeps its type (give "
                f"{table.schema.field(i).type} or none; adopt into a new table for another)"
            )


def _check_plan(
    uri: str,
    schema: pa.Schema,
    footers: Sequence[Footer],
    listing: SourceListing,
    opts: AdoptOptions,
    table: TableContext | None,
) -> str:
    """The table's key, once the plan is known to work: the key (required for a new table) and
    the indexes name columns, every file has the key column.

    Raises:
        InvalidRequest: no key for a new table, another key than the table's, an unknown or
            unindexable column (naming the known ones).
        SchemaMismatch: files without the key column.
    """
    key = table.key if table is not None else opts.key
    if table is None and key is None:
        key = listing.key[0] if len(listing.key) == 1 else None
    if key is None:
        raise errors.InvalidRequest(
            f"no table at {uri}: key= (the erasure key column) is required to create it; "
            f"the columns are {schema.names}"
        )
    if opts.key is not None and opts.key != key:
        raise errors.InvalidRequest(
            f"key {opts.key!r}: the table at {uri} has the key {key!r} (a table keeps its key)"
        )
    if key not in schema.names:
        raise errors.InvalidRequest(
            f"key column {key!r} is not a column of the files to adopt; the columns are "
            f"{schema.names}"
        )
    new = [c for c in opts.indexes if table is None or table.snapshot.index(c) is None]
    initial_indexes(schema, new)  # known, indexable, each once
    missing = [ft.source.uri for ft in footers if key not in ft.schema.names]
    if missing:
        raise errors.SchemaMismatch(
            f"{len(missing)} file(s) lack the key column {key!r}: {', '.join(missing[:5])}"
        )
    return key


def _evolve(
    table: TableContext, additions: Sequence[pa.Field], indexes: Sequence[str]
) -> tuple[TableContext, tuple[Evolution, ...], list[str]]:
    """An existing table's new columns (the schema changes that join the first batch's
    commit: one version, lethe.catalog.evolution rules) and indexes: those on columns it has
    declared now (the table after them returned), those on new columns returned (declared
    after the first batch)."""
    evolution = _evolution(table, additions)
    late = [c for c in indexes if table.snapshot.index(c) is None and c not in table.schema.names]
    for col in indexes:
        if table.snapshot.index(col) is None and col not in late:
            table = _declare(table, col)
    return table, evolution, late


def _declare(table: TableContext, column: str) -> TableContext:
    """The table (at its latest version) after declaring an index on ``column``."""
    table = table.latest()
    return table.at(declare_index(table, column))


def _evolution(table: TableContext, additions: Sequence[pa.Field]) -> tuple[Evolution, ...]:
    """The schema changes that add ``additions`` to the table: the one fold
    (:func:`~lethe.catalog.evolution.plan_merge`), so its rules hold (a name an earlier
    column had is refused, large types added as their plain ones).

    Raises:
        SchemaMismatch: a new column is an earlier name of a table column (adopted files
            are read by their own names: it would not be read).
    """
    if not additions:
        return ()
    required = [f for f in table.schema if not f.nullable]
    plan = plan_merge(pa.schema([*required, *additions]), table.snapshot)
    added = {c.name for c in plan.changes if isinstance(c, Add)}
    lost = [f.name for f in additions if f.name not in added]
    if lost or len(added) != len(plan.changes):
        raise errors.SchemaMismatch(
            f"columns {lost} of the files to adopt are earlier names of table columns: "
            "adopted files are read by their own names, so their values would not be read "
            "(rename the columns back, or adopt into a new table)"
        )
    return plan.changes


def _commit_all(
    table: TableContext,
    footers: Sequence[Footer],
    todo: _Pending,
    opts: AdoptOptions,
    tracker: Tracker,
    evolution: Sequence[Evolution] = (),
    late: Sequence[str] = (),
    start: int = 0,
) -> TableContext:
    """Commit ``footers`` in batches of ``opts.batch_files`` from batch number ``start``,
    counting the files committed; the first batch with the schema changes ``evolution`` (one
    commit), then the indexes ``late`` on the columns it added. Returns the table after."""
    size = opts.batch_files
    for n in range(start, -(-len(footers) // size)):
        history = todo.listing.history if n == 0 and opts.take_ownership else ()
        batch = footers[n * size : (n + 1) * size]
        table = commit_batch(table, batch, fmt=todo.fmt, own=opts.take_ownership, number=n,
                             history=history, source=todo.source,
                             evolve=evolution if n == start else ())  # fmt: skip
        tracker.advance(len(batch))
        for col in late if n == start else ():  # an index on a column the batch added
            table = _declare(table, col)
    return table


def _commit_new(
    table: TableContext,
    footers: Sequence[Footer],
    todo: _Pending,
    opts: AdoptOptions,
    before: set[str],
    tracker: Tracker,
) -> TableContext:
    """:func:`_commit_all` into the table this adoption created: when its first batch fails,
    the table and the claims are removed (:func:`_undo`), so nothing is left behind."""
    first = footers[: opts.batch_files]
    try:
        table = _commit_all(table, first, todo, opts, tracker)
    except BaseException:
        uris = [ft.source.uri for ft in first]
        _undo(table, [*uris, *(h.uri for h in todo.listing.history)], before)
        raise
    return _commit_all(table, footers, todo, opts, tracker, start=1)


def _undo(table: TableContext, claimed: Sequence[str], before: set[str]) -> None:
    """Remove a table created by an adoption that failed before its first commit: the
    ownership claims it made, then every object its prefix holds that was not there
    ``before`` (a source may lie under the table's prefix)."""
    me = TableRef(uri=table.uri, uuid=table.snapshot.table_uuid)
    try:
        release(table.store, me, claimed)
        keys = [o.key for o in table.store.list(f"{table.prefix}/")]
        keys = [
            k for k in keys if k not in before and f"s3://{table.store.bucket}/{k}" not in claimed
        ]
        failed = table.store.delete_many(keys)
    except Exception:  # the error that made the undo is the one to raise
        log.exception("could not remove the table %s of a failed adoption", table.uri)
        return
    log.info(
        "removed the table %s of a failed adoption (%s objects; %s not deleted)",
        table.catalog.uri,
        len(keys),
        len(failed),
    )


def _create(catalog: Catalog, schema: pa.Schema, key: str, opts: AdoptOptions) -> TableContext:
    """The new table with its indexes (:func:`~lethe.catalog.tables.create_table`, the table
    defaults), on the catalog's store (its counters then cover the whole adoption).

    Raises:
        TableExists: another process created a table at the catalog's URI meanwhile.
    """
    declared = initial_indexes(schema, tuple(opts.indexes))
    return TableContext(
        catalog, create_table(catalog, schema, TableProperties(key=key), indexes=declared)
    )
