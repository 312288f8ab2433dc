"""The compact-protocol codec: exact round trips, both ways, and strict decoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lethe.errors import LetheError
from lethe.parquet.thrift import (
    MAX_DEPTH,
    Field,
    Struct,
    ThriftError,
    ThriftList,
    ThriftMap,
    TType,
    Value,
    decode,
    decode_prefix,
    encode,
)

# --- strategies -------------------------------------------------------------------------
_INT_RANGES = {
    TType.BYTE: (-128, 127),
    TType.I16: (-(1 << 15), (1 << 15) - 1),
    TType.I32: (-(1 << 31), (1 << 31) - 1),
    TType.I64: (-(1 << 63), (1 << 63) - 1),
}
_SCALARS = [
    TType.BOOL,
    TType.BYTE,
    TType.I16,
    TType.I32,
    TType.I64,
    TType.DOUBLE,
    TType.BINARY,
    TType.UUID,
]
_ALL = [*_SCALARS, TType.LIST, TType.SET, TType.MAP, TType.STRUCT]


def values(t: TType, depth: int) -> st.SearchStrategy[Value]:
    """Values of type ``t`` in the form the decoder produces."""
    if t in (TType.BOOL, TType.BOOL_FALSE):
        return st.booleans()
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t is TType.DOUBLE:
        return st.floats(allow_nan=False)
    if t is TType.BINARY:
        return st.binary(max_size=40)
    if t is TType.UUID:
        return st.binary(min_size=16, max_size=16)
    if t is TType.STRUCT:
        return structs(depth + 1)
    if t in (TType.LIST, TType.SET):
        return lists(depth + 1)
    return maps(depth + 1)


def _types(depth: int) -> st.SearchStrategy[TType]:
    return st.sampled_from(_SCALARS if depth >= 3 else _ALL)


@st.composite
def lists(draw: st.DrawFn, depth: int) -> ThriftList:
    et = draw(_types(depth))
    if et is TType.BOOL:
        et = draw(st.sampled_from([TType.BOOL, TType.BOOL_FALSE]))
    items = tuple(draw(st.lists(values(et, depth), max_size=20 if depth < 2 else 3)))
    long_size = len(items) < 15 and draw(st.booleans())
    return ThriftList(et, items, long_size)


@st.composite
def maps(draw: st.DrawFn, depth: int) -> ThriftMap:
    kt, vt = draw(_types(depth)), draw(_types(depth))
    pairs = draw(st.lists(st.tuples(values(kt, depth), values(vt, depth)), max_size=4))
    if not pairs:
        return ThriftMap(0, 0, ())
    return ThriftMap(kt, vt, tuple(pairs))


@st.composite
def structs(draw: st.DrawFn, depth: int = 0) -> Struct:
    n = draw(st.integers(0, 8 if depth < 2 else 3))
    fields = []
    last = 0
    for _ in range(n):
        ids = [st.integers(-(1 << 15), (1 << 15) - 1)]
        if last < (1 << 15) - 1:
            ids.insert(0, st.integers(last + 1, min(last + 15, (1 << 15) - 1)))
        fid = draw(st.one_of(*ids))
        t = draw(_types(depth))
        long_form = 0 < fid - last <= 15 and draw(st.booleans())
        fields.append(Field(fid, t, draw(values(t, depth)), long_form))
        last = fid
    return Struct(tuple(fields))


# --- properties -------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(structs())
def test_encode_then_decode_is_identity(s: Struct) -> None:
    data = encode(s)
    assert decode(data) == s
    assert encode(decode(data)) == data


@settings(max_examples=100, deadline=None)
@given(structs(), st.binary(max_size=8))
def test_decode_prefix_stops_at_the_struct_end(s: Struct, trailer: bytes) -> None:
    data = encode(s)
    got, end = decode_prefix(b"xx" + data + trailer, 2)
    assert got == s
    assert end == 2 + len(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_decode_exactly_or_fail_cleanly(data: bytes) -> None:
    try:
        s, end = decode_prefix(data)
    except ThriftError:
        return
    # whatever decodes re-encodes to a struct that decodes the same way
    assert decode(encode(s)) == s
    assert end <= len(data)


# --- the subtleties that make byte-identity hard ----------------------------------------
def test_short_and_long_field_headers() -> None:
    s = Struct((Field(1, TType.I32, 7), Field(2, TType.I32, 8, long_form=True)))
    assert encode(s) == bytes([0x15, 14, 0x05, 4, 16, 0])
    assert decode(encode(s)) == s
    assert encode(Struct((Field(1, TType.I32, 7), Field(2, TType.I32, 8)))) == bytes(
        [0x15, 14, 0x15, 16, 0]
    )


def test_long_form_is_forced_for_big_or_backward_deltas() -> None:
    s = Struct((Field(20, TType.I32, 1), Field(3, TType.I32, 1), Field(-4, TType.I32, 1)))
    data = encode(s)
    assert data[0] == 0x05  # id 20: delta 20 does not fit a nibble
    back = decode(data)
    assert back == s
    assert not any(f.long_form for f in back.fields)


def test_bool_fields_carry_their_value_in_the_type_nibble() -> None:
    s = Struct((Field(1, TType.BOOL, True), Field(2, TType.BOOL, False)))
    assert encode(s) == bytes([0x11, 0x12, 0])
    assert decode(encode(s)) == s


def test_list_size_nibble_and_varint() -> None:
    short = ThriftList(TType.I32, tuple(range(14)))
    assert encode(Struct((Field(1, TType.LIST, short),)))[1] == 0xE5
    fifteen = ThriftList(TType.I32, tuple(range(15)))
    data = encode(Struct((Field(1, TType.LIST, fifteen),)))
    assert data[1:3] == bytes([0xF5, 15])
    forced = ThriftList(TType.I32, (1, 2), long_size=True)
    data = encode(Struct((Field(1, TType.LIST, forced),)))
    assert data[1:3] == bytes([0xF5, 2])
    assert decode(data).get(1) == forced


def test_bool_lists_keep_the_element_code() -> None:
    for et, code in ((TType.BOOL, 1), (TType.BOOL_FALSE, 2)):
        lst = ThriftList(et, (True, False))
        data = encode(Struct((Field(1, TType.LIST, lst),)))
        assert data[1:4] == bytes([0x20 | code, 1, 2])
        assert decode(data).get(1) == lst


def test_zigzag_extremes() -> None:
    s = Struct(
        (
            Field(1, TType.I64, -(1 << 63)),
            Field(2, TType.I64, (1 << 63) - 1),
            Field(3, TType.I16, -(1 << 15)),
            Field(4, TType.I32, -1),
            Field(5, TType.BYTE, -128),
        )
    )
    assert decode(encode(s)) == s
    assert encode(Struct((Field(1, TType.I32, -1),)))[1] == 1


def test_maps_and_sets() -> None:
    m = ThriftMap(TType.BINARY, TType.I64, ((b"a", 1), (b"b", -2)))
    s = Struct(
        (
            Field(1, TType.MAP, m),
            Field(2, TType.MAP, ThriftMap(0, 0, ())),
            Field(3, TType.SET, ThriftList(TType.BINARY, (b"x",))),
        )
    )
    data = encode(s)
    assert decode(data) == s
    assert data[1:3] == bytes([2, 0x86])


def test_double_bits_survive() -> None:
    for x in (0.0, -0.0, 1.5, float("inf"), 5e-324):
        data = encode(Struct((Field(1, TType.DOUBLE, x),)))
        assert data[1:9] == struct.pack("<d", x)
        assert encode(decode(data)) == data
    nan = struct.unpack("<d", bytes.fromhex("010000000000f87f"))[0]
    data = encode(Struct((Field(1, TType.DOUBLE, nan),)))
    assert encode(decode(data)) == data


def test_struct_editing_keeps_positions() -> None:
    s = Struct((Field(1, TType.I32, 1), Field(5, TType.I32, 5, long_form=True)))
    assert s.set(5, TType.I32, 6).fields[1] == Field(5, TType.I32, 6, long_form=True)
    assert [f.id for f in s.set(3, TType.I32, 3).fields] == [1, 3, 5]
    assert [f.id for f in s.set(9, TType.I32, 9).fields] == [1, 5, 9]
    assert s.without(1).get(1) is None
    assert s.get(5) == 5 and s.field(7) is None and s.get(7) is None


# --- strictness -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "end of data"),
        (bytes([0x15]), "end of data"),
        (bytes([0x15, 0x80]), "end of data in varint"),
        (bytes([0x15]) + b"\xff" * 11, "longer than 10 bytes"),
        (bytes([0x18, 5, 1]), "runs past the end"),
        (bytes([0x1E]), "unknown compact type 14"),
        (bytes([0x19, 0x31, 0, 1, 2, 0]), "boolean element encoded as 0"),
        (bytes([0x19, 0xF5, 0xFF, 0xFF, 0x03]), "runs past the end"),
        (bytes([0x14, 0x80, 0x80, 0x04, 0]), "out of range for a 16-bit"),
    ],
)
def test_malformed_input_is_rejected(data: bytes, message: str) -> None:
    with pytest.raises(ThriftError, match=message):
        decode(data)


def test_errors_are_lethe_errors() -> None:
    assert issubclass(ThriftError, LetheError)


def test_trailing_bytes_are_rejected_by_decode() -> None:
    with pytest.raises(ThriftError, match="trailing"):
        decode(bytes([0, 0]))


def test_nesting_is_bounded() -> None:
    deep = bytes([0x1C]) * (MAX_DEPTH + 2) + bytes(MAX_DEPTH + 3)
    with pytest.raises(ThriftError, match="too deep"):
        decode(deep)
    ok = bytes([0x1C]) * 10 + bytes(11)
    assert encode(decode(ok)) == ok


def test_overlong_varints_decode_but_do_not_round_trip() -> None:
    data = bytes([0x15, 0x82, 0x00, 0])  # 1 written in two varint bytes
    assert decode(data).get(1) == 1
    assert encode(decode(data)) != data


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (Field(1, TType.I32, 1 << 31), "32-bit"),
        (Field(1, TType.I32, True), "32-bit"),
        (Field(1, TType.BYTE, 200), "not a byte"),
        (Field(1, TType.BINARY, "text"), "must be bytes"),
        (Field(1, TType.STRUCT, 3), "must be a Struct"),
        (Field(1, TType.LIST, (1,)), "must be a ThriftList"),
        (Field(1, TType.MAP, {}), "must be a ThriftMap"),
        (Field(1, TType.DOUBLE, 1), "must be a float"),
        (Field(1, TType.UUID, b"short"), "16 bytes"),
        (Field(1, TType.BOOL, 1), "must be a bool"),
        (Field(1, TType.LIST, ThriftList(TType.BOOL, (1,))), "must be a bool"),
        (Field(1 << 16, TType.I32, 1), "16-bit"),
    ],
)
def test_encoding_checks_values(field: Field, message: str) -> None:
    with pytest.raises(ThriftError, match=message):
        encode(Struct((field,)))
