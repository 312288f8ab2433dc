"""Parquet's split-block bloom filter, built at a given size (issue 37 item 2).

A splice rebuilds a chunk's bloom filter from the values that remain, at the size the
original had: fewer values in the same bitset only lower its false-positive rate, and the
chunk keeps its place (pyarrow's writer sizes a filter by the distinct values it sees, so it
cannot be asked for the original's size). The filter is the one the Parquet specification
defines: each value's plain encoding (no length prefix for byte arrays) hashed with xxHash64
(seed 0), a block of eight 32-bit words picked by the hash's upper half, one bit set in each
word by the lower half times a salt. Everything is vectorized with numpy; values of one
byte length are hashed together.

>>> h = xxhash64([b"", b"a", b"abc"])
>>> [hex(int(x)) for x in h]
['0xef46db3751d8e999', '0xd24ec4f1a98c6e5b', '0x44bc2cf5ad770999']
>>> bits = bitset(h, 32)
>>> len(bits), all(might_contain(bits, x) for x in h)
(32, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["bitset", "header", "might_contain", "xxhash64", "xxhash64_fixed"]

_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)
_LANE = np.arange(8, dtype=np.uint32) * np.uint32(32)  # bit 0 of each word of a block
_SALT = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    dtype=np.uint32,
)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _lanes(block: np.ndarray, width: int) -> np.ndarray:
    """Little-endian words of ``width`` bytes of each row of a (n, k*width) uint8 block."""
    n = block.shape[0]
    dt = np.dtype("<u8") if width == 8 else np.dtype("<u4")
    return np.ascontiguousarray(block).view(dt).reshape(n, -1).astype(np.uint64)


def xxhash64_fixed(data: np.ndarray) -> np.ndarray:
    """xxHash64 (seed 0) of each row of ``data``, a (n, length) uint8 array."""
    n, length = data.shape
    data = np.ascontiguousarray(data, dtype=np.uint8)
    with np.errstate(over="ignore"):
        at = 0
        if length >= 32:
            v = [
                np.full(n, _P1 + _P2, dtype=np.uint64) if i == 0 else np.zeros(n, np.uint64)
                for i in range(4)
            ]
            v[1] += _P2
            v[3] -= _P1
            stripes = length // 32
            lanes = _lanes(data[:, : stripes * 32], 8)
            for s in range(stripes):
                for i in range(4):
                    v[i] = _round(v[i], lanes[:, 4 * s + i])
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for i in range(4):
                h = (h ^ _round(np.zeros(n, np.uint64), v[i])) * _P1 + _P4
            at = stripes * 32
        else:
            h = np.full(n, _P5, dtype=np.uint64)
        h += np.uint64(length)
        while length - at >= 8:
            k1 = _round(np.zeros(n, np.uint64), _lanes(data[:, at : at + 8], 8)[:, 0])
            h = _rotl(h ^ k1, 27) * _P1 + _P4
            at += 8
        if length - at >= 4:
            h = _rotl(h ^ (_lanes(data[:, at : at + 4], 4)[:, 0] * _P1), 23) * _P2 + _P3
            at += 4
        while at < length:
            h = _rotl(h ^ (data[:, at].astype(np.uint64) * _P5), 11) * _P1
            at += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    out: np.ndarray = h
    return out


def xxhash64_var(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """xxHash64 of byte strings ``data[offsets[i]:offsets[i + 1]]``, those of one length
    hashed together."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    out = np.empty(len(lengths), dtype=np.uint64)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        idx = offsets[rows][:, None] + np.arange(int(length), dtype=np.int64)[None, :]
        out[rows] = xxhash64_fixed(data[idx].reshape(len(rows), int(length)))
    return out


def xxhash64(values: Sequence[bytes]) -> np.ndarray:
    """xxHash64 (seed 0) of each byte string (tests and small inputs)."""
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return xxhash64_var(offsets, np.frombuffer(b"".join(values), dtype=np.uint8))


def _bit_numbers(hashes: np.ndarray, num_bytes: int) -> np.ndarray:
    """The eight bits each hash sets, numbered little-endian over a bitset of ``num_bytes``
    (bit ``b`` of 32-bit word ``w`` is bit ``32 * w + b``)."""
    blocks = np.uint64(num_bytes // 32)
    with np.errstate(over="ignore"):
        block = ((hashes >> np.uint64(32)) * blocks) >> np.uint64(32)
        key = (hashes & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        bit = ((key[:, None] * _SALT[None, :]) >> np.uint32(27)) + _LANE[None, :]
    return (block.astype(np.int64)[:, None] * 256 + bit).ravel()


def bitset(hashes: np.ndarray, num_bytes: int) -> bytes:
    """The split-block bitset of ``num_bytes`` (a multiple of 32) holding ``hashes``."""
    if num_bytes < 32 or num_bytes % 32:
        raise ValueError(f"a split-block bitset is a multiple of 32 bytes, not {num_bytes}")
    bits = np.zeros(num_bytes * 8, dtype=bool)
    bits[_bit_numbers(np.asarray(hashes, dtype=np.uint64), num_bytes)] = True
    packed: bytes = np.packbits(bits, bitorder="little").tobytes()
    return packed


def might_contain(bits: bytes, h: np.uint64 | int) -> bool:
    """Whether the bitset ``bits`` may hold the value of hash ``h``."""
    flags = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")
    return bool(flags[_bit_numbers(np.array([h], dtype=np.uint64), len(bits))].all())


def header(num_bytes: int) -> bytes:
    """The BloomFilterHeader (split block, xxHash64, uncompressed) of a ``num_bytes`` bitset,
    as the common writers serialize it."""
    from lethe.parquet.thrift import Field, Struct, TType, encode

    def union(tag: int) -> Struct:
        return Struct((Field(tag, TType.STRUCT, Struct(())),))

    return encode(
        Struct(
            (
                Field(1, TType.I32, num_bytes),
                Field(2, TType.STRUCT, union(1)),
                Field(3, TType.STRUCT, union(1)),
                Field(4, TType.STRUCT, union(1)),
            )
        )
    )
