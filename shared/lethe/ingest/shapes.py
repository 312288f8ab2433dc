"""Which schema of the table a Parquet file registered as it is belongs to
(``register_parquet(schema_mode=...)``).

A registered file is never rewritten, so it is read by the names and types of the schema
of the history it is registered under (:mod:`lethe.scan`, by field id from there). In
``strict`` mode that is the current schema, which the file must match
(:func:`~lethe.ingest.register.check_file_schema`). In ``merge`` mode the table first takes
the file's new columns and wider types (:func:`lethe.evolution.merge_changes`, one schema
commit; anything else refused with every differing column listed), then the file is
registered under the newest schema it matches exactly (an old-shape file under its old
schema, renamed columns included); a file matching none (a subset of the columns, some of
them narrower than the table's) gets its own shape recorded in the history
(:class:`~lethe.changes.RecordSchema`: the current ids, the file's names and types, never
current), so that its missing columns read as null and its narrower ones widened: nothing is
dropped, narrowed or cast in the file.

>>> import pyarrow as pa
>>> from lethe.schemas import with_ids
>>> table = with_ids(pa.schema([("id", pa.int64(), False), ("n", pa.int64()), ("s", pa.string())]))
>>> shape = file_shape(pa.schema([("id", pa.int64()), ("n", pa.int32())]), table)
>>> [(f.name, str(f.type), f.metadata[b"PARQUET:field_id"]) for f in shape]
[('id', 'int64', b'1'), ('n', 'int32', b'2')]
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog import Direct
from lethe.changes import RecordSchema
from lethe.evolution import SchemaMode, merge_changes
from lethe.ingest.fit import same_type
from lethe.manifest import Operation

if TYPE_CHECKING:  # pragma: no cover
    from lethe.table import Table

__all__ = ["file_shape", "registered_schema"]

log = logging.getLogger(__name__)


def _as_table_types(file_schema: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """``file_schema`` with each type Lethe treats as the table's (``string`` and
    ``large_string``, UTC spellings) replaced by the table's, for :func:`merge_changes`."""
    out = []
    for f in file_schema:
        i = schema.get_field_index(f.name)
        t = schema.field(i).type if i >= 0 and same_type(f.type, schema.field(i).type) else None
        out.append(f.with_type(t) if t is not None else f)
    return pa.schema(out)


def file_shape(file_schema: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """The file's columns as fields of ``schema`` (ids, nullability, nested children), each
    with the file's type where it is narrower (a widening of ``schema`` read back)."""
    out = []
    for f in file_schema:
        t = schema.field(f.name)
        out.append(t if same_type(f.type, t.type) else t.with_type(f.type))
    return pa.schema(out, metadata=schema.metadata)


def _matches(file_schema: pa.Schema, md: pq.FileMetaData, schema: pa.Schema, check: object) -> bool:
    if set(file_schema.names) != set(schema.names):
        return False
    try:
        check(file_schema, md, schema)  # type: ignore[operator]
    except errors.SchemaMismatch:
        return False
    return True


def registered_schema(
    table: Table, file_schema: pa.Schema, md: pq.FileMetaData, mode: SchemaMode
) -> tuple[int, pa.Schema]:
    """The id and schema the file is registered under (its statistics are described by
    it), after evolving the table in ``merge`` mode.

    Raises:
        SchemaMismatch: strict: the file differs from the current schema; merge: a column
            no allowed evolution reconciles (every one listed), a required column missing,
            or nullable in the file without statistics proving it has no nulls.
    """
    from lethe.ingest.register import check_file_schema

    if mode == "strict":
        check_file_schema(file_schema, md, table.schema)
        return table.manifest.current_schema_id, table.schema
    if mode != "merge":
        raise errors.InvalidRequest(f"schema_mode must be 'strict' or 'merge', not {mode!r}")
    changes = merge_changes(_as_table_types(file_schema, table.schema), table.schema)
    # required columns are checked before the table changes: a refusal leaves it as it was
    known = pa.schema([f for f in file_schema if f.name in table.schema.names])
    check_file_schema(known, md, file_shape(known, table.schema))
    if changes:
        table.update_schema().extend(changes).commit()
    for sid, s in reversed(table.schema_history):
        if _matches(file_schema, md, s, check_file_schema):
            return sid, s
    shape = file_shape(file_schema, table.schema)
    check_file_schema(file_schema, md, shape)
    op = Operation(kind="schema", params={"recorded": 1})
    table.catalog.commit_change(Direct(RecordSchema(shape, op)))
    table.refresh()
    sid = next(i for i, s in reversed(table.schema_history) if s.equals(shape, check_metadata=True))
    log.info("recorded the file's shape as schema %s (%s columns)", sid, len(shape))
    return sid, shape
