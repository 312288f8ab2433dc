"""Which schema of the table a Parquet file registered as it is belongs to
(``register_parquet(schema_mode=...)``).

A registered file is never rewritten, so it is read by the names and types of the schema
of the history it is registered under (:mod:`lethe.reading.scan`, by field id from there). In
``strict`` mode that is the current schema, which the file must match
(:func:`check_file_schema`). In ``merge`` mode the table first takes
the file's new columns and wider types (:func:`lethe.catalog.evolution.merge_changes`, one schema
commit; anything else refused with every differing column listed), then the file is
registered under the newest schema it matches exactly (an old-shape file under its old
schema, renamed columns included); a file matching none (a subset of the columns, some of
them narrower than the table's) gets its own shape recorded in the history
(:class:`~lethe.catalog.changes.RecordSchema`: the current ids, the file's names and types, never
current), so that its missing columns read as null and its narrower ones widened: nothing is
dropped, narrowed or cast in the file.

The Spark ingest job checks its Parquet inputs' footers the same way before it reads them
(:func:`evolve_for_inputs`): refused listing every input and column, or, with ``--evolve``,
the table evolved once to take them all.

>>> import pyarrow as pa
>>> from lethe.catalog.schemas import with_ids
>>> table = with_ids(pa.schema([("id", pa.int64(), False), ("n", pa.int64()), ("s", pa.string())]))
>>> shape = file_shape(pa.schema([("id", pa.int64()), ("n", pa.int32())]), table)
>>> [(f.name, str(f.type), f.metadata[b"PARQUET:field_id"]) for f in shape]
[('id', 'int64', b'1'), ('n', 'int32', b'2')]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.changes import RecordSchema
from lethe.catalog.commit import Direct
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.evolution import SchemaMode, merge_changes, renamed
from lethe.catalog.manifest import Operation
from lethe.catalog.schemas import Evolution, evolve, field_id
from lethe.catalog.tables import evolve_schema
from lethe.catalog.transforms.schema import aliases
from lethe.ingest.fit import as_table_types, same_type, schema_problems, widens
from lethe.ingest.inputs import InputObject
from lethe.ingest.readers import S3ObjectFile, open_parquet
from lethe.storage.store import S3Store

__all__ = [
    "check_file_ids",
    "check_file_schema",
    "evolve_for_inputs",
    "file_shape",
    "registered_schema",
]

log = logging.getLogger(__name__)


def check_file_schema(file_schema: pa.Schema, md: pq.FileMetaData, schema: pa.Schema) -> None:
    """Refuse a Parquet file that does not match the table schema, saying exactly why.

    Columns may come in any order; ``string``/``large_string`` and ``binary``/``large_binary``
    are interchangeable and any UTC spelling of a zoned timestamp is accepted. A column the
    table requires may be nullable in the file only if the file's statistics prove it has no
    nulls.

    Raises:
        SchemaMismatch: missing or unknown columns, other types, or possible nulls.
    """
    problems = schema_problems(file_schema, schema, typed=False)  # names; types below
    got = {f.name: f for f in file_schema}
    for f in schema:
        g = got.get(f.name)
        if g is None:
            continue
        if not same_type(g.type, f.type):
            hint = ""
            if (
                pa.types.is_timestamp(g.type)
                and g.type.unit == "ns"
                and pa.types.is_timestamp(f.type)
            ):
                hint = (
                    " (an INT96 or nanosecond timestamp: write microseconds, e.g. Spark's "
                    "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)"
                )
            problems.append(f"column {f.name!r} is {g.type}, the table has {f.type}{hint}")
            continue
        if not f.nullable and g.nullable and not _proven_non_null(md, f.name):
            problems.append(
                f"column {f.name!r} is required by the table but nullable in the file "
                "(and its statistics do not prove it has no nulls)"
            )
    if problems:
        raise errors.SchemaMismatch(
            "the Parquet file does not match the table schema: " + "; ".join(problems)
        )


def _proven_non_null(md: pq.FileMetaData, name: str) -> bool:
    leaf = next((i for i in range(md.num_columns) if md.schema.column(i).path == name), None)
    if leaf is None:
        return False
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(leaf).statistics
        if st is None or not st.has_null_count or st.null_count:
            return False
    return True


def file_shape(file_schema: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """The file's columns as fields of ``schema`` (ids, nullability, nested children), each
    with the file's type where it is narrower (a widening of ``schema`` read back)."""
    out = []
    for f in file_schema:
        t = schema.field(f.name)
        out.append(t if same_type(f.type, t.type) else t.with_type(f.type))
    return pa.schema(out, metadata=schema.metadata)


def _matches(file_schema: pa.Schema, md: pq.FileMetaData, schema: pa.Schema) -> bool:
    """Whether the file is exactly of ``schema`` (:func:`check_file_schema`'s rules)."""
    if set(file_schema.names) != set(schema.names):
        return False
    try:
        check_file_schema(file_schema, md, schema)
    except errors.SchemaMismatch:
        return False
    return True


def check_file_ids(file_schema: pa.Schema, schema: pa.Schema) -> None:
    """Refuse a file whose field ids name other columns of ``schema`` than its names do
    (engines read a file of the Iceberg view by its ids; a file without ids passes).

    Raises:
        SchemaMismatch: every column whose id differs.
    """
    bad = []
    for f in file_schema:
        fid, i = field_id(f), schema.get_field_index(f.name)
        want = field_id(schema.field(i)) if i >= 0 else None
        if fid is not None and want is not None and fid != want:
            bad.append(f"{f.name!r} has field id {fid}, the table's is {want}")
    if bad:
        raise errors.SchemaMismatch(
            "the file's field ids name other columns of the table (engines read it by id): "
            + "; ".join(bad)
        )


