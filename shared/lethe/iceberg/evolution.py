"""The Iceberg view of an evolved table: every schema of its history with Lethe's field ids
(:mod:`lethe.catalog.schemas`), ``current-schema-id``, each snapshot's ``schema-id``, and a name
mapping that knows every name a column had (files written without ids resolve by it).

:func:`lethe.iceberg.types.iceberg_schema` converts the types (fresh ids in schema order,
which are Lethe's ids of a table that never evolved); :func:`view_schema` puts Lethe's ids
on them.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from lethe import errors
from lethe.catalog.schemas import (
    V3_PROMOTION_RULE,
    aliases,
    field_id,
    initial_default,
    v3_promotions,
)
from lethe.catalog.snapshot import Snapshot
from lethe.iceberg.types import FormatVersion, IcebergSchema, iceberg_schema, schema_json

__all__ = ["view_schema", "with_history"]


def _id(f: pa.Field) -> int:
    fid = field_id(f)
    if fid is None:  # pragma: no cover - Manifest.arrow_schema assigns every id
        raise AssertionError(f"field {f.name!r} has no id")
    return fid


def _type(t: IcebergType, a: pa.DataType) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(*(_field(c, a.field(i)) for i, c in enumerate(t.fields)))
    if isinstance(t, ListType):
        return ListType(
            _id(a.value_field),
            _type(t.element_type, a.value_type),
            element_required=t.element_required,
        )
    if isinstance(t, MapType):
        return MapType(
            _id(a.key_field),
            _type(t.key_type, a.key_type),
            _id(a.item_field),
            _type(t.value_type, a.item_type),
            value_required=t.value_required,
        )
    return t


def _field(f: NestedField, a: pa.Field) -> NestedField:
    d = initial_default(a)
    return NestedField(
        _id(a),
        f.name,
        _type(f.field_type, a.type),
        required=f.required,
        **({"initial_default": d} if d is not None else {}),
    )


def view_schema(
    arrow: pa.Schema, *, schema_id: int, format_version: FormatVersion, last_column_id: int
) -> IcebergSchema:
    """``arrow`` (every field with its id) as an Iceberg schema with those ids."""
    fresh = iceberg_schema(arrow, format_version=format_version)
    fields = [_field(f, a) for f, a in zip(fresh.schema.fields, arrow, strict=True)]
    schema = Schema(*fields, schema_id=schema_id)
    mapping = _with_aliases(create_mapping_from_schema(schema).model_dump_json(), arrow)
    return IcebergSchema(schema, mapping, last_column_id)


def _with_aliases(mapping: str, arrow: pa.Schema) -> str:
    """The name mapping with each column's other names in adopted files
    (:data:`lethe.catalog.schemas.ALIASES`: Delta physical names, names before a rename) after its
    own, so engines read such files without field ids (never a name another column has);
    unchanged when there are none."""
    taken = set(arrow.names)
    extra = {field_id(a): [n for n in aliases(a) if n not in taken] for a in arrow}
    extra = {k: v for k, v in extra.items() if v}
    if not extra:
        return mapping
    entries = json.loads(mapping)
    for e in entries:
        more = extra.get(e.get("field-id"), ())
        e["names"] = [*e["names"], *(n for n in more if n not in e["names"])]
    return json.dumps(entries)


def current_schema(m: Snapshot, format_version: FormatVersion) -> IcebergSchema:
    """The view's schema of ``m``. Its name mapping holds every column of the history
    (dropped ones too, as Iceberg keeps them) with every name it had, the current first:
    a file written without ids resolves by it whatever schema it was written under.

    Raises:
        IcebergUnsupported: a format-2 view of a table that widened a date to a timestamp.
    """
    last = m.manifest.column_id_high
    if format_version == 2:
        bad = v3_promotions([s for _, s in m.schema_history()], m.arrow_schema())
        if bad:
            raise errors.IcebergUnsupported(
                f"column {bad[0]!r}: {V3_PROMOTION_RULE}; publish the view in format 3"
            )
    s = view_schema(
        m.arrow_schema(),
        schema_id=m.current_schema_id,
        format_version=format_version,
        last_column_id=last,
    )
    if not m.manifest.schemas:
        return s
    entries: dict[int, dict[str, Any]] = {}
    mappings = [s.name_mapping] + [  # the current schema's names first, then newest first
        view_schema(
            a, schema_id=sid, format_version=format_version, last_column_id=last
        ).name_mapping
        for sid, a in reversed(m.schema_history())
    ]
    for mapping in mappings:
        for e in json.loads(mapping):
            have = entries.setdefault(e["field-id"], e)
            have["names"] += [n for n in e["names"] if n not in have["names"]]
    return IcebergSchema(s.schema, json.dumps(list(entries.values())), s.last_column_id)


def with_history(
    meta: dict[str, Any], m: Snapshot, format_version: FormatVersion
) -> dict[str, Any]:
    """Table metadata built for ``m`` with every schema of its history, the current schema
    id, and the new snapshot's ``schema-id`` (older snapshots keep theirs)."""
    if not m.manifest.schemas:
        return meta
    last = m.manifest.column_id_high
    schemas = [
        schema_json(
            view_schema(a, schema_id=sid, format_version=format_version, last_column_id=last)
        )
        for sid, a in m.schema_history()
    ]
    snaps = [
        {**s, "schema-id": m.current_schema_id} if s["snapshot-id"] == m.version else s
        for s in meta["snapshots"]
    ]
    current = current_schema(m, format_version)
    props = {**meta["properties"], "schema.name-mapping.default": current.name_mapping}
    return {
        **meta,
        "last-column-id": last,
        "current-schema-id": m.current_schema_id,
        "schemas": schemas,
        "snapshots": snaps,
        "properties": props,
    }
