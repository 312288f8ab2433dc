"""A schema-less codec for the Thrift *compact protocol*, exact to the byte.

Parquet footers, page headers, column and offset indexes and bloom filter headers are Thrift
structs in the compact protocol. This codec decodes a struct without knowing its IDL into an
ordered, generic :class:`Struct` (every field, unknown ones included, in wire order) and
encodes it back. Whenever a writer chose a longer encoding where a shorter one was possible
(a long-form field header although the id delta fitted in a nibble, a varint list size
although the size fitted in the header nibble, a list of booleans typed with the "false"
code), the decoded value remembers it, so that ``encode(decode(b)) == b`` for everything the
common Parquet writers produce. Anything else that would not re-encode to the same bytes
(over-long varints, booleans in containers encoded neither 1 nor 2) is caught by comparing
bytes; see :func:`lethe.parquet.footer.check_roundtrip`.

>>> s = Struct((Field(1, TType.I32, 2), Field(4, TType.BINARY, b"id")))
>>> encode(s).hex()
'15043802696400'
>>> decode(encode(s)) == s
True
>>> s.get(4)
b'id'
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple, TypeAlias

from lethe.errors import LetheError

__all__ = [
    "Field",
    "Struct",
    "TType",
    "ThriftError",
    "ThriftList",
    "ThriftMap",
    "Value",
    "decode",
    "decode_prefix",
    "encode",
]

MAX_DEPTH = 64
"""Deepest nesting of structs and containers the decoder accepts (Parquet needs about 6)."""


class ThriftError(LetheError, ValueError):
    """Bytes are not a valid compact-protocol struct, or a value cannot be encoded."""


class TType(IntEnum):
    """Compact-protocol type codes.

    ``BOOL`` is code 1. In a struct field header, codes 1 and 2 carry the value itself
    (true, false); both decode to a :class:`Field` of type ``BOOL``. As the element type of a
    list, set or map, both mean "bool"; ``BOOL_FALSE`` records that a writer used code 2.
    """

    BOOL = 1
    BOOL_FALSE = 2
    BYTE = 3
    I16 = 4
    I32 = 5
    I64 = 6
    DOUBLE = 7
    BINARY = 8
    LIST = 9
    SET = 10
    MAP = 11
    STRUCT = 12
    UUID = 13


@dataclass(frozen=True, slots=True)
class Struct:
    """A decoded struct: its fields in wire order.

    Attributes:
        fields: The fields, in the order they were read (or are to be written).
    """

    fields: tuple[Field, ...] = ()

    def field(self, fid: int) -> Field | None:
        """The first field with id ``fid``, or None."""
        for f in self.fields:
            if f.id == fid:
                return f
        return None

    def get(self, fid: int) -> Value | None:
        """The value of field ``fid``, or None when absent."""
        for f in self.fields:
            if f.id == fid:
                return f.value
        return None

    def set(self, fid: int, ttype: TType, value: Value) -> Struct:
        """A copy with field ``fid`` set to ``value``.

        An existing field keeps its position and header form; a new one is inserted before
        the first field with a larger id (as a writer following the IDL would place it).
        """
        fields = list(self.fields)
        for i, f in enumerate(fields):
            if f.id == fid:
                fields[i] = f._replace(type=ttype, value=value)
                return Struct(tuple(fields))
        at = next((i for i, f in enumerate(fields) if f.id > fid), len(fields))
        fields.insert(at, Field(fid, ttype, value))
        return Struct(tuple(fields))

    def without(self, *fids: int) -> Struct:
        """A copy without the fields whose ids are in ``fids``."""
        return Struct(tuple(f for f in self.fields if f.id not in fids))


class Field(NamedTuple):
    """One field of a :class:`Struct` (a named tuple: a footer decodes into tens of
    thousands of them, and a tuple is built in half the time of a frozen dataclass).

    Attributes:
        id: The field id.
        type: Its compact type (``BOOL`` for booleans, whatever their value).
        value: The decoded value; for ``BOOL`` a Python bool, for integer types an int,
            ``DOUBLE`` a float, ``BINARY`` and ``UUID`` bytes, ``STRUCT`` a :class:`Struct`,
            ``LIST`` and ``SET`` a :class:`ThriftList`, ``MAP`` a :class:`ThriftMap`.
        long_form: The header was written as type byte + zigzag id although the id delta
            from the previous field fitted in the short form.
    """

    id: int
    type: TType
    value: Value
    long_form: bool = False


@dataclass(frozen=True, slots=True)
class ThriftList:
    """A list or set (the type of the enclosing field or element says which).

    Attributes:
        elem_type: Type of the elements.
        items: The element values.
        long_size: The size was written as a varint after a ``0xF`` nibble although it was
            below 15.
    """

    elem_type: TType
    items: tuple[Value, ...] = ()
    long_size: bool = False


@dataclass(frozen=True, slots=True)
class ThriftMap:
    """A map. An empty map is one zero byte on the wire: its types decode as ``0``.

    Attributes:
        key_type: Type of the keys.
        value_type: Type of the values.
        items: ``(key, value)`` pairs in wire order.
    """

    key_type: TType | int
    value_type: TType | int
    items: tuple[tuple[Value, Value], ...] = ()


Value: TypeAlias = bool | int | float | bytes | Struct | ThriftList | ThriftMap

_INT_BITS = {TType.BYTE: 8, TType.I16: 16, TType.I32: 32, TType.I64: 64}
_DOUBLE = _struct.Struct("<d")


# --- decoding -----------------------------------------------------------------------------
class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def fail(self, what: str) -> ThriftError:
        return ThriftError(f"{what} at byte {self.pos}")

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end of data")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        result = 0
        shift = 0
        while True:
            if pos >= end:
                self.pos = pos
                raise self.fail("unexpected end of data in varint")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift >= 70:
                self.pos = pos
                raise self.fail("varint longer than 10 bytes")

    def zigzag(self, bits: int) -> int:
        pos = self.pos
        if pos < self.end and self.buf[pos] < 0x80:  # one byte: always in range
            n = self.buf[pos]
            self.pos = pos + 1
            return (n >> 1) ^ -(n & 1)
        n = self.varint()
        v = (n >> 1) ^ -(n & 1)
        if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            raise self.fail(f"value {v} out of range for a {bits}-bit integer")
        return v

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"length {n} runs past the end of data")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)


_TYPES: tuple[TType | None, ...] = tuple(
    TType(c) if c in TType._value2member_map_ else None for c in range(16)
)
"""Each compact type code (a nibble) as its :class:`TType`; None for an unknown code."""


def _type(code: int, r: _Reader) -> TType:
    t = _TYPES[code] if 0 <= code < 16 else None
    if t is None:
        raise r.fail(f"unknown compact type {code}")
    return t


def _read_value(r: _Reader, t: TType, depth: int) -> Value:
    if t is TType.I32 or t is TType.I64 or t is TType.I16:
        return r.zigzag(_INT_BITS[t])
    if t is TType.BINARY:
        return r.take(r.varint())
    if t is TType.STRUCT:
        return _read_struct(r, depth + 1)
    if t is TType.BOOL or t is TType.BOOL_FALSE:  # only reached for container elements
        b = r.byte()
        if b not in (1, 2):
            raise r.fail(f"boolean element encoded as {b}")
        return b == 1
    if t is TType.BYTE:
        b = r.byte()
        return b - 256 if b > 127 else b
    if t is TType.DOUBLE:
        return float(_DOUBLE.unpack(r.take(8))[0])
    if t is TType.LIST or t is TType.SET:
        if depth >= MAX_DEPTH:
            raise r.fail("nesting too deep")
        h = r.byte()
        size = h >> 4
        long_size = False
        if size == 15:
            size = r.varint()
            long_size = size < 15
        et = _type(h & 0x0F, r)
        if size > r.end - r.pos:
            raise r.fail(f"container of {size} elements runs past the end of data")
        if et is TType.STRUCT:  # the common case (row groups, columns, schema)
            items: tuple[Value, ...] = tuple(_read_struct(r, depth + 2) for _ in range(size))
        else:
            items = tuple(_read_value(r, et, depth + 1) for _ in range(size))
        return ThriftList(et, items, long_size)
    if t is TType.MAP:
        if depth >= MAX_DEPTH:
            raise r.fail("nesting too deep")
        size = r.varint()
        if size == 0:
            return ThriftMap(0, 0, ())
        kv = r.byte()
        kt, vt = _type(kv >> 4, r), _type(kv & 0x0F, r)
        if size > r.end - r.pos:
            raise r.fail(f"map of {size} entries runs past the end of data")
        pairs = tuple(
            (_read_value(r, kt, depth + 1), _read_value(r, vt, depth + 1)) for _ in range(size)
        )
        return ThriftMap(kt, vt, pairs)
    if t is TType.UUID:
        return r.take(16)
    raise r.fail(f"unexpected type {t!r}")  # pragma: no cover - TType is exhaustive


def _read_struct(r: _Reader, depth: int) -> Struct:
    if depth > MAX_DEPTH:
        raise r.fail("nesting too deep")
    fields: list[Field] = []
    last = 0
    buf, end = r.buf, r.end
    while True:
        if r.pos >= end:
            raise r.fail("unexpected end of data")
        h = buf[r.pos]
        r.pos += 1
        if h == 0:
            return Struct(tuple(fields))
        code = h & 0x0F
        delta = h >> 4
        long_form = False
        if delta:
            fid = last + delta
            if fid > 0x7FFF:
                raise r.fail(f"field id {fid} out of range for a 16-bit integer")
        else:
            fid = r.zigzag(16)
            long_form = 0 < fid - last <= 15
        if code == 1 or code == 2:
            fields.append(Field(fid, TType.BOOL, code == 1, long_form))
        else:
            t = _TYPES[code]
            if t is None:
                raise r.fail(f"unknown compact type {code}")
            p = r.pos
            if 4 <= code <= 6 and p < end and buf[p] < 0x80:  # an integer of one byte
                n = buf[p]
                r.pos = p + 1
                fields.append(Field(fid, t, (n >> 1) ^ -(n & 1), long_form))
            elif code == 12:
                fields.append(Field(fid, t, _read_struct(r, depth + 1), long_form))
            else:
                fields.append(Field(fid, t, _read_value(r, t, depth), long_form))
        last = fid


def decode_prefix(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Struct, int]:
    """Decode one struct starting at ``offset``.

    Args:
        data: The buffer.
        offset: Where the struct starts.

    Returns:
        The struct and the offset just past it.

    Raises:
        ThriftError: The bytes are not a valid compact-protocol struct.
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    r = _Reader(buf, offset, len(buf))
    s = _read_struct(r, 0)
    return s, r.pos


