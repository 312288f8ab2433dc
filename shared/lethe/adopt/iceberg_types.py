"""Iceberg schemas as Arrow schemas with field ids (the conventions of :mod:`lethe.catalog.schemas`).

Every field carries ``PARQUET:field_id``; strings and binaries are Arrow's 32-bit-offset types
(Lethe's own), ``uuid`` is ``fixed_size_binary(16)``, ``timestamptz`` is UTC.

>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import NestedField, LongType, ListType, StringType
>>> s = arrow_schema(Schema(NestedField(1, "id", LongType(), required=True),
...                         NestedField(2, "tags", ListType(3, StringType()))), source="m.json")
>>> [(f.name, str(f.type), f.nullable, f.metadata[b"PARQUET:field_id"]) for f in s]
[('id', 'int64', False, b'1'), ('tags', 'list<element: string not null>', True, b'2')]
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from lethe import errors
from lethe.catalog.schemas import FIELD_ID

__all__ = ["arrow_schema"]

_PRIMITIVES: dict[type, pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    DateType: pa.date32(),
    TimeType: pa.time64("us"),
    TimestampType: pa.timestamp("us"),
    TimestamptzType: pa.timestamp("us", tz="UTC"),
    TimestampNanoType: pa.timestamp("ns"),
    TimestamptzNanoType: pa.timestamp("ns", tz="UTC"),
    StringType: pa.string(),
    BinaryType: pa.binary(),
    UUIDType: pa.binary(16),
}


def _field(f: NestedField, path: str, source: str) -> pa.Field:
    return pa.field(
        f.name,
        _type(f.field_type, f"{path}{f.name}", source),
        nullable=not f.required,
        metadata={FIELD_ID: str(f.field_id).encode()},
    )


def _type(t: IcebergType, path: str, source: str) -> pa.DataType:
    if isinstance(t, StructType):
        return pa.struct([_field(f, f"{path}.", source) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(_field(t.element_field, f"{path}.", source))
    if isinstance(t, MapType):
        return pa.map_(
            _field(t.key_field, f"{path}.", source), _field(t.value_field, f"{path}.", source)
        )
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(len(t))
    for cls, arrow in _PRIMITIVES.items():
        if type(t) is cls:
            return arrow
    raise errors.UnsupportedSource(
        f"{source}: column {path!r} has Iceberg type {t}, which Lethe does not read"
    )


def arrow_schema(schema: Schema, *, source: str) -> pa.Schema:
    """The Arrow schema of an Iceberg schema, field ids kept (``source`` names it in errors).

    Raises:
        UnsupportedSource: a type Lethe has no Arrow equivalent for (variant, geometry, unknown).
    """
    return pa.schema([_field(f, "", source) for f in schema.fields])
