"""The pure parts of the Delta source reader: schema, partition values, z85, deletion vectors.

Everything here follows the Delta protocol (``PROTOCOL.md``): the schema serialization format
(Spark's JSON schema, with ``delta.columnMapping.id`` / ``physicalName`` column metadata), the
partition value serialization (strings in the log, typed by the schema), and the deletion
vector format (a ``RoaringBitmapArray``: little-endian magic ``1681511377`` then a portable
64-bit Roaring bitmap; in files framed by a big-endian size and CRC-32, byte for byte the
Iceberg ``deletion-vector-v1`` blob, so :func:`lethe.dv.blob.decode_dv` validates both).

>>> partition_value("2026-01-02", pa.date32())
20455
>>> partition_value("", pa.int32()) is None
True
>>> partition_value("1970-01-01 00:00:01.5", pa.timestamp("us", tz="UTC"))
1500000
>>> z85_decode("HelloWorld").hex()
'864fd26fb559f75b'
>>> dv_file_name("ab" + z85_encode(bytes(range(16))))
'ab/deletion_vector_00010203-0405-0607-0809-0a0b0c0d0e0f.bin'
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.schemas import FIELD_ID
from lethe.catalog.values import JsonScalar, to_json
from lethe.dv.blob import decode_dv

__all__ = [
    "DELTA_DV_MAGIC",
    "DeltaSchema",
    "decode_bitmap_array",
    "delta_schema",
    "dv_file_name",
    "partition_value",
    "read_dv_file",
    "z85_decode",
    "z85_encode",
]

DELTA_DV_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_ID = "delta.columnMapping.id"
_PHYSICAL = "delta.columnMapping.physicalName"

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


# --- z85 -------------------------------------------------------------------------------------
def z85_decode(text: str) -> bytes:
    """Decode ZeroMQ's Z85 (5 characters -> 4 bytes, big-endian); a short last group decodes
    to its bytes (Delta pads inline DVs to a multiple of 4 and records the real size)."""
    out = bytearray()
    for i in range(0, len(text), 5):
        group = text[i : i + 5]
        value = 0
        try:
            for c in group.ljust(5, "#"):
                value = value * 85 + _Z85_VALUE[c]
        except KeyError as e:
            raise errors.UnsupportedSource(f"{text[:40]!r} is not z85 (character {e})") from e
        if value > 0xFFFFFFFF:
            raise errors.UnsupportedSource(f"{text[:40]!r} is not z85 (group {group!r} overflows)")
        out += struct.pack(">I", value)[: len(group) - 1 if len(group) < 5 else 4]
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Encode bytes (a multiple of 4 long) as Z85."""
    if len(data) % 4:
        raise errors.InvalidRequest("z85 encodes whole 4-byte groups")
    out = []
    for (value,) in struct.iter_unpack(">I", data):
        chars = []
        for _ in range(5):
            value, r = divmod(value, 85)
            chars.append(_Z85[r])
        out.append("".join(reversed(chars)))
    return "".join(out)


# --- deletion vectors ----------------------------------------------------------------------
def dv_file_name(path_or_inline_dv: str) -> str:
    """The table-relative file of a ``storageType='u'`` DV: ``<prefix>/deletion_vector_<uuid>.bin``
    (the last 20 characters are the z85-encoded UUID, any before them the random prefix)."""
    if len(path_or_inline_dv) < 20:
        raise errors.UnsupportedSource(
            f"deletion vector id {path_or_inline_dv!r} is shorter than a z85 UUID"
        )
    prefix, encoded = path_or_inline_dv[:-20], path_or_inline_dv[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def decode_bitmap_array(data: bytes) -> BitMap64:
    """Parse a Delta ``RoaringBitmapArray`` (magic, then the portable 64-bit bitmap).

    Raises:
        CorruptDeletionVector: wrong magic or a malformed bitmap.
    """
    if len(data) < 4 or struct.unpack_from("<I", data)[0] != DELTA_DV_MAGIC:
        raise errors.CorruptDeletionVector(
            "Delta deletion vector does not start with magic 1681511377"
        )
    framed = struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return decode_dv(framed)


def read_dv_file(body: bytes, offset: int, size: int, *, path: str) -> BitMap64:
    """The DV at ``offset`` of a DV file (``body`` is the file or its bytes from ``offset``
    when ``offset`` is 0 in it): big-endian ``dataSize``, the bitmap array, its CRC-32.

    Raises:
        CorruptDeletionVector: the size, magic or CRC does not match.
    """
    frame = body[offset : offset + 4 + size + 4]
    if len(frame) != size + 8 or struct.unpack_from(">I", frame)[0] != size:
        raise errors.CorruptDeletionVector(
            f"{path}: the deletion vector at {offset} is not {size} bytes"
        )
    return decode_dv(frame)  # checks magic and CRC-32 of the bitmap data


# --- partition values ----------------------------------------------------------------------
def _timestamp(raw: str, t: pa.TimestampType) -> int:
    v = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    if t.tz is not None:
        v = v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)
    elif v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return int(to_json(pa.scalar(v, t)) or 0)


