"""Schema changes: snapshot N+1 with an evolved schema (pure; see :mod:`lethe.catalog.schemas`).

The history keeps every schema by id; files keep the id they were written under; indexes
follow renamed columns in the same commit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lethe import errors
from lethe.catalog.manifest import (
    EVOLVED_FORMAT_VERSION,
    Operation,
    SchemaVersion,
    TableProperties,
    schema_to_b64,
)
from lethe.catalog.schemas import V3_PROMOTION_RULE, Evolution, evolve, field_id, v3_promotions
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms.files import apply_properties

__all__ = [
    "aliases",
    "apply_schema",
    "check_view_promotions",
    "past_names",
    "pinned_columns",
    "record_schema",
]


def pinned_columns(base: Snapshot) -> dict[str, str]:
    """Columns a table property names -> the property."""
    p = base.properties
    out = {c: "cluster_by" for c in p.cluster_by}
    if p.cluster_time_column:
        out[p.cluster_time_column] = "cluster_time_column"
    if p.retention_column:
        out[p.retention_column] = "retention_column"
    return out


def _v2_view(p: TableProperties) -> bool:
    return p.iceberg_view and p.iceberg_format_version == 2


def _history(base: Snapshot) -> list[pa.Schema]:
    return [s for _, s in base.schema_history()]


def check_view_promotions(
    base: Snapshot,
    props: TableProperties,
    history: Sequence[pa.Schema],
    current: pa.Schema,
    error: type[errors.InvalidRequest] = errors.SchemaEvolutionError,
) -> None:
    """Refuse a table of properties ``props`` and schemas ``history`` then ``current``
    (``base`` changed) that publishes a format-2 Iceberg view of a date widened to a
    timestamp (a promotion of format 3 only), unless ``base`` published that already.

    Raises:
        SchemaEvolutionError: (or ``error``) naming the column and the rule.
    """
    if not _v2_view(props):
        return
    had = v3_promotions(_history(base), base.arrow_schema()) if _v2_view(base.properties) else []
    bad = [n for n in v3_promotions(history, current) if n not in had]
    if bad:
        raise error(
            f"column {bad[0]!r}: {V3_PROMOTION_RULE}; the table publishes a format-2 view "
            "(iceberg_view, iceberg_format_version=2)"
        )


def aliases(base: Snapshot) -> dict[str, str]:
    """Earlier names of the current columns -> their current names (the name mapping's
    aliases: data or a file written under an older name resolves by it)."""
    now = {field_id(f): f.name for f in base.arrow_schema()}
    return {
        n: now[fid] for n, fid in past_names(base).items() if n not in now.values() and fid in now
    }


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
    check_view_promotions(base, base.properties, _history(base), new)
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
    check_view_promotions(base, base.properties, [*_history(base), shape], base.arrow_schema())
    sid = max(s.schema_id for s in history) + 1
    return apply_properties(base, base.properties, operation).evolve(
        schemas=(*history, SchemaVersion(schema_id=sid, schema_b64=schema_to_b64(shape))),
        last_column_id=base.manifest.column_id_high,
        format_version=EVOLVED_FORMAT_VERSION,
    )
