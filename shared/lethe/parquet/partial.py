"""Page-level copy-on-write of one row group (DESIGN §4, "Page level").

Inside an edited group, data pages that hold no erased row keep their bytes (they become
:class:`~lethe.parquet.segments.Copy` segments of the original); only the pages holding an
erased row are re-encoded. :func:`rewrite_pages` turns the group's full re-encoding (the
row-group splice's :class:`~lethe.parquet.reencode.GroupRewrite`, which it needs anyway for
the chunk statistics and bloom filters of the remaining values) into a rewrite whose body
alternates copies of unchanged page runs with new pages, or says why it cannot.

Per column chunk:

- *Pages*: each run of consecutive pages holding erased rows is re-encoded from its
  remaining rows with :func:`~lethe.parquet.reencode.write_rows` (the group's codec,
  encoding, page version, checksums and statistics settings), one row group per run in a
  temporary one-column file, and its data pages are taken out of that file. Their headers
  and page statistics describe the remaining rows only. Unchanged pages keep their bytes,
  headers and statistics (no erased row ever contributed to them).
- *Dictionary*: pages that index into a dictionary cannot be re-encoded alone, and the
  erased value usually lives in that dictionary. When a re-encoded page is
  dictionary-encoded, the whole chunk is taken from the full re-encoding (whose dictionary
  holds only remaining values) while the other chunks stay page-level. When only pages
  past the writer's dictionary fallback (PLAIN) hold erased rows, the dictionary page is
  kept: every entry of it is referenced by a kept dictionary-encoded page.
- *Index structures*: the OffsetIndex is rebuilt (offsets in the new body, every later
  ``first_row_index`` moved down); the ColumnIndex keeps the original entries of unchanged
  pages and takes the new pages' entries from the temporary file; its boundary order
  becomes UNORDERED (always true; proving an order would need typed comparisons). Chunk
  statistics, ``size_statistics`` and the bloom filter come from the full re-encoding:
  they depend on the remaining values only, not on how they are split into pages, so they
  are exact and hold nothing of the erased rows.
- *Chunk metadata*: offsets, sizes, ``num_values`` and ``encoding_stats`` recounted from
  the new pages.

Bytes between chunks (polars stores a copy of each chunk's metadata, statistics included,
after it) are not carried over. A structure this cannot prove exact returns a reason (the
caller keeps the full re-encoding): no erased positions given, nested or repeated columns,
chunks without an offset index, chunks out of order, index pages, pages disagreeing with the offset index,
a re-encoding that changes a page's type or encoding, or nothing left to copy.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet.enums import CC, CI, CMD, OI, PES, PL, RG, Encoding, PageType, Repetition
from lethe.parquet.footer import (
    Page,
    chunk_range,
    parse_tail,
    read_column_index,
    read_offset_index,
    walk_pages,
)
from lethe.parquet.model import ColumnChunk, FileMetaData, InvalidParquet, RowGroup
from lethe.parquet.offsets import (
    set_int,
    shift_column,
    shift_offset_index,
    shifted,
    struct_list,
    with_list,
)
from lethe.parquet.pages import Ranges, count, intersect
from lethe.parquet.reencode import GroupRewrite, WriteSpec, natural_schema, write_spec
from lethe.parquet.segments import Bytes, Copy, Extent, Segment, Source
from lethe.parquet.thrift import Struct, ThriftList, TType, Value, decode, encode

_Entries = tuple[tuple[Value, ...], ...]
"""One page's entries of each per-page list of a ColumnIndex, by field id order."""

__all__ = ["rewrite_pages"]

_DICT_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})
_UNORDERED = 0


class _Fallback(Exception):
    """Page level cannot be proven exact here (the message says why)."""


@dataclass(frozen=True, slots=True)
class _NewPage:
    """A data page of the new chunk: where its bytes come from and what it holds."""

    content: Segment
    header: Page
    rows: int
    ci: _Entries | None  # this page's ColumnIndex entries, by list field
    unencoded: Value | None  # OffsetIndex.unencoded_byte_array_data_bytes entry


@dataclass(frozen=True, slots=True)
class _Chunk:
    """A rebuilt column chunk: body, metadata and index structures (body coordinates)."""

    body: tuple[Segment, ...]
    struct: Struct
    offset_index: bytes | None
    column_index: bytes | None
    whole: str | None  # why the chunk was re-encoded whole; None when page-level