def decode(data: bytes | bytearray | memoryview) -> Struct:
    """Decode a buffer that holds exactly one struct.

    Raises:
        ThriftError: The bytes are not one valid struct, or bytes follow it.
    """
    s, end = decode_prefix(data)
    if end != len(data):
        raise ThriftError(f"{len(data) - end} trailing bytes after the struct")
    return s


# --- encoding -----------------------------------------------------------------------------
def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(out: bytearray, v: Value, bits: int) -> None:
    if (
        not isinstance(v, int)
        or isinstance(v, bool)
        or not -(1 << (bits - 1)) <= v < (1 << (bits - 1))
    ):
        raise ThriftError(f"{v!r} is not a {bits}-bit integer")
    _varint(out, (v << 1) ^ (v >> (bits - 1)))


def _write_value(out: bytearray, t: TType | int, v: Value) -> None:
    if t == TType.I32 or t == TType.I64 or t == TType.I16:
        _zigzag(out, v, _INT_BITS[TType(t)])
    elif t == TType.BINARY:
        if not isinstance(v, bytes):
            raise ThriftError(f"binary value must be bytes, not {type(v).__name__}")
        _varint(out, len(v))
        out += v
    elif t == TType.STRUCT:
        if not isinstance(v, Struct):
            raise ThriftError(f"struct value must be a Struct, not {type(v).__name__}")
        _write_struct(out, v)
    elif t == TType.BOOL or t == TType.BOOL_FALSE:
        if not isinstance(v, bool):
            raise ThriftError(f"bool value must be a bool, not {type(v).__name__}")
        out.append(1 if v else 2)
    elif t == TType.BYTE:
        if not isinstance(v, int) or isinstance(v, bool) or not -128 <= v <= 127:
            raise ThriftError(f"{v!r} is not a byte")
        out.append(v & 0xFF)
    elif t == TType.DOUBLE:
        if not isinstance(v, float):
            raise ThriftError(f"double value must be a float, not {type(v).__name__}")
        out += _DOUBLE.pack(v)
    elif t == TType.LIST or t == TType.SET:
        if not isinstance(v, ThriftList):
            raise ThriftError(f"list value must be a ThriftList, not {type(v).__name__}")
        n = len(v.items)
        if n < 15 and not v.long_size:
            out.append((n << 4) | v.elem_type)
        else:
            out.append(0xF0 | v.elem_type)
            _varint(out, n)
        if v.elem_type == TType.STRUCT and all(type(x) is Struct for x in v.items):
            for item in v.items:
                _write_struct(out, item)  # type: ignore[arg-type]
        else:
            for item in v.items:
                _write_value(out, v.elem_type, item)
    elif t == TType.MAP:
        if not isinstance(v, ThriftMap):
            raise ThriftError(f"map value must be a ThriftMap, not {type(v).__name__}")
        _varint(out, len(v.items))
        if v.items:
            out.append((v.key_type << 4) | v.value_type)
            for k, x in v.items:
                _write_value(out, v.key_type, k)
                _write_value(out, v.value_type, x)
    elif t == TType.UUID:
        if not isinstance(v, bytes) or len(v) != 16:
            raise ThriftError("uuid value must be 16 bytes")
        out += v
    else:
        raise ThriftError(f"cannot encode type {t!r}")


def _write_struct(out: bytearray, s: Struct) -> None:
    last = 0
    for fid, t, v, long_form in s.fields:
        if t == 1 or t == 2:  # BOOL, BOOL_FALSE
            if not isinstance(v, bool):
                raise ThriftError(f"field {fid}: bool value must be a bool")
            code = 1 if v else 2
        else:
            code = int(t)
        delta = fid - last
        if 0 < delta <= 15 and not long_form:
            out.append((delta << 4) | code)
        else:
            out.append(code)
            _zigzag(out, fid, 16)
        last = fid
        if code <= 2:
            continue
        if (code == 5 or code == 6) and type(v) is int and -64 <= v < 64:
            out.append(((v << 1) ^ (v >> 63)) & 0x7F)  # an i32/i64 of one zigzag byte
        elif code == 12 and type(v) is Struct:
            _write_struct(out, v)
        elif code == 8 and type(v) is bytes:
            _varint(out, len(v))
            out += v
        else:
            _write_value(out, t, v)
    out.append(0)


def encode(s: Struct) -> bytes:
    """Encode a struct in the compact protocol.

    Raises:
        ThriftError: A value does not fit its declared type.
    """
    out = bytearray()
    _write_struct(out, s)
    return bytes(out)
