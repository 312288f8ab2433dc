"""Types between Arrow and Iceberg, both ways (pure).

* **Arrow -> Iceberg** (the view, :mod:`lethe.iceberg.mapping`): :func:`iceberg_schema` gives a
  Lethe schema fresh field ids in schema order (top-level columns ``1..n``, then nested ones)
  and a name mapping; a type with no exact Iceberg equivalent is refused.
  :func:`bound_bytes` is Iceberg's single-value serialization of a statistics value.
* **Iceberg -> Arrow** (adopted Iceberg tables, :mod:`lethe.adopt.iceberg`):
  :func:`arrow_schema` keeps the field ids (``PARQUET:field_id``, the conventions of
  :mod:`lethe.catalog.schemas`); strings and binaries are Arrow's 32-bit-offset types (Lethe's
  own), ``uuid`` is ``fixed_size_binary(16)``, ``timestamptz`` is UTC.

>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import NestedField, LongType, ListType, StringType
>>> s = arrow_schema(Schema(NestedField(1, "id", LongType(), required=True),
...                         NestedField(2, "tags", ListType(3, StringType()))), source="m.json")
>>> [(f.name, str(f.type), f.nullable, f.metadata[b"PARQUET:field_id"]) for f in s]
[('id', 'int64', False, b'1'), ('tags', 'list<element: string not null>', True, b'2')]
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
from pyiceberg.conversions import to_bytes
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
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
    PrimitiveType,
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

__all__ = [
    "FormatVersion",
    "IcebergSchema",
    "arrow_schema",
    "bound_bytes",
    "iceberg_schema",
    "schema_json",
]

FormatVersion = Literal[2, 3]


# --- Arrow -> Iceberg -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IcebergSchema:
    """A Lethe (Arrow) schema as Iceberg sees it."""

    schema: Schema
    name_mapping: str  # JSON for ``schema.name-mapping.default``
    last_column_id: int

    def field_id(self, column: str) -> int:
        return self.schema.find_field(column).field_id


_SUPPORTED = (
    "bool, int8/16/32/64, float32/64, decimal128 (precision <= 38), string, binary, "
    "fixed_size_binary, date32, time64[us], timestamp[us] (format 3 also timestamp[ns]), "
    "and lists, structs and maps of these"
)


def _refuse(path: str, t: pa.DataType, why: str = "") -> errors.IcebergUnsupported:
    return errors.IcebergUnsupported(
        f"column {path!r} has Arrow type {t}, which the Iceberg view cannot publish exactly"
        f"{': ' + why if why else ''}. Supported: {_SUPPORTED}."
    )


def _primitive(path: str, t: pa.DataType, fv: FormatVersion) -> PrimitiveType:
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_signed_integer(t):
        return LongType() if t.bit_width == 64 else IntegerType()
    if pa.types.is_unsigned_integer(t):
        raise _refuse(path, t, "Iceberg has no unsigned integers")
    if pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal128(t) and t.precision <= 38:
        return DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return BinaryType()
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_date32(t):
        return DateType()
    if pa.types.is_time64(t) and t.unit == "us":
        return TimeType()
    if pa.types.is_timestamp(t):
        if t.unit == "us":
            return TimestampType() if t.tz is None else TimestamptzType()
        if t.unit == "ns" and fv >= 3:
            return TimestampNanoType() if t.tz is None else TimestamptzNanoType()
        raise _refuse(
            path, t, f"Parquet stores {t.unit} timestamps in a unit Iceberg does not read"
        )
    raise _refuse(path, t)


def _convert(path: str, t: pa.DataType, ids: Iterator[int], fv: FormatVersion) -> IcebergType:
    if pa.types.is_struct(t):
        fids = [next(ids) for _ in range(t.num_fields)]
        return StructType(
            *(
                NestedField(
                    fid,
                    t.field(i).name,
                    _convert(f"{path}.{t.field(i).name}", t.field(i).type, ids, fv),
                    required=not t.field(i).nullable,
                )
                for i, fid in enumerate(fids)
            )
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        eid = next(ids)
        return ListType(
            eid,
            _convert(f"{path}.element", t.value_type, ids, fv),
            element_required=not t.value_field.nullable,
        )
    if pa.types.is_map(t):
        kid, vid = next(ids), next(ids)
        return MapType(
            kid,
            _convert(f"{path}.key", t.key_type, ids, fv),
            vid,
            _convert(f"{path}.value", t.item_type, ids, fv),
            value_required=not t.item_field.nullable,
        )
    return _primitive(path, t, fv)


def iceberg_schema(arrow: pa.Schema, *, format_version: FormatVersion) -> IcebergSchema:
    """The Iceberg schema (fresh field ids in order) and name mapping of a Lethe schema.

    Raises:
        IcebergUnsupported: a column's type has no exact Iceberg equivalent (unsigned integers,
            float16, second/millisecond timestamps, dictionaries, ...): refused rather than
            published wrong.

    Example:
        >>> s = iceberg_schema(pa.schema([("id", pa.int64(), False), ("n", pa.string())]), format_version=3)
        >>> [(f.field_id, f.name, str(f.field_type), f.required) for f in s.schema.fields]
        [(1, 'id', 'long', True), (2, 'n', 'string', False)]
        >>> json.loads(s.name_mapping)
        [{'names': ['id'], 'field-id': 1}, {'names': ['n'], 'field-id': 2}]
    """
    ids = itertools.count(1)  # field ids, in order
    top = [next(ids) for _ in arrow]
    fields = [
        NestedField(
            fid, f.name, _convert(f.name, f.type, ids, format_version), required=not f.nullable
        )
        for fid, f in zip(top, arrow, strict=True)
    ]
    schema = Schema(*fields, schema_id=0)
    mapping = create_mapping_from_schema(schema).model_dump_json()
    return IcebergSchema(schema, mapping, next(ids) - 1)  # the last id given


def schema_json(s: IcebergSchema) -> dict[str, Any]:
    """The schema as table metadata carries it (``type: struct``, ``schema-id``, ``fields``)."""
    out: dict[str, Any] = json.loads(s.schema.model_dump_json(by_alias=True, exclude_none=True))
    return out


def bound_bytes(t: IcebergType, v: Any) -> bytes | None:
    """Iceberg's single-value serialization of a Lethe statistics value (JSON form,
    docs/format.md §3), or None when it cannot be converted exactly."""
    if v is None or isinstance(v, bool) != isinstance(t, BooleanType):
        return None
    try:
        if isinstance(t, IntegerType | LongType | DateType | TimeType):
            return to_bytes(t, int(v)) if isinstance(v, int) else None
        if isinstance(t, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
            return to_bytes(t, int(v)) if isinstance(v, int) else None
        if isinstance(t, FloatType | DoubleType):
            f = float(v)
            return None if math.isnan(f) else to_bytes(t, f)
        if isinstance(t, DecimalType):
            return to_bytes(t, Decimal(str(v)))
        if isinstance(t, StringType):
            return to_bytes(t, v) if isinstance(v, str) else None
        if isinstance(t, BinaryType | FixedType):
            return to_bytes(t, base64.b64decode(v)) if isinstance(v, str) else None
        if isinstance(t, BooleanType):
            return to_bytes(t, bool(v))
    except (ValueError, TypeError, ArithmeticError):
        return None
    return None


# --- Iceberg -> Arrow -------------------------------------------------------------------------
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