# --- reading the original ---------------------------------------------------------------
def _lists(ci: Struct | None) -> dict[int, ThriftList]:
    if ci is None:
        return {}
    return {f.id: f.value for f in ci.fields if isinstance(f.value, ThriftList)}


def _ci_entries(ci: Struct | None, n: int) -> list[_Entries | None]:
    """Each page's entries of a ColumnIndex's per-page lists (histograms by stride)."""
    lists = _lists(ci)
    if not lists:
        return [None] * n
    out: list[_Entries | None] = []
    for i in range(n):
        row: list[tuple[Value, ...]] = []
        for fid in sorted(lists):
            items = lists[fid].items
            if len(items) % n:
                raise _Fallback("a column index list does not divide into its pages")
            k = len(items) // n
            row.append(tuple(items[i * k : (i + 1) * k]))
        out.append(tuple(row))
    return out


def _index_structs(cc: ColumnChunk, source: Source) -> tuple[Struct, Struct | None]:
    """The chunk's OffsetIndex and ColumnIndex (None when it has none)."""
    oo, ol = cc.offset_index_offset, cc.offset_index_length
    if oo is None or ol is None:
        raise _Fallback("a chunk has no offset index")
    if not source.has(oo, ol):
        raise _Fallback("an offset index was not fetched")
    oi = decode(source.read(oo, ol))
    co, cl = cc.column_index_offset, cc.column_index_length
    if co is None or cl is None:
        return oi, None
    if not source.has(co, cl):
        raise _Fallback("a column index was not fetched")
    return oi, decode(source.read(co, cl))


def _original_pages(
    cc: ColumnChunk, data: bytes, base: int, num_rows: int, source: Source
) -> tuple[Page | None, list[_NewPage], list[tuple[int, int]], Struct, Struct | None]:
    """The dictionary page, the data pages as copies, each page's rows, and the indexes."""
    pages = walk_pages(data, base, chunk_range(cc))
    oi_struct, ci_struct = _index_structs(cc, source)
    oi = read_offset_index(encode(oi_struct))
    if ci_struct is not None:
        read_column_index(encode(ci_struct))
    dictionary = None
    data_pages: list[Page] = []
    for p in pages:
        if p.header.type == PageType.DICTIONARY_PAGE and not data_pages and dictionary is None:
            dictionary = p
        elif p.header.is_data:
            data_pages.append(p)
        else:
            raise _Fallback("a chunk has an index page or a misplaced dictionary page")
    locs = oi.page_locations
    if len(locs) != len(data_pages):
        raise _Fallback("a chunk's pages disagree with its offset index")
    unenc = oi_struct.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    cis = _ci_entries(ci_struct, len(data_pages))
    rows: list[tuple[int, int]] = []
    out: list[_NewPage] = []
    for i, (p, loc) in enumerate(zip(data_pages, locs, strict=True)):
        end_row = locs[i + 1].first_row_index if i + 1 < len(locs) else num_rows
        if loc.offset != p.offset or loc.compressed_page_size != p.end - p.offset:
            raise _Fallback("a chunk's pages disagree with its offset index")
        if p.header.num_values != end_row - loc.first_row_index:
            raise _Fallback("a page's values are not its rows")
        rows.append((loc.first_row_index, end_row))
        u = unencoded[i] if unencoded is not None else None
        out.append(_NewPage(Copy(p.offset, p.end), p, end_row - loc.first_row_index, cis[i], u))
    return dictionary, out, rows, oi_struct, ci_struct


# --- re-encoding runs of pages ----------------------------------------------------------
def _column_spec(spec: WriteSpec, name: str, dictionary: bool) -> WriteSpec:
    """``spec`` for one column; without a dictionary for pages past the writer's fallback."""
    encoding = {name: spec.column_encoding[name]} if name in spec.column_encoding else {}
    if not dictionary and name in spec.use_dictionary:
        encoding = {name: "PLAIN"}
    return dataclasses.replace(
        spec,
        compression={name: spec.compression[name]},
        use_dictionary=(name,) if dictionary and name in spec.use_dictionary else (),
        column_encoding=encoding,
        statistics=tuple(s for s in spec.statistics if s == name),
        blooms={},
    )


