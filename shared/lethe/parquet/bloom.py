"""Bloom filters rebuilt from the values that remain, as their writer built them.

pyarrow's writer builds Parquet's split-block bloom filters (xxHash64 of each value's plain
bytes, sized by an NDV and a false-positive rate), and a splice asks it for a filter of the
original's size. It refuses BOOLEAN columns ("BloomFilterBuilder does not support boolean
type"), which arrow-rs writers (DataFusion, delta-rs) fill, hashing each value as one byte,
0 or 1. A FIXED_LEN_BYTE_ARRAY(1) of that byte is the same hash input, so pyarrow builds the
same filter from it: :func:`bloomable` turns booleans into it (a DataFusion file's filters are
reproduced byte for byte in ``tests/parquet/test_pq_partial_writers.py``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet.footer import parse_tail

__all__ = ["BLOOM_FPP", "bloom_filter", "bloom_ndv", "bloomable", "written_bloom"]

BLOOM_FPP = 0.05
"""The false-positive rate rebuilt filters are sized with (with :func:`bloom_ndv`)."""


def bloom_ndv(num_bytes: int) -> int:
    """An NDV for which pyarrow sizes a bloom filter at ``num_bytes`` (with FPP 5%).

    >>> bloom_ndv(32), bloom_ndv(1 << 20) > 100_000
    (27, True)
    """
    bits_per_value = -8.0 / math.log(1.0 - BLOOM_FPP ** (1.0 / 8.0))
    return max(1, int(num_bytes * 8 * 0.75 / bits_per_value))


def bloomable(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` as pyarrow's bloom filter builder takes them: booleans as the one byte
    arrow-rs hashes for each (a ``binary(1)``, nulls kept), anything else unchanged.

    >>> bloomable(pa.array([True, None, False])).to_pylist()
    [b'\\x01', None, b'\\x00']
    """
    if not pa.types.is_boolean(values.type):
        return values
    return pc.if_else(values, b"\x01", b"\x00").cast(pa.binary(1))


def bloom_filter(values: pa.Array | pa.ChunkedArray, size: int) -> bytes | None:
    """The bloom filter (header and bitset) of the non-null ``values``, ``size`` bytes long
    as the original's was; None when pyarrow sizes it otherwise.

    Raises:
        SpliceRefused: pyarrow cannot put these values in a bloom filter.
    """
    table = pa.table({"v": bloomable(values)})
    num_bytes = 1 << max(5, size.bit_length() - 1)
    return written_bloom(
        lambda buf: pq.write_table(
            table,
            buf,
            compression="none",
            use_dictionary=False,
            write_statistics=False,
            bloom_filter_options={"v": {"ndv": bloom_ndv(num_bytes), "fpp": BLOOM_FPP}},
        ),
        size,
        f"build a bloom filter of {values.type}",
    )


def written_bloom(write: Callable[[io.BytesIO], object], size: int, what: str) -> bytes | None:
    """The bloom filter (header and bitset) of the first chunk of the one-column file that
    ``write`` writes into the buffer it is given; None unless it is ``size`` bytes long.

    Raises:
        SpliceRefused: pyarrow cannot write the file (``what`` it was asked to do).
    """
    buf = io.BytesIO()
    try:
        write(buf)
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        raise SpliceRefused(f"pyarrow cannot {what}: {e}") from e
    tmp = buf.getvalue()
    md = parse_tail(tmp, len(tmp)).metadata.row_groups[0].columns[0].meta_data
    at, n = md.bloom_filter_offset, md.bloom_filter_length
    if at is None or n is None or n != size:
        return None
    return tmp[at : at + n]