def registered_schema(
    table: TableContext, file_schema: pa.Schema, md: pq.FileMetaData, mode: SchemaMode
) -> tuple[TableContext, int, pa.Schema]:
    """The id and schema the file is registered under (its statistics are described by
    it), after evolving the table in ``merge`` mode; with the table after those commits. A column of the file under an earlier
    name of a current column is that column (the name mapping's alias).

    Raises:
        SchemaMismatch: strict: the file differs from the current schema; merge: a column
            no allowed evolution reconciles (every one listed), a required column missing,
            or nullable in the file without statistics proving it has no nulls; either:
            field ids in the file that name other columns.
    """
    if mode == "strict":
        check_file_schema(file_schema, md, table.schema)
        check_file_ids(file_schema, table.schema)
        return table, table.snapshot.current_schema_id, table.schema
    if mode != "merge":
        raise errors.InvalidRequest(f"schema_mode must be 'strict' or 'merge', not {mode!r}")
    named = renamed(file_schema, aliases(table.snapshot))
    changes = merge_changes(as_table_types(named, table.schema), table.schema)
    # checked before the table changes: a refusal leaves it as it was
    evolved, _, _ = evolve(
        table.schema, table.snapshot.manifest.column_id_high, changes, key=table.key
    )
    check_file_ids(named, evolved)
    known = pa.schema([f for f in file_schema if f.name in table.schema.names])
    check_file_schema(known, md, file_shape(known, table.schema))
    if changes:
        table = table.at(evolve_schema(table.catalog, tuple(changes)))
    for sid, s in reversed(table.snapshot.schema_history()):
        if _matches(file_schema, md, s):
            return table, sid, s
    shape = file_shape(named, table.schema)
    shape = pa.schema(
        [g.with_name(f.name) for f, g in zip(file_schema, shape, strict=True)],
        metadata=shape.metadata,
    )
    check_file_schema(file_schema, md, shape)
    op = Operation(kind="schema", params={"recorded": 1})
    table = table.at(table.catalog.commit_change(Direct(RecordSchema(shape, op))))
    history = table.snapshot.schema_history()
    sid = next(i for i, s in reversed(history) if s.equals(shape, check_metadata=True))
    log.info("recorded the file's shape as schema %s (%s columns)", sid, len(shape))
    return table, sid, shape


def _typed_problems(got: pa.Schema, schema: pa.Schema) -> list[str]:
    """What of a typed (Parquet) input the job would otherwise drop or cast down: columns
    the table lacks, types that are not a lossless widening into the table's (a missing
    nullable column reads as nulls, as in CSV and JSON)."""
    extra = [n for n in got.names if schema.get_field_index(n) < 0]
    out = [f"unknown columns {extra}"] if extra else []
    for g in got:
        i = schema.get_field_index(g.name)
        if i >= 0 and not widens(g.type, schema.field(i).type):
            out.append(f"column {g.name!r} is {g.type}, the table has {schema.field(i).type}")
    return out


def evolve_for_inputs(
    target: TableContext | HasContext, objects: Sequence[InputObject], *, evolve_: bool
) -> int:
    """Check the Parquet inputs of an ingest job against the table before anything is read
    (their footers only): without ``evolve_``, an input with a column the table lacks or a
    type that does not widen into the table's is refused; with it, the table evolves once
    to take them all (union by name, :func:`merge_changes`). CSV and JSON types are guessed,
    so their rows are checked as they are converted. Returns the schema changes committed.

    The check reads ``target``'s snapshot (a :class:`~lethe.Table` or its context); a handle
    is not moved (refresh it to write under the evolved schema).

    Raises:
        SchemaMismatch: listing every input and every differing column (nothing changed).
    """
    table = context_of(target)
    working, last = table.schema, table.snapshot.manifest.column_id_high
    alias = aliases(table.snapshot)
    changes: list[Evolution] = []
    problems: list[str] = []
    stores: dict[str, S3Store] = {}
    for o in objects:
        if o.format != "parquet":
            continue
        store = stores.setdefault(o.bucket, S3Store(o.bucket, client=table.store.client))
        got = open_parquet(S3ObjectFile(store, o.key, o.etag, o.size, chunk=1 << 20), o.uri)
        got_schema = as_table_types(got.schema_arrow, working)
        old = [
            f"column {n!r} is the earlier name of {alias[n]!r}"
            for n in got_schema.names
            if n in alias
        ]
        if old:  # the job reads by the current names: refused, not read as a new column
            problems.append(f"{o.uri}: " + "; ".join(old) + " (register_parquet maps it)")
            continue
        mine = _typed_problems(got_schema, working)
        if not mine:
            continue
        if not evolve_:
            problems.append(f"{o.uri}: " + "; ".join(mine))
            continue
        try:
            more = merge_changes(got_schema, working)
        except errors.SchemaMismatch as e:
            problems.append(f"{o.uri}: {e}")
            continue
        working, last, _ = evolve(working, last, more, key=table.key)
        changes.extend(more)
    if problems:
        hint = "" if evolve_ else " (--evolve lets new columns and widenings evolve the table)"
        raise errors.SchemaMismatch(
            f"{len(problems)} input file(s) do not fit the table schema{hint}; nothing was "
            "ingested:\n  " + "\n  ".join(problems)
        )
    if changes:
        evolve_schema(table.catalog, tuple(changes))
        log.info("evolved the schema for the inputs: %s changes", len(changes))
    return len(changes)