def _write_runs(spec: WriteSpec, schema: pa.Schema, tables: Sequence[pa.Table], k: int) -> bytes:
    """One temporary file, one row group per run (``write_rows`` for several groups)."""
    buf = io.BytesIO()
    try:
        with pq.ParquetWriter(buf, schema, **spec.writer_options()) as writer:
            for t in tables:
                writer.write_table(t, row_group_size=t.num_rows)
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise SpliceRefused(f"pyarrow cannot re-encode pages of row group {k}: {e}") from e
    return buf.getvalue()


def _new_pages(
    data: bytes, rg: RowGroup, allowed: frozenset[int], types: frozenset[int]
) -> list[_NewPage]:
    """The data pages of the temporary file's group ``rg``, as new bytes."""
    cc = rg.columns[0]
    pages = [p for p in walk_pages(data, 0, chunk_range(cc))]
    if any(not p.header.is_data for p in pages):
        raise _Fallback("re-encoded pages need a dictionary")
    oi_struct, ci_struct = _index_structs(cc, _whole(data))
    unenc = oi_struct.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    cis = _ci_entries(ci_struct, len(pages))
    out = []
    for i, p in enumerate(pages):
        if p.header.type not in types or p.header.encoding not in allowed:
            raise _Fallback("re-encoding changes a page's type or encoding")
        n = p.header.num_values
        assert n is not None
        u = unencoded[i] if unencoded is not None else None
        out.append(_NewPage(Bytes(data[p.offset : p.end]), p, n, cis[i], u))
    return out


def _whole(data: bytes) -> Source:
    return Source([Extent(0, data)])


# --- one chunk --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Context:
    """What every chunk of the group shares."""

    meta: FileMetaData
    k: int
    data: bytes
    base: int
    erased: Ranges
    keep: pa.Table
    spec: WriteSpec
    schema: pa.Schema
    full: GroupRewrite
    full_data: bytes
    source: Source

    def kept(self, a: int, b: int) -> tuple[int, int]:
        """Rows ``[a, b)`` of the original group as rows of ``keep``."""
        return (
            a - count(intersect(self.erased, ((0, a),))),
            b - count(intersect(self.erased, ((0, b),))),
        )


def _runs(rows: Sequence[tuple[int, int]], erased: Ranges) -> list[tuple[int, int]]:
    """Runs ``[first page, end page)`` of consecutive pages that hold an erased row."""
    hit = [bool(intersect(((a, b),), erased)) for a, b in rows]
    out: list[tuple[int, int]] = []
    for i, h in enumerate(hit):
        if h and out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        elif h:
            out.append((i, i + 1))
    return out


def _chunk_pages(
    ctx: _Context, j: int, cc: ColumnChunk
) -> tuple[Page | None, list[_NewPage], Struct, Struct | None] | str:
    """The new chunk's dictionary page and data pages; or why the whole chunk must be
    re-encoded (its dictionary may hold an erased value)."""
    rg = ctx.meta.row_groups[ctx.k]
    dictionary, pages, rows, oi, ci = _original_pages(
        cc, ctx.data, ctx.base, rg.num_rows, ctx.source
    )
    runs = _runs(rows, ctx.erased)
    if dictionary is not None and any(
        pages[i].header.header.encoding in _DICT_ENCODINGS for a, b in runs for i in range(a, b)
    ):
        return "erased rows in dictionary-encoded pages"
    if dictionary is not None and not _arrow_fallback(ctx.meta):
        return "a dictionary whose writer may hold values of plain pages in it"
    name = ctx.schema.field(j).name
    col = _column_spec(ctx.spec, name, dictionary=False)
    tables = []
    for a, b in runs:
        s, e = ctx.kept(rows[a][0], rows[b - 1][1])
        if e > s:
            tables.append(ctx.keep.select([j]).slice(s, e - s))
    one = pa.schema([ctx.schema.field(j)])
    tmp = _write_runs(col, one, tables, ctx.k) if tables else b""
    tgroups = parse_tail(tmp, len(tmp)).metadata.row_groups if tables else ()
    allowed = frozenset(
        p.header.header.encoding for p in pages if p.header.header.encoding is not None
    )
    types = frozenset(p.header.header.type for p in pages)
    new: list[_NewPage] = []
    at, t = 0, 0
    for a, b in runs:
        new.extend(pages[at:a])
        s, e = ctx.kept(rows[a][0], rows[b - 1][1])
        if e > s:
            new.extend(_new_pages(tmp, tgroups[t], allowed, types))
            t += 1
        at = b
    new.extend(pages[at:])
    return dictionary, new, oi, ci


