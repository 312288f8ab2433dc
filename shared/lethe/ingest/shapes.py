"""Which schema of the table a Parquet file registered as it is belongs to
(``register_parquet(schema_mode=...)``).

A registered file is never rewritten, so it is read by the names and types of the schema
of the history it is registered under (:mod:`lethe.reading.scan`, by field id from there). In
``strict`` mode that is the current schema, which the file must match
(:func:`check_file_schema`). In ``merge`` mode the table takes the file's new columns and
wider types (:func:`lethe.catalog.evolution.plan_merge`; anything else refused with every
differing column listed) in the registration's own commit (:func:`schema_steps`, a
transaction), and the file is registered under the newest schema it matches exactly (an old-shape file under its old
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
from lethe.catalog.changes import MergeSchema, RecordSchema, UpdateSchema
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.evolution import SchemaMode, describe_changes, plan_merge, renamed
from lethe.catalog.manifest import Operation
from lethe.catalog.schemas import as_table_types, field_id, fits, same_type
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import Staged, Step
from lethe.catalog.transforms.schema import aliases
from lethe.index.commits import transaction
from lethe.ingest.fit import schema_problems
from lethe.ingest.inputs import InputObject
from lethe.ingest.readers import S3ObjectFile, open_parquet
from lethe.storage.store import S3Store

__all__ = [
    "check_file_ids",
    "check_file_schema",
    "evolve_for_inputs",
    "file_shape",
    "registered_schema",
    "schema_steps",
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


def schema_steps(file_schema: pa.Schema, md: pq.FileMetaData, mode: SchemaMode) -> list[Step]:
    """The transaction steps that make a table take a Parquet file registered as it is, each
    planned on the snapshot the commit lands on (:mod:`lethe.catalog.transaction`): in
    ``merge`` mode the schema evolved for the file (:func:`~lethe.catalog.evolution.plan_merge`;
    checked first: a refusal changes nothing), then the file's shape recorded when no schema
    of the history is it (:class:`~lethe.catalog.changes.RecordSchema`). A column of the file
    under an earlier name of a current column is that column (the name mapping's alias).
    ``strict``: none (the file must match the current schema: :func:`registered_schema`).

    Raises:
        InvalidRequest: an unknown mode.
    """
    if mode == "strict":
        return []
    if mode != "merge":
        raise errors.InvalidRequest(f"schema_mode must be 'strict' or 'merge', not {mode!r}")

    def evolve_for_file(snap: Snapshot, _: bool) -> Staged:
        plan = plan_merge(file_schema, snap)
        check_file_ids(plan.shapes[0], plan.schema)
        schema = snap.arrow_schema()
        known = pa.schema([f for f in file_schema if f.name in schema.names])
        check_file_schema(known, md, file_shape(known, schema))
        op = Operation(kind="schema", params=describe_changes(plan.changes))
        return Staged(UpdateSchema(plan.changes, op) if plan.changes else None)

    def record_shape(snap: Snapshot, _: bool) -> Staged:
        if any(_matches(file_schema, md, s) for _, s in snap.schema_history()):
            return Staged(None)
        schema = snap.arrow_schema()
        shape = file_shape(renamed(file_schema, aliases(snap)), schema)
        shape = pa.schema(
            [g.with_name(f.name) for f, g in zip(file_schema, shape, strict=True)],
            metadata=shape.metadata,
        )
        check_file_schema(file_schema, md, shape)
        log.info("recording the file's shape in the schema history (%s columns)", len(shape))
        return Staged(RecordSchema(shape, Operation(kind="schema", params={"recorded": 1})))

    return [evolve_for_file, record_shape]


def registered_schema(
    snap: Snapshot, file_schema: pa.Schema, md: pq.FileMetaData, mode: SchemaMode
) -> tuple[int, pa.Schema]:
    """The id and schema of ``snap`` the file is registered under (its statistics are
    described by it): strict: the current schema, which the file must match; merge (after
    :func:`schema_steps`): the newest schema of the history the file matches.

    Raises:
        SchemaMismatch: the file differs from the current schema (strict), or field ids
            in the file name other columns.
    """
    if mode == "strict":
        check_file_schema(file_schema, md, snap.arrow_schema())
        check_file_ids(file_schema, snap.arrow_schema())
        return snap.current_schema_id, snap.arrow_schema()
    for sid, s in reversed(snap.schema_history()):
        if _matches(file_schema, md, s):
            return sid, s
    raise errors.SchemaMismatch(  # pragma: no cover - schema_steps recorded its shape
        "the file matches no schema of the table's history"
    )


def _typed_problems(got: pa.Schema, schema: pa.Schema) -> list[str]:
    """What of a typed (Parquet) input the job would otherwise drop or cast down: columns
    the table lacks, types that are not a lossless widening into the table's (a missing
    nullable column reads as nulls, as in CSV and JSON)."""
    extra = [n for n in got.names if schema.get_field_index(n) < 0]
    out = [f"unknown columns {extra}"] if extra else []
    for g in got:
        i = schema.get_field_index(g.name)
        if i >= 0 and not fits(g.type, schema.field(i).type):
            out.append(f"column {g.name!r} is {g.type}, the table has {schema.field(i).type}")
    return out


def evolve_for_inputs(
    target: TableContext | HasContext, objects: Sequence[InputObject], *, evolve_: bool
) -> int:
    """Check the Parquet inputs of an ingest job against the table before anything is read
    (their footers only): without ``evolve_``, an input with a column the table lacks or a
    type that does not fit the table's (:func:`lethe.catalog.schemas.fits`) is refused; with
    it, the table evolves once to take them all (:func:`~lethe.catalog.evolution.plan_merge`,
    one commit planned on the version it lands on). CSV and JSON types are guessed, so their
    rows are checked as they are converted. Returns the schema changes committed.

    The check reads ``target``'s snapshot (a :class:`~lethe.Table` or its context); a handle
    is not moved (refresh it to write under the evolved schema).

    Raises:
        SchemaMismatch: listing every input and every differing column (nothing changed).
    """
    table = context_of(target)
    schema, alias = table.schema, aliases(table.snapshot)
    problems: list[str] = []
    shapes: list[tuple[str, pa.Schema]] = []
    stores: dict[str, S3Store] = {}
    for o in objects:
        if o.format != "parquet":
            continue
        store = stores.setdefault(o.bucket, S3Store(o.bucket, client=table.store.client))
        got = open_parquet(S3ObjectFile(store, o.key, o.etag, o.size, chunk=1 << 20), o.uri)
        got_schema = as_table_types(got.schema_arrow, schema)
        old = [
            f"column {n!r} is the earlier name of {alias[n]!r}"
            for n in got_schema.names
            if n in alias
        ]
        if old:  # the job reads by the current names: refused, not read as a new column
            problems.append(f"{o.uri}: " + "; ".join(old) + " (register_parquet maps it)")
            continue
        mine = _typed_problems(got_schema, schema)
        if mine and not evolve_:
            problems.append(f"{o.uri}: " + "; ".join(mine))
        elif mine:
            shapes.append((o.uri, got_schema))
    if not problems and shapes:
        try:  # every input checked together, on the target's snapshot
            plan = plan_merge([s for _, s in shapes], table.snapshot, labels=[u for u, _ in shapes])
        except errors.SchemaMismatch as e:
            problems.extend(str(e).split("\n  ")[1:])
    if problems:
        hint = "" if evolve_ else " (--evolve lets new columns and widenings evolve the table)"
        raise errors.SchemaMismatch(
            f"{len(problems)} input file(s) do not fit the table schema{hint}; nothing was "
            "ingested:\n  " + "\n  ".join(problems)
        )
    if not shapes:
        return 0
    tx = transaction(table, "schema")  # planned again on the version it commits on
    for _, shape in shapes:
        tx.stage(_merge_step(shape))
    tx.commit()
    log.info("evolved the schema for the inputs: %s changes", len(plan.changes))
    return len(plan.changes)


def _merge_step(shape: pa.Schema) -> Step:
    def merge(snap: Snapshot, evolved: bool) -> Staged:
        return Staged(MergeSchema(shape))

    return merge