def partition_value(raw: str | None, t: pa.DataType) -> JsonScalar:
    """A partition value as Delta serializes it (a string; empty or null is null) in the
    canonical JSON form of :mod:`lethe.catalog.values` for column type ``t``.

    Raises:
        UnsupportedSource: the string is not a value of the type.
    """
    if raw is None or raw == "":
        return None
    try:
        if pa.types.is_string(t):
            return raw
        if pa.types.is_integer(t):
            return to_json(pa.scalar(int(raw), t))
        if pa.types.is_floating(t):
            return to_json(pa.scalar(float(raw), t))
        if pa.types.is_boolean(t):
            if raw not in ("true", "false"):
                raise ValueError(raw)
            return raw == "true"
        if pa.types.is_date32(t):
            return to_json(pa.scalar(dt.date.fromisoformat(raw), t))
        if pa.types.is_timestamp(t):
            return _timestamp(raw, t)
        if pa.types.is_decimal(t):
            return to_json(pa.scalar(decimal.Decimal(raw), t))
        if pa.types.is_binary(t):
            return base64.b64encode(raw.encode("latin-1")).decode("ascii")
    except (ValueError, pa.ArrowInvalid, UnicodeEncodeError) as e:
        raise errors.UnsupportedSource(f"partition value {raw!r} is not a {t}: {e}") from e
    raise errors.UnsupportedSource(f"partition columns of type {t} are not read")


# --- schema --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DeltaSchema:
    """A Delta table schema in Arrow terms.

    Attributes:
        schema: the logical columns, with ``PARQUET:field_id`` when column mapping gives ids.
        physical_names: field id -> the column's name in the files (column mapping only).
        physical_of: logical top-level name -> physical name (for ``partitionValues`` keys).
    """

    schema: pa.Schema
    physical_names: Mapping[int, str] = field(default_factory=dict)
    physical_of: Mapping[str, str] = field(default_factory=dict)


class _Ids:
    def __init__(self, mapping: bool) -> None:
        self.mapping = mapping
        self.physical: dict[int, str] = {}


def _type(t: Any, path: str, ids: _Ids) -> pa.DataType:
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        if t.startswith("decimal(") and t.endswith(")"):
            p, s = (int(x) for x in t[8:-1].split(","))
            return pa.decimal128(p, s)
        raise errors.UnsupportedSource(
            f"column {path!r} has Delta type {t!r}, which Lethe does not read"
        )
    kind = t.get("type")
    if kind == "struct":
        return pa.struct([_field(f, f"{path}.", ids) for f in t["fields"]])
    if kind == "array":
        return pa.list_(
            pa.field(
                "element",
                _type(t["elementType"], f"{path}.element", ids),
                t.get("containsNull", True),
            )
        )
    if kind == "map":
        return pa.map_(
            pa.field("key", _type(t["keyType"], f"{path}.key", ids), False),
            pa.field(
                "value",
                _type(t["valueType"], f"{path}.value", ids),
                t.get("valueContainsNull", True),
            ),
        )
    raise errors.UnsupportedSource(
        f"column {path!r} has Delta type {kind!r}, which Lethe does not read"
    )


def _field(f: Mapping[str, Any], prefix: str, ids: _Ids) -> pa.Field:
    name = f["name"]
    meta = f.get("metadata") or {}
    arrow_meta = {}
    if ids.mapping:
        if _ID not in meta or _PHYSICAL not in meta:
            raise errors.UnsupportedSource(
                f"column {prefix}{name!r} has no {_ID} / {_PHYSICAL} although the table maps columns"
            )
        fid = int(meta[_ID])
        ids.physical[fid] = str(meta[_PHYSICAL])
        arrow_meta = {FIELD_ID: str(fid).encode()}
    return pa.field(
        name,
        _type(f["type"], f"{prefix}{name}", ids),
        bool(f.get("nullable", True)),
        arrow_meta or None,
    )


def delta_schema(schema_string: str, *, column_mapping: str = "none") -> DeltaSchema:
    """The Arrow schema of ``metaData.schemaString``; with column mapping (``name``/``id``),
    the mapping ids become field ids and physical names are recorded.

    >>> s = delta_schema('{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,'
    ...     '"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}',
    ...     column_mapping="name")
    >>> s.schema.field("a").metadata, dict(s.physical_names), dict(s.physical_of)
    ({b'PARQUET:field_id': b'1'}, {1: 'col-1'}, {'a': 'col-1'})

    Raises:
        UnsupportedSource: a type Lethe does not read (``variant``, ``void``, ...), or a mapped
            column without its id.
    """
    if column_mapping not in ("none", "name", "id"):
        raise errors.UnsupportedSource(f"delta.columnMapping.mode {column_mapping!r} is not known")
    parsed = json.loads(schema_string)
    ids = _Ids(column_mapping != "none")
    arrow = pa.schema([_field(f, "", ids) for f in parsed["fields"]])
    physical_of = {
        f["name"]: str((f.get("metadata") or {}).get(_PHYSICAL, f["name"]))
        for f in parsed["fields"]
    }
    return DeltaSchema(arrow, ids.physical, physical_of if ids.mapping else {})