def _page_index(
    pages: Sequence[_NewPage], offsets: Sequence[int], oi: Struct, ci: Struct | None
) -> tuple[bytes, bytes | None]:
    """The rebuilt OffsetIndex and ColumnIndex of a chunk's new pages."""
    locs: list[Struct] = []
    first = 0
    template = struct_list(oi, OI.PAGE_LOCATIONS)[0]
    for p, off in zip(pages, offsets, strict=True):
        loc = set_int(template, PL.OFFSET, off)
        loc = set_int(loc, PL.COMPRESSED_PAGE_SIZE, p.header.end - p.header.offset, TType.I32)
        locs.append(set_int(loc, PL.FIRST_ROW_INDEX, first))
        first += p.rows
    new_oi = with_list(oi, OI.PAGE_LOCATIONS, locs)
    old_u = oi.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    if isinstance(old_u, ThriftList):
        if any(p.unencoded is None for p in pages):
            raise _Fallback("re-encoded pages lack unencoded byte array sizes")
        items = tuple(p.unencoded for p in pages if p.unencoded is not None)
        new_oi = new_oi.set(
            OI.UNENCODED_BYTE_ARRAY_DATA_BYTES,
            TType.LIST,
            dataclasses.replace(old_u, items=items, long_size=old_u.long_size and len(items) < 15),
        )
    if ci is None:
        return encode(new_oi), None
    lists = _lists(ci)
    if any(p.ci is None or len(p.ci) != len(lists) for p in pages):
        raise _Fallback("re-encoded pages have a different column index")
    new_ci = ci
    for n, fid in enumerate(sorted(lists)):
        items = tuple(v for p in pages if p.ci is not None for v in p.ci[n])
        old = lists[fid]
        new_ci = new_ci.set(
            fid,
            TType.LIST,
            dataclasses.replace(old, items=items, long_size=old.long_size and len(items) < 15),
        )
    new_ci = set_int(new_ci, CI.BOUNDARY_ORDER, _UNORDERED, TType.I32)
    return encode(new_oi), encode(new_ci)


def _encoding_stats(tmd: Struct, dictionary: Page | None, pages: Sequence[_NewPage]) -> Struct:
    """``encoding_stats`` recounted from the new pages (dropped when the original had none)."""
    old = tmd.get(CMD.ENCODING_STATS)
    if not isinstance(old, ThriftList):
        return tmd
    counts: dict[tuple[int, int], int] = {}
    for p in ([dictionary] if dictionary else []) + [q.header for q in pages]:
        key = (p.header.type, p.header.encoding if p.header.encoding is not None else 0)
        if p.header.type == PageType.DICTIONARY_PAGE:
            key = (p.header.type, _dict_page_encoding(p))
        counts[key] = counts.get(key, 0) + 1
    items = [
        Struct(())
        .set(PES.PAGE_TYPE, TType.I32, t)
        .set(PES.ENCODING, TType.I32, e)
        .set(PES.COUNT, TType.I32, c)
        for (t, e), c in counts.items()
    ]
    return with_list(tmd, CMD.ENCODING_STATS, items)


def _dict_page_encoding(p: Page) -> int:
    h = p.header.struct.get(7)
    e = h.get(2) if isinstance(h, Struct) else None
    return e if isinstance(e, int) else Encoding.PLAIN


