"""Pages re-encoded against a chunk's OWN dictionary, and that dictionary scrubbed of the
entries no remaining row uses (issue 37 item 2, DESIGN §4 "Page level").

A page-level splice of a dictionary-encoded chunk re-encodes only the pages holding erased
rows. pyarrow writes the kept rows of those pages with a dictionary of its own (so its page
statistics, column-index entries and level encoding are a writer's); here each such page's
indices are mapped onto the chunk's dictionary (entries compared by their plain bytes, so
exactly) and written as RLE/bit-packed runs at the bit width the chunk's dictionary implies.
The chunk stays dictionary-encoded: no plain page precedes dictionary-encoded ones, which
Spark's vectorized reader cannot read.

An erased value must not survive in the dictionary either: every entry that no remaining
dictionary-encoded page references (the indices of all the chunk's pages are decoded) is
overwritten with a copy of a referenced entry. Indices keep their meaning, so unchanged
pages keep their bytes; an unreferenced entry is never read.

>>> v = np.array([3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 2, 0])
>>> enc = rle_encode(v, 2)
>>> rle_decode(enc, 2, len(v)).tolist() == v.tolist()
True
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lethe.parquet.chunkmeta import WholeChunk
from lethe.parquet.enums import DPH, DPH2, PH, Codec, Encoding, PageType, PhysicalType
from lethe.parquet.footer import Page
from lethe.parquet.model import InvalidParquet, PageHeader
from lethe.parquet.thrift import Struct, TType, encode

__all__ = [
    "Dictionary",
    "bit_width",
    "page_indices",
    "remapped_page",
    "rle_decode",
    "rle_encode",
]

DICT_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})
_CODECS: dict[int, str | None] = {
    Codec.UNCOMPRESSED: None,
    Codec.SNAPPY: "snappy",
    Codec.GZIP: "gzip",
    Codec.BROTLI: "brotli",
    Codec.ZSTD: "zstd",
    Codec.LZ4_RAW: "lz4_raw",
}
_WIDTH: dict[int, int] = {
    PhysicalType.INT32: 4,
    PhysicalType.INT64: 8,
    PhysicalType.INT96: 12,
    PhysicalType.FLOAT: 4,
    PhysicalType.DOUBLE: 8,
}
_LITERAL_MAX = 63 * 8  # values of one bit-packed run (one header byte), as writers emit


# --- the RLE / bit-packing hybrid -----------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 35:
            raise InvalidParquet("an RLE run header runs past its page")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def rle_decode(buf: bytes, width: int, count: int) -> np.ndarray:
    """``count`` values of ``width`` bits from RLE/bit-packed hybrid runs (no length prefix).

    Raises:
        InvalidParquet: The runs end before ``count`` values.
    """
    out = np.zeros(count, dtype=np.int64)
    weights = np.left_shift(np.int64(1), np.arange(width, dtype=np.int64))
    nbytes = (width + 7) // 8
    pos = n = 0
    while n < count:
        head, pos = _varint(buf, pos)
        if head & 1:
            vals = (head >> 1) * 8
            size = (head >> 1) * width
            if pos + size > len(buf):
                raise InvalidParquet("a bit-packed run runs past its page")
            take = min(vals, count - n)
            if width:
                bits = np.unpackbits(np.frombuffer(buf, np.uint8, size, pos), bitorder="little")
                out[n : n + take] = bits.reshape(vals, width)[:take].astype(np.int64) @ weights
            pos += size
        else:
            if pos + nbytes > len(buf):
                raise InvalidParquet("an RLE run runs past its page")
            take = min(head >> 1, count - n)
            out[n : n + take] = int.from_bytes(buf[pos : pos + nbytes], "little")
            pos += nbytes
        if take <= 0 and n < count:
            raise InvalidParquet("an empty RLE run")
        n += take
    return out


def _literal(out: bytearray, values: np.ndarray, width: int) -> None:
    for s in range(0, len(values), _LITERAL_MAX):
        part = values[s : s + _LITERAL_MAX]
        groups = -(-len(part) // 8)
        padded = np.zeros(groups * 8, dtype=np.int64)
        padded[: len(part)] = part
        _put_varint(out, (groups << 1) | 1)
        if width:
            bits = (padded[:, None] >> np.arange(width, dtype=np.int64)) & 1
            out += np.packbits(bits.astype(np.uint8).ravel(), bitorder="little").tobytes()


def rle_encode(values: np.ndarray, width: int, min_run: int = 16) -> bytes:
    """``values`` as RLE/bit-packed hybrid runs of ``width`` bits: repeats of at least
    ``min_run`` as RLE runs, the rest bit-packed in groups of eight (only the last run padded)."""
    values = np.asarray(values, dtype=np.int64)
    n = len(values)
    out = bytearray()
    if not n:
        return bytes(out)
    change = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    long = np.flatnonzero(ends - starts >= min_run)
    nbytes = (width + 7) // 8
    lit = 0
    for r in long:
        s, e = int(starts[r]), int(ends[r])
        s += (-(s - lit)) % 8  # a bit-packed run before an RLE one holds a multiple of 8
        if e - s < 8:
            continue
        if s > lit:
            _literal(out, values[lit:s], width)
        _put_varint(out, (e - s) << 1)
        out += int(values[s]).to_bytes(nbytes, "little")
        lit = e
    if lit < n:
        _literal(out, values[lit:], width)
    return bytes(out)


def bit_width(entries: int) -> int:
    """Bits of an index into a dictionary of ``entries`` (at least 1)."""
    return max(1, (entries - 1).bit_length())


# --- page bodies ----------------------------------------------------------------------------
def _codec(codec: int) -> pa.Codec | None:
    if codec not in _CODECS:
        raise WholeChunk("a codec pages cannot be re-encoded in")
    name = _CODECS[codec]
    return None if name is None else pa.Codec(name)


def _decompress(codec: int, data: bytes, size: int) -> bytes:
    c = _codec(codec)
    if c is None:
        return data
    out: bytes = c.decompress(data, decompressed_size=size).to_pybytes()
    return out


def _compress(codec: int, data: bytes) -> bytes:
    c = _codec(codec)
    if c is None:
        return data
    out: bytes = c.compress(data, asbytes=True)
    return out


@dataclass(frozen=True, slots=True)
class _Body:
    """A dictionary-encoded data page taken apart: its level bytes (kept as they are,
    compressed alongside the values in a v1 page), its values' non-null count and
    decompressed index runs."""

    levels: bytes
    nonnull: int
    indices: np.ndarray


def _num(s: Struct, fid: int) -> int:
    v = s.get(fid)
    return v if isinstance(v, int) else 0


def _split(h: PageHeader, data: bytes, codec: int, max_def: int) -> _Body:
    """The parts of the data page of header ``h`` and stored bytes ``data``."""
    if h.encoding not in DICT_ENCODINGS:
        raise InvalidParquet("not a dictionary-encoded page")
    n = h.num_values or 0
    if h.type == PageType.DATA_PAGE_V2:
        v2 = h.struct.get(PH.DATA_PAGE_HEADER_V2)
        assert isinstance(v2, Struct)
        lv = _num(v2, DPH2.DEFINITION_LEVELS_BYTE_LENGTH) + _num(
            v2, DPH2.REPETITION_LEVELS_BYTE_LENGTH
        )
        levels, values = data[:lv], data[lv:]
        if v2.get(DPH2.IS_COMPRESSED) is not False:
            values = _decompress(codec, values, h.uncompressed_page_size - lv)
        nonnull = n - _num(v2, DPH2.NUM_NULLS)
    else:
        raw = _decompress(codec, data, h.uncompressed_page_size)
        lv, nonnull = 0, n
        if max_def:
            size = int.from_bytes(raw[:4], "little")
            lv = 4 + size
            defs = rle_decode(raw[4:lv], bit_width(max_def + 1), n)
            nonnull = int(np.count_nonzero(defs == max_def))
        levels, values = raw[:lv], raw[lv:]
    if not values:
        return _Body(levels, nonnull, np.zeros(0, dtype=np.int64))
    return _Body(levels, nonnull, rle_decode(values[1:], values[0], nonnull))


def page_indices(page: Page, data: bytes, codec: int, max_def: int) -> np.ndarray:
    """The dictionary indices of the dictionary-encoded data ``page`` (``data`` its stored
    bytes, header excluded)."""
    return _split(page.header, data, codec, max_def).indices


def remapped_page(
    page: Page,
    data: bytes,
    codec: int,
    max_def: int,
    mapping: np.ndarray,
    width: int,
    encoding: int,
) -> tuple[PageHeader, bytes]:
    """A dictionary-encoded page of a temporary file (stored bytes ``data``, compressed with
    ``codec``) with its indices mapped through ``mapping`` and written at ``width`` bits;
    its header's sizes, checksum and ``encoding`` updated, statistics kept (the values are
    the same). Returns the new header and page bytes (header included)."""
    h = page.header
    body = _split(h, data, codec, max_def)
    values = bytes([width]) + rle_encode(mapping[body.indices], width)
    s = h.struct
    if h.type == PageType.DATA_PAGE_V2:
        v2 = s.get(PH.DATA_PAGE_HEADER_V2)
        assert isinstance(v2, Struct)
        comp = v2.get(DPH2.IS_COMPRESSED) is not False
        stored = body.levels + (_compress(codec, values) if comp else values)
        s = s.set(PH.DATA_PAGE_HEADER_V2, TType.STRUCT, v2.set(DPH2.ENCODING, TType.I32, encoding))
    else:
        v1 = s.get(PH.DATA_PAGE_HEADER)
        assert isinstance(v1, Struct)
        stored = _compress(codec, body.levels + values)
        s = s.set(PH.DATA_PAGE_HEADER, TType.STRUCT, v1.set(DPH.ENCODING, TType.I32, encoding))
    return _framed(s, len(body.levels) + len(values), stored)


def _framed(s: Struct, uncompressed: int, stored: bytes) -> tuple[PageHeader, bytes]:
    s = s.set(PH.UNCOMPRESSED_PAGE_SIZE, TType.I32, uncompressed)
    s = s.set(PH.COMPRESSED_PAGE_SIZE, TType.I32, len(stored))
    if s.get(PH.CRC) is not None:
        crc = zlib.crc32(stored)
        s = s.set(PH.CRC, TType.I32, crc - (1 << 32) if crc >= 1 << 31 else crc)
    return PageHeader(s), encode(s) + stored


# --- the dictionary -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Dictionary:
    """A chunk's dictionary page: its header, codec and plain-encoded entries."""

    header: PageHeader
    codec: int
    physical: int
    entries: np.ndarray  # fixed width: the plain bytes as uints or void; BYTE_ARRAY: bytes

    @classmethod
    def parse(
        cls, page: Page, data: bytes, codec: int, physical: int, type_length: int | None
    ) -> Dictionary:
        """The dictionary page ``page`` (``data``: its stored bytes, header excluded)."""
        h = page.header
        if h.type != PageType.DICTIONARY_PAGE:
            raise InvalidParquet("not a dictionary page")
        raw = _decompress(codec, data, h.uncompressed_page_size)
        return cls(h, codec, physical, _entries(raw, h.num_values or 0, physical, type_length))

    @property
    def width(self) -> int:
        """The index width it implies."""
        return bit_width(len(self.entries))

    def mapping(self, other: Dictionary) -> np.ndarray:
        """For each entry of ``other``, the index of the same bytes here (the first, where
        an entry stands twice); vectorized: a stable sort and a binary search.

        Raises:
            WholeChunk: An entry of ``other`` is not here.
        """
        mine, theirs = self.entries, other.entries
        if mine.dtype != theirs.dtype:
            raise WholeChunk("the dictionaries' entries differ in width")
        if not len(theirs):
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(mine, kind="stable")
        ranked = mine[order]
        at = np.minimum(np.searchsorted(ranked, theirs), max(len(ranked) - 1, 0))
        if not len(ranked) or not bool(np.all(ranked[at] == theirs)):
            raise WholeChunk("kept values outside the chunk's dictionary")
        return order[at].astype(np.int64)

    def scrubbed(self, referenced: np.ndarray) -> bytes | None:
        """The page (header included) with every entry not in ``referenced`` overwritten by
        a copy of a referenced one; None when every entry is referenced.

        Raises:
            WholeChunk: No entry is referenced.
        """
        used = np.zeros(len(self.entries), dtype=bool)
        used[referenced] = True
        if used.all():
            return None
        if not used.any():
            raise WholeChunk("no remaining row references the dictionary")
        entries = self.entries.copy()
        entries[~used] = entries[int(np.argmax(used))]
        if self.physical == PhysicalType.BYTE_ARRAY:
            plain = b"".join(len(e).to_bytes(4, "little") + e for e in entries)
        else:
            plain = entries.tobytes()
        return _framed(self.header.struct, len(plain), _compress(self.codec, plain))[1]


