"""Decoding one row group from its bytes alone (DESIGN §4.2).

The group's bytes are wrapped as ``PAR1`` + group + a one-group footer (offsets moved,
index structures left out) and read with pyarrow, so that a splice never needs more of a
file than its footer and the groups it edits.

>>> import io, pyarrow as pa, pyarrow.parquet as pq
>>> from lethe.parquet.footer import parse_tail, row_group_range
>>> buf = io.BytesIO()
>>> pq.write_table(pa.table({"id": list(range(10))}), buf, row_group_size=5)
>>> data = buf.getvalue()
>>> meta = parse_tail(data, len(data)).metadata
>>> r = row_group_range(meta.row_groups[1])
>>> decode_row_group(meta, 1, data[r.start : r.end])["id"].to_pylist()
[5, 6, 7, 8, 9]
"""

from __future__ import annotations

import struct as _struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.errors import InvalidRequest, SpliceRefused, UnsupportedFile
from lethe.parquet.enums import CC, CMD, FMD, RG, PhysicalType
from lethe.parquet.footer import MAGIC, row_group_range
from lethe.parquet.model import FileMetaData
from lethe.parquet.offsets import set_int, shift_column, shifted, substruct, with_list
from lethe.parquet.thrift import TType, encode

__all__ = ["decode_row_group", "wrap_file"]


def _one_group_footer(meta: FileMetaData, k: int, *, keep_kv: bool) -> bytes:
    """A footer describing only group ``k``, its data placed right after the magic."""
    rg = meta.row_groups[k]
    rng = row_group_range(rg)
    move = shifted(rng, 4)
    cols = []
    for cc in rg.columns:
        s = shift_column(cc.struct, move)
        s = s.without(
            CC.OFFSET_INDEX_OFFSET,
            CC.OFFSET_INDEX_LENGTH,
            CC.COLUMN_INDEX_OFFSET,
            CC.COLUMN_INDEX_LENGTH,
        )
        md = substruct(s, CC.META_DATA).without(CMD.BLOOM_FILTER_OFFSET, CMD.BLOOM_FILTER_LENGTH)
        cols.append(s.set(CC.META_DATA, TType.STRUCT, md))
    g = with_list(rg.struct, RG.COLUMNS, cols)
    if rg.file_offset is not None:
        g = set_int(g, RG.FILE_OFFSET, 4)
    if rg.ordinal is not None:
        g = set_int(g, RG.ORDINAL, 0, TType.I16)
    fm = with_list(meta.struct, FMD.ROW_GROUPS, [g])
    fm = set_int(fm, FMD.NUM_ROWS, rg.num_rows)
    if not keep_kv:
        fm = fm.without(FMD.KEY_VALUE_METADATA)
    return encode(fm)


def wrap_file(body: bytes, footer_raw: bytes) -> bytes:
    """A Parquet file of ``body`` (placed right after the leading magic) and a footer."""
    return MAGIC + body + footer_raw + _struct.pack("<I", len(footer_raw)) + MAGIC


def decode_row_group(meta: FileMetaData, rg_index: int, rg_bytes: bytes) -> pa.Table:
    """Decode one row group from its bytes alone.

    The bytes are wrapped as ``PAR1`` + group + a one-group footer (offsets moved, index
    structures left out, key-value metadata kept so that ``ARROW:schema`` types come back)
    and read with pyarrow.

    Args:
        meta: The file's footer.
        rg_index: Which group.
        rg_bytes: Its bytes, exactly its :func:`~lethe.parquet.footer.row_group_range`.

    Returns:
        The group's rows.

    Raises:
        UnsupportedFile: The file is encrypted or a chunk lives in another file.
        SpliceRefused: INT96 timestamps lie outside the range pyarrow decodes exactly
            (1677-2262), so the rows could not be re-encoded bit for bit.
        InvalidRequest: ``rg_bytes`` does not have the group's length.
    """
    if meta.encrypted:
        raise UnsupportedFile("Parquet files with encrypted columns are not supported")
    rng = row_group_range(meta.row_groups[rg_index])
    if len(rg_bytes) != rng.length:
        raise InvalidRequest(
            f"row group {rg_index} spans {rng.length} bytes, {len(rg_bytes)} were given"
        )
    file = wrap_file(rg_bytes, _one_group_footer(meta, rg_index, keep_kv=True))
    # one thread: splices run several files at once already, and pyarrow's pool on top of
    # them only adds hand-offs (issue 37 item 4: client CPU)
    table = pq.ParquetFile(pa.BufferReader(file)).read(use_threads=False)
    if any(e.type == PhysicalType.INT96 for _, e, _, _ in meta.leaves()):
        # pyarrow decodes INT96 to nanoseconds and silently wraps outside 1677-2262: decode
        # again to microseconds (no overflow) and compare
        coarse = pq.ParquetFile(pa.BufferReader(file), coerce_int96_timestamp_unit="us").read(
            use_threads=False
        )
        for a, b in zip(_timestamp_leaves(table), _timestamp_leaves(coarse), strict=True):
            if not (_micros(a) == _micros(b)).all():
                raise SpliceRefused(
                    "INT96 timestamps lie outside 1677-2262 and cannot be decoded exactly"
                )
    return table


def _timestamp_leaves(data: pa.Table | pa.Array) -> list[pa.Array]:
    """Every timestamp array in a table, nested ones included, in a stable order."""
    if isinstance(data, pa.Table):
        return [x for col in data.columns for x in _timestamp_leaves(col.combine_chunks())]
    if isinstance(data, pa.ChunkedArray):
        return _timestamp_leaves(data.combine_chunks())
    t = data.type
    if pa.types.is_timestamp(t):
        return [data]
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in _timestamp_leaves(data.field(i))]
    if pa.types.is_map(t):
        return _timestamp_leaves(data.keys) + _timestamp_leaves(data.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _timestamp_leaves(data.values)
    if pa.types.is_dictionary(t):
        return _timestamp_leaves(data.dictionary)
    return []


_PER_US = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


def _micros(a: pa.Array) -> Any:
    """A timestamp array as whole microseconds (floor), nulls as 0, in a numpy array."""
    mul, div = _PER_US[a.type.unit]
    v = a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return v * mul // div