def _page_chunk(ctx: _Context, j: int, cc: ColumnChunk, tcc: Struct, pos: int) -> _Chunk:
    """Chunk ``j`` page-level, laid out from ``pos``, or as the full re-encoding wrote it."""
    got = _chunk_pages(ctx, j, cc)
    if isinstance(got, str):
        return _full_chunk(ctx, j, tcc, pos, got)
    dictionary, pages, oi, ci = got
    body: list[Segment] = []
    start = pos
    uncompressed = 0
    if dictionary is not None:
        body.append(Copy(dictionary.offset, dictionary.end))
        uncompressed += dictionary.header_length + dictionary.header.uncompressed_page_size
        pos += dictionary.end - dictionary.offset
    offsets = []
    for p in pages:
        offsets.append(pos)
        body.append(p.content)
        pos += p.content.length
        uncompressed += p.header.header_length + p.header.header.uncompressed_page_size
    oi_raw, ci_raw = _page_index(pages, offsets, oi, ci)
    tmd = tcc.get(CC.META_DATA)
    assert isinstance(tmd, Struct)
    md = tmd.without(CMD.DICTIONARY_PAGE_OFFSET, CMD.INDEX_PAGE_OFFSET)
    encodings = cc.meta_data.struct.get(CMD.ENCODINGS)
    if not isinstance(encodings, ThriftList):
        raise _Fallback("a chunk lists no encodings")
    md = md.set(CMD.ENCODINGS, TType.LIST, encodings)
    md = set_int(md, CMD.NUM_VALUES, sum(p.header.header.num_values or 0 for p in pages))
    md = set_int(md, CMD.TOTAL_COMPRESSED_SIZE, pos - start)
    md = set_int(md, CMD.TOTAL_UNCOMPRESSED_SIZE, uncompressed)
    md = set_int(md, CMD.DATA_PAGE_OFFSET, offsets[0])
    if dictionary is not None:
        md = set_int(md, CMD.DICTIONARY_PAGE_OFFSET, start)
    md = _encoding_stats(md, dictionary, pages)
    s = tcc.set(CC.META_DATA, TType.STRUCT, md)
    if s.get(CC.FILE_OFFSET) not in (None, 0):
        s = set_int(s, CC.FILE_OFFSET, start)
    return _Chunk(tuple(body), s, oi_raw, ci_raw, None)


def _full_chunk(ctx: _Context, j: int, tcc: Struct, pos: int, why: str) -> _Chunk:
    """Chunk ``j`` as the full re-encoding wrote it, moved to ``pos``."""
    r = chunk_range(ColumnChunk(tcc))
    move = shifted(r, pos)
    raw = ctx.full_data[r.start - ctx.full.start : r.end - ctx.full.start]
    oi = ctx.full.offset_indexes[j]
    return _Chunk(
        (Bytes(raw),),
        shift_column(tcc, move),
        shift_offset_index(oi, move) if oi is not None else None,
        ctx.full.column_indexes[j],
        why,
    )


# --- the group --------------------------------------------------------------------------
def _check_group(meta: FileMetaData, k: int, keep: pa.Table, erased: Ranges, base: int) -> None:
    rg = meta.row_groups[k]
    for path, elem, _d, r in meta.leaves():
        if len(path) != 1 or r != 0 or elem.repetition_type == Repetition.REPEATED:
            raise _Fallback("nested or repeated columns")
    if any(s < 0 or e > rg.num_rows for s, e in erased) or keep.num_rows != rg.num_rows - count(
        erased
    ):
        raise _Fallback("the erased positions do not match the remaining rows")
    at = base
    for cc in rg.columns:
        span = chunk_range(cc)
        if span.start < at:
            raise _Fallback("column chunks overlap or are out of order")
        at = span.end


def rewrite_pages(
    meta: FileMetaData,
    k: int,
    keep: pa.Table,
    erased: Ranges,
    data: bytes,
    base: int,
    full: GroupRewrite,
    source: Source,
    bloom_bytes: Mapping[int, int],
) -> GroupRewrite | str:
    """Group ``k`` rewritten page by page, or why it cannot be.

    Args:
        meta: The file's footer.
        k: The group.
        keep: The remaining rows (``full`` holds them re-encoded).
        erased: The erased rows' positions within the group.
        data: The group's original bytes, from file offset ``base``.
        base: The group's start in the original.
        full: The group re-encoded whole (:func:`~lethe.parquet.reencode.reencode_group`).
        source: Bytes of the original already fetched (the group's offset and column
            indexes must be among them).
        bloom_bytes: Length of each column's bloom filter (by leaf index).

    Returns:
        A :class:`~lethe.parquet.reencode.GroupRewrite` starting at ``base`` whose body
        copies unchanged page runs of the original, or the reason for falling back.

    Raises:
        SpliceRefused: pyarrow refuses to re-encode pages.
    """
    try:
        _check_group(meta, k, keep, erased, base)
        if len(full.body) != 1 or not isinstance(full.body[0], Bytes):
            raise _Fallback("the full re-encoding is not new bytes")
        natural = natural_schema(meta)
        spec = write_spec(meta, k, data, base, bloom_bytes)
        ctx = _Context(
            meta,
            k,
            data,
            base,
            erased,
            keep.cast(natural),
            spec,
            natural,
            full,
            full.body[0].data,
            source,
        )
        _check_copies(ctx)
        return _assemble(ctx)
    except _Fallback as e:
        return str(e)
    except (InvalidParquet, SpliceRefused) as e:
        if isinstance(e, SpliceRefused) and "pyarrow" in str(e):
            raise
        return f"page structure not provable: {type(e).__name__}"