def _entries(raw: bytes, n: int, physical: int, type_length: int | None) -> np.ndarray:
    if physical == PhysicalType.BYTE_ARRAY:
        out = np.empty(n, dtype=object)
        pos = 0
        for i in range(n):
            if pos + 4 > len(raw):
                raise InvalidParquet("a dictionary entry runs past its page")
            size = int.from_bytes(raw[pos : pos + 4], "little")
            out[i] = raw[pos + 4 : pos + 4 + size]
            pos += 4 + size
        if pos != len(raw):
            raise InvalidParquet("a dictionary page's entries do not fill it")
        return out
    w = type_length if physical == PhysicalType.FIXED_LEN_BYTE_ARRAY else _WIDTH.get(physical)
    if not w or w * n != len(raw):
        raise InvalidParquet("a dictionary page's entries do not fill it")
    dtype: np.dtype[Any] = _KEYS.get(w) or np.dtype((np.void, w))
    return np.frombuffer(raw, dtype=dtype)


_KEYS: dict[int, np.dtype[Any]] = {k: np.dtype(f"<u{k}") for k in (1, 2, 4, 8)}
"""Fixed widths read as unsigned integers (equal exactly when their bytes are; sorting and
searching them is much faster than void records)."""


def referenced(pages: Sequence[tuple[Page, bytes]], codec: int, max_def: int) -> np.ndarray:
    """The dictionary indices the dictionary-encoded ``pages`` use (each with its stored
    bytes)."""
    used = [
        page_indices(p, d, codec, max_def) for p, d in pages if p.header.encoding in DICT_ENCODINGS
    ]
    return np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.int64)
