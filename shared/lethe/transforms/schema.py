"""Schema changes: snapshot N+1 with an evolved schema (pure; see :mod:`lethe.schemas`).

The history keeps every schema by id; files keep the id they were written under; indexes
follow renamed columns in the same commit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lethe import errors
from lethe.manifest import EVOLVED_FORMAT_VERSION, Operation, SchemaVersion, schema_to_b64
from lethe.schemas import Evolution, evolve, field_id
from lethe.snapshot import Snapshot
from lethe.transforms.files import apply_properties

__all__ = ["apply_schema", "past_names", "pinned_columns", "record_schema"]


def pinned_columns(base: Snapshot) -> dict[str, str]:
    """Columns a table property names -> the property."""
    p = base.properties
    out = {c: "cluster_by" for c in p.cluster_by}
    if p.cluster_time_column:
        out[p.cluster_time_column] = "cluster_time_column"
    if p.retention_column:
        out[p.retention_column] = "retention_column"
    return out


def past_names(base: Snapshot) -> dict[str, int]:
    """Every name a schema of the history gave a column -> that column's id."""
    out: dict[str, int] = {}
    for _, s in base.schema_history():
        for f in s:
            out.setdefault(f.name, field_id(f) or 0)
    return out


def apply_schema(
    base: Snapshot, changes: Sequence[Evolution], operation: Operation
) -> Snapshot | None:
    """Snapshot N+1 = N with ``changes`` applied to its current schema (a new schema id),
    or None when they leave the schema as it is.

    Raises:
        SchemaEvolutionError: a change breaks a rule on this base.
    """
    schema = base.arrow_schema()
    new, last, renames = evolve(
        schema,
        base.manifest.column_id_high,
        changes,
        key=base.key,
        pinned=pinned_columns(base),
        indexed=[ix.column for ix in base.indexes],
        past_names=past_names(base),
    )
    if new.equals(schema, check_metadata=True):
        return None
    history = base.manifest.schemas or (
        SchemaVersion(schema_id=0, schema_b64=schema_to_b64(schema)),
    )
    sid = max(s.schema_id for s in history) + 1
    b64 = schema_to_b64(new)
    indexes = tuple(
        ix.model_copy(update={"column": renames[ix.column]}) if ix.column in renames else ix
        for ix in base.indexes
    )
    return apply_properties(base, base.properties, operation).evolve(
        schema_b64=b64,
        schemas=(*history, SchemaVersion(schema_id=sid, schema_b64=b64)),
        current_schema_id=sid,
        last_column_id=last,
        indexes=indexes,
        format_version=EVOLVED_FORMAT_VERSION,  # older Lethe refuses it by its version
    )


def record_schema(base: Snapshot, shape: pa.Schema, operation: Operation) -> Snapshot | None:
    """Snapshot N+1 = N with ``shape`` (the shape of a file registered as it is: a subset of
    the current columns, some of them narrower, with the current schema's ids) added to the
    history without becoming current, or None when the history holds it already.

    Raises:
        SchemaEvolutionError: a column of ``shape`` is not a column of the base (by id).
    """
    ids = {field_id(f) for _, s in base.schema_history() for f in s}
    missing = [f.name for f in shape if field_id(f) not in ids]
    if missing:
        raise errors.SchemaEvolutionError(
            f"columns {missing} of the file's shape are not columns of the table"
        )
    history = base.manifest.schemas or (
        SchemaVersion(schema_id=0, schema_b64=schema_to_b64(base.arrow_schema())),
    )
    for _, s in base.schema_history():
        if s.equals(shape, check_metadata=True):
            return None
    sid = max(s.schema_id for s in history) + 1
    return apply_properties(base, base.properties, operation).evolve(
        schemas=(*history, SchemaVersion(schema_id=sid, schema_b64=schema_to_b64(shape))),
        last_column_id=base.manifest.column_id_high,
        format_version=EVOLVED_FORMAT_VERSION,
    )