def _whole_chunks(chunks: Sequence[_Chunk]) -> str | None:
    whole = [c.whole for c in chunks if c.whole is not None]
    if not whole:
        return None
    why = "; ".join(dict.fromkeys(whole))
    return f"{len(whole)} of {len(chunks)} chunks re-encoded whole ({why})"


def _arrow_fallback(meta: FileMetaData) -> bool:
    """Whether the writer is Arrow C++ (pyarrow), whose dictionary fallback writes every
    value it put in the dictionary into a dictionary-encoded page: then no entry of a
    dictionary is a value of a plain page only. (parquet-java re-encodes the page being
    buffered as plain at fallback but keeps its values in the dictionary.)"""
    return (meta.created_by or "").startswith("parquet-cpp-arrow")


def _check_copies(ctx: _Context) -> None:
    """Fall back before re-encoding anything when no page would be copied (every page of
    every chunk holds an erased row, or its chunk is re-encoded whole): page level would
    then cost more CPU for the same bytes."""
    rg = ctx.meta.row_groups[ctx.k]
    whole: list[str] = []
    for cc in rg.columns:
        dictionary, pages, rows, _, _ = _original_pages(
            cc, ctx.data, ctx.base, rg.num_rows, ctx.source
        )
        runs = _runs(rows, ctx.erased)
        hit = [i for a, b in runs for i in range(a, b)]
        if dictionary is not None and any(
            pages[i].header.header.encoding in _DICT_ENCODINGS for i in hit
        ):
            whole.append("erased rows in dictionary-encoded pages")
        elif len(hit) < len(pages) or dictionary is not None:
            return
    why = "; ".join(dict.fromkeys(whole))
    raise _Fallback("no unchanged page to copy" + (f" ({why})" if why else ""))


def _assemble(ctx: _Context) -> GroupRewrite:
    rg = ctx.meta.row_groups[ctx.k]
    tcols = struct_list(ctx.full.row_group, RG.COLUMNS)
    pos = ctx.base
    chunks: list[_Chunk] = []
    for j, (cc, tcc) in enumerate(zip(rg.columns, tcols, strict=True)):
        c = _page_chunk(ctx, j, cc, tcc, pos)
        chunks.append(c)
        pos += sum(s.length for s in c.body)
    body = [s for c in chunks for s in c.body]
    if not any(isinstance(s, Copy) for s in body):
        why = "; ".join(dict.fromkeys(c.whole for c in chunks if c.whole is not None))
        raise _Fallback("no unchanged page to copy" + (f" ({why})" if why else ""))
    gs = with_list(ctx.full.row_group, RG.COLUMNS, [c.struct for c in chunks])
    total = sum(ColumnChunk(c.struct).meta_data.total_uncompressed_size for c in chunks)
    gs = set_int(gs, RG.TOTAL_BYTE_SIZE, total)
    if gs.get(RG.TOTAL_COMPRESSED_SIZE) is not None:
        gs = set_int(gs, RG.TOTAL_COMPRESSED_SIZE, pos - ctx.base)
    return GroupRewrite(
        tuple(body),
        ctx.base,
        ctx.full.num_rows,
        gs,
        ctx.full.blooms,
        tuple(c.column_index for c in chunks),
        tuple(c.offset_index for c in chunks),
        level="page",
        reason=_whole_chunks(chunks),
    )
