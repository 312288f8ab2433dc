"""Bloom filters rebuilt from the values that remain, at the size the original had
(issue 37 item 2).

A splice must drop every bit an erased value set, so a chunk's filter is rebuilt from its
remaining values; fewer values in a bitset of the same size only lower its false-positive
rate, and a filter of the same size keeps the file's layout (the chunk is not rewritten
whole). pyarrow's writer sizes a filter by the distinct values it sees, so the filter is
built here (:mod:`lethe.parquet.sbbf`) from each value's plain encoding:

- *byte arrays* held as Arrow strings or binaries: their bytes, as they are;
- *booleans*: one byte, 0 or 1, as arrow-rs writers (DataFusion, delta-rs) hash them
  (pyarrow writes no filter for them); :func:`bloomable` gives that byte;
- *everything else*: the values' plain bytes as pyarrow writes them with the chunk's own
  writer options (INT96 timestamps, decimals as integers, ...), taken from the pages of a
  one-column PLAIN, uncompressed file of the non-null values.

The header is the one every common writer serializes (split block, xxHash64, uncompressed);
a filter whose length does not split into it and a bitset is not rebuilt.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet import sbbf
from lethe.parquet.enums import PhysicalType
from lethe.parquet.footer import chunk_range, parse_tail, walk_pages

__all__ = [
    "BLOOM_FPP",
    "bloom_filter",
    "bloom_ndv",
    "bloomable",
    "filter_layout",
    "value_hashes",
]

BLOOM_FPP = 0.05
"""The false-positive rate pyarrow's filters are sized with (with :func:`bloom_ndv`)."""

_WIDTH: dict[int, int] = {
    PhysicalType.BOOLEAN: 1,
    PhysicalType.INT32: 4,
    PhysicalType.INT64: 8,
    PhysicalType.INT96: 12,
    PhysicalType.FLOAT: 4,
    PhysicalType.DOUBLE: 8,
}


def bloom_ndv(num_bytes: int) -> int:
    """An NDV for which pyarrow sizes a bloom filter at ``num_bytes`` (with FPP 5%) when it
    sees at least that many distinct values.

    >>> bloom_ndv(32), bloom_ndv(1 << 20) > 100_000
    (27, True)
    """
    import math

    bits_per_value = -8.0 / math.log(1.0 - BLOOM_FPP ** (1.0 / 8.0))
    return max(1, int(num_bytes * 8 * 0.75 / bits_per_value))


def bloomable(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` as the byte a bloom filter hashes for each boolean (a ``binary(1)``,
    nulls kept), anything else unchanged.

    >>> bloomable(pa.array([True, None, False])).to_pylist()
    [b'\\x01', None, b'\\x00']
    """
    if not pa.types.is_boolean(values.type):
        return values
    return pc.if_else(values, b"\x01", b"\x00").cast(pa.binary(1))


def filter_layout(size: int) -> tuple[bytes, int] | None:
    """The header and bitset length of a filter ``size`` bytes long (header included), or
    None when no common header and split-block bitset add up to it.

    >>> h, n = filter_layout(4112)
    >>> n, len(h) + n
    (4096, 4112)
    >>> filter_layout(4000) is None
    True
    """
    if size < 33:
        return None
    n = 1 << (size.bit_length() - 1)
    while n >= 32:
        h = sbbf.header(n)
        if len(h) + n == size:
            return h, n
        n >>= 1
    return None


def _binary_hashes(values: pa.Array) -> np.ndarray:
    arr = values.cast(pa.large_binary())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return sbbf.xxhash64_var(offsets, data)


def _plain_hashes(
    values: pa.Array, physical: int, width: int, options: Mapping[str, Any]
) -> np.ndarray:
    """Hashes of fixed-width values' plain bytes, as pyarrow writes them under ``options``."""
    field = pa.field("v", values.type, nullable=False)
    opts = dict(options) | {
        "use_dictionary": False,
        "column_encoding": None,
        "compression": "none",
        "write_statistics": False,
        "write_page_index": False,
        "write_page_checksum": False,
        "data_page_version": "1.0",
        "bloom_filter_options": None,
    }
    buf = io.BytesIO()
    try:
        with pq.ParquetWriter(buf, pa.schema([field]), **opts) as w:
            w.write_table(pa.table({"v": values}, schema=pa.schema([field])))
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise SpliceRefused(f"pyarrow cannot write the values of a bloom filter: {e}") from e
    data = buf.getvalue()
    meta = parse_tail(data, len(data)).metadata
    cc = meta.row_groups[0].columns[0]
    if meta.leaves()[0][1].type != physical:
        raise SpliceRefused("the values of a bloom filter change physical type")
    body = b"".join(
        data[p.data_offset : p.end]
        for p in walk_pages(data, 0, chunk_range(cc))
        if p.header.is_data
    )
    if len(body) != width * len(values):
        raise SpliceRefused("the plain values of a bloom filter are not fixed-width")
    return sbbf.xxhash64_fixed(np.frombuffer(body, dtype=np.uint8).reshape(len(values), width))


# the Arrow types whose BYTE_ARRAY plain bytes are their values' bytes
_BYTE_ARRAYS = (
    pa.types.is_string,
    pa.types.is_binary,
    pa.types.is_large_string,
    pa.types.is_large_binary,
    pa.types.is_string_view,
    pa.types.is_binary_view,
)


def value_hashes(
    values: pa.Array | pa.ChunkedArray,
    physical: int,
    type_length: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """xxHash64 of the plain encoding of each non-null value, for a column of Parquet
    ``physical`` type (``type_length`` for FIXED_LEN_BYTE_ARRAY) written with pyarrow
    writer ``options``.

    Raises:
        SpliceRefused: The values' plain bytes are not known.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.drop_null()
    if not len(values):
        return np.zeros(0, dtype=np.uint64)
    if physical == PhysicalType.BOOLEAN:
        bits = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint8)
        return sbbf.xxhash64_fixed(bits.reshape(-1, 1))
    t = values.type
    if physical == PhysicalType.BYTE_ARRAY:
        if not any(is_type(t) for is_type in _BYTE_ARRAYS):
            raise SpliceRefused(f"the plain bytes of {t} byte arrays are not known")
        return _binary_hashes(values)
    if physical == PhysicalType.FIXED_LEN_BYTE_ARRAY and pa.types.is_fixed_size_binary(t):
        return _binary_hashes(values)
    width = type_length if physical == PhysicalType.FIXED_LEN_BYTE_ARRAY else _WIDTH.get(physical)
    if not width:
        raise SpliceRefused(f"no plain width for physical type {physical}")
    return _plain_hashes(values, physical, width, options or {})


def bloom_filter(
    values: pa.Array | pa.ChunkedArray,
    size: int,
    physical: int = PhysicalType.BOOLEAN,
    type_length: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> bytes | None:
    """The bloom filter (header and bitset) of the non-null ``values``, ``size`` bytes long
    as the original's was; None when no common header and bitset make ``size``.

    Raises:
        SpliceRefused: The values' plain bytes are not known (see :func:`value_hashes`).
    """
    layout = filter_layout(size)
    if layout is None:
        return None
    head, n = layout
    return head + sbbf.bitset(value_hashes(values, physical, type_length, options), n)
