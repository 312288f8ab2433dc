"""A structural validator for Parquet files held in memory.

It checks what readers rely on without decoding values: every page header of every column
chunk, the chunks' declared ranges and value counts, the dictionary page's place, every
OffsetIndex entry against the page it points to, ColumnIndex page counts, bloom filter
headers, row counts and the footer's exact re-serialization. It is the splice's test oracle,
and a cheap check to run on any file Lethe produced.

>>> import io, pyarrow as pa, pyarrow.parquet as pq
>>> buf = io.BytesIO()
>>> pq.write_table(pa.table({"x": [1, 2, 3]}), buf, write_page_index=True)
>>> validate(buf.getvalue())
[]
>>> broken = bytearray(buf.getvalue())
>>> broken[4] ^= 0xFF
>>> [p.where for p in validate(bytes(broken))][:1]
['row group 0 column x']
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

from lethe.errors import LetheError
from lethe.parquet.enums import PageType
from lethe.parquet.footer import (
    MAGIC,
    ByteRange,
    Footer,
    Page,
    check_roundtrip,
    chunk_range,
    chunk_span,
    parse_tail,
    read_bloom_filter_header,
    read_column_index,
    read_offset_index,
    row_group_range,
    walk_pages,
)
from lethe.parquet.model import ColumnChunk, ColumnMetaData, RowGroup
from lethe.parquet.thrift import encode

__all__ = ["Problem", "validate"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a file.

    Attributes:
        where: What is wrong (``"footer"``, ``"row group 2 column a.b"``, ...).
        message: How.
    """

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class _Checker:
    def __init__(self, data: bytes, footer: Footer) -> None:
        self.data = data
        self.footer = footer
        self.problems: list[Problem] = []
        self.used: list[tuple[ByteRange, str]] = []  # what lies where, to find overlaps

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    def run(self) -> None:
        meta = self.footer.metadata
        try:
            check_roundtrip(self.footer.raw)
        except LetheError as e:
            self.add("footer", str(e))
        groups = meta.row_groups
        if sum(rg.num_rows for rg in groups) != meta.num_rows:
            self.add("footer", f"num_rows {meta.num_rows} is not the sum of its row groups'")
        leaves = meta.leaves()
        used = self.used
        for g, rg in enumerate(groups):
            where = f"row group {g}"
            if rg.ordinal is not None and rg.ordinal != g:
                self.add(where, f"ordinal is {rg.ordinal}")
            if len(rg.columns) != len(leaves):
                self.add(where, f"{len(rg.columns)} column chunks for {len(leaves)} columns")
                continue
            try:
                r = row_group_range(rg)
            except LetheError as e:
                self.add(where, str(e))
                continue
            if r.start < 4 or r.end > self.footer.start:
                self.add(where, f"range [{r.start}, {r.end}) is outside the data area")
                continue
            used.append((r, where))
            total = rg.total_compressed_size
            chunk_total = sum(c.meta_data.total_compressed_size for c in rg.columns)
            if total is not None and total != chunk_total:
                self.add(where, f"total_compressed_size {total} != {chunk_total} of its chunks")
            for cc, (path, _, _, max_rep) in zip(rg.columns, leaves, strict=True):
                name = f"{where} column {'.'.join(path)}"
                try:
                    self.chunk(name, rg, cc, path, max_rep)
                except LetheError as e:
                    self.add(name, str(e))
        used.sort(key=lambda x: x[0].start)
        for (a, wa), (b, wb) in itertools.pairwise(used):
            if a.end > b.start:
                self.add(wb, f"[{b.start}, {b.end}) overlaps {wa} [{a.start}, {a.end})")

    def span(self, name: str, off: int, length: int) -> bool:
        r = ByteRange(off, off + length)
        if length <= 0 or r.start < 4 or r.end > self.footer.start:
            self.add(name, f"[{r.start}, {r.end}) is outside the file's data")
            return False
        self.used.append((r, name))
        return True

    def chunk(
        self,
        name: str,
        rg: RowGroup,
        cc: ColumnChunk,
        path: tuple[str, ...],
        max_rep: int,
    ) -> None:
        m = cc.meta_data
        if m.path_in_schema != path:
            self.add(name, f"path_in_schema is {'.'.join(m.path_in_schema)}")
        pages = walk_pages(self.data, 0, chunk_range(cc))
        if not pages:
            self.add(name, "no pages")
            return
        dicts = [i for i, p in enumerate(pages) if p.header.type == PageType.DICTIONARY_PAGE]
        data_pages = [p for p in pages if p.header.is_data]
        if dicts and dicts != [0]:
            self.add(name, f"dictionary pages at positions {dicts} (only one, first, allowed)")
        dpo = m.dictionary_page_offset
        if dicts and dpo is not None and dpo > 0 and dpo != pages[0].offset:
            self.add(name, f"dictionary_page_offset {dpo} != first page {pages[0].offset}")
        if not dicts and chunk_span(m).start != m.data_page_offset:
            self.add(name, f"dictionary_page_offset {dpo} but no dictionary page")
        if not data_pages:
            self.add(name, "no data pages")
            return
        if m.data_page_offset != data_pages[0].offset:
            self.add(name, f"data_page_offset {m.data_page_offset} != {data_pages[0].offset}")
        values = sum(p.header.num_values or 0 for p in data_pages)
        if values != m.num_values:
            self.add(name, f"pages hold {values} values, the metadata says {m.num_values}")
        if max_rep == 0 and m.num_values != rg.num_rows:
            self.add(name, f"{m.num_values} values in a flat column of {rg.num_rows} rows")
        v2_rows = [p.header.num_rows for p in data_pages]
        if all(r is not None for r in v2_rows) and sum(r or 0 for r in v2_rows) != rg.num_rows:
            self.add(name, f"v2 pages hold {sum(r or 0 for r in v2_rows)} rows, not {rg.num_rows}")
        for p in pages:
            crc = p.header.crc
            if crc is not None:
                body = self.data[p.data_offset : p.end]
                if zlib.crc32(body) != crc & 0xFFFFFFFF:
                    self.add(name, f"page at {p.offset}: CRC mismatch")
        self.offset_index(name, rg, cc, data_pages, max_rep)
        self.column_index(name, cc, len(data_pages))
        self.bloom_filter(name, m)

    def structure(self, name: str, what: str, off: int | None, length: int | None) -> bytes | None:
        """The bytes of a page index the chunk references; None when it has none or they
        cannot be read (the problem recorded)."""
        if off is None:
            return None
        if length is None:
            self.add(name, f"{what} without length")
            return None
        if not self.span(f"{name} {what}", off, length):
            return None
        return self.data[off : off + length]

    def column_index(self, name: str, cc: ColumnChunk, pages: int) -> None:
        raw = self.structure(name, "column index", cc.column_index_offset, cc.column_index_length)
        if raw is None:
            return
        ci = read_column_index(raw)
        for key, n in ci.list_lengths.items():
            if n is not None and n != pages:
                self.add(name, f"column index {key} has {n} entries for {pages} pages")
        if ci.list_lengths["null_pages"] is None:
            self.add(name, "column index without null_pages")

    def bloom_filter(self, name: str, m: ColumnMetaData) -> None:
        bo, bl = m.bloom_filter_offset, m.bloom_filter_length
        if bo is None:
            return
        hdr, at = read_bloom_filter_header(self.data, bo)
        n = hdr.num_bytes
        length = at - bo + n
        if n <= 0 or n % 32:
            self.add(name, f"bloom filter of {n} bytes (not a positive multiple of 32)")
        if (hdr.algorithm, hdr.hash, hdr.compression) != (1, 1, 1):
            self.add(name, "bloom filter is not split-block / xxHash / uncompressed")
        if bl is not None and bl != length:
            self.add(name, f"bloom_filter_length {bl} != header + bitset {length}")
        self.span(f"{name} bloom filter", bo, length)

    def offset_index(
        self,
        name: str,
        rg: RowGroup,
        cc: ColumnChunk,
        data_pages: list[Page],
        max_rep: int,
    ) -> None:
        raw = self.structure(name, "offset index", cc.offset_index_offset, cc.offset_index_length)
        if raw is None:
            return
        oi = read_offset_index(raw)
        if encode(oi.struct) != raw:
            self.add(name, "offset index does not re-serialize identically")
        locs = oi.page_locations
        if len(locs) != len(data_pages):
            self.add(name, f"offset index lists {len(locs)} pages, the chunk has {len(data_pages)}")
            return
        row = 0
        for i, (loc, page) in enumerate(zip(locs, data_pages, strict=True)):
            if loc.offset != page.offset:
                self.add(name, f"offset index page {i}: offset {loc.offset} != {page.offset}")
            if loc.compressed_page_size != page.end - page.offset:
                self.add(
                    name,
                    f"offset index page {i}: size {loc.compressed_page_size} != "
                    f"{page.end - page.offset}",
                )
            rows = page.header.num_rows
            if rows is None and max_rep == 0:
                rows = page.header.num_values
            if i == 0 and loc.first_row_index != 0:
                self.add(name, f"offset index starts at row {loc.first_row_index}")
            elif rows is not None or max_rep == 0:
                if loc.first_row_index != row:
                    self.add(
                        name, f"offset index page {i}: first row {loc.first_row_index} != {row}"
                    )
            elif i and loc.first_row_index < locs[i - 1].first_row_index:
                # (equal is legal: pyarrow may write an empty page)
                self.add(name, f"offset index page {i}: first rows decreasing")
            if loc.first_row_index >= rg.num_rows:
                self.add(name, f"offset index page {i}: first row past the group's end")
            row = loc.first_row_index + (rows or 0)


def validate(data: bytes) -> list[Problem]:
    """Check the structure of a whole Parquet file held in memory.

    Args:
        data: The file.

    Returns:
        The problems found; an empty list means the file is structurally valid.
    """
    if len(data) < 12 or data[:4] != MAGIC:
        return [Problem("file", "does not start with PAR1")]
    try:
        footer = parse_tail(data, len(data))
    except LetheError as e:
        return [Problem("footer", str(e))]
    checker = _Checker(data, footer)
    try:
        checker.run()
    except LetheError as e:
        checker.add("file", str(e))
    return checker.problems
