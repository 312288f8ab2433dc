"""Page-level copy-on-write of one row group, from the pages holding erased rows only
(DESIGN §4, "Page level").

Inside an edited group, data pages that hold no erased row keep their bytes (they become
:class:`~lethe.parquet.segments.Copy` segments of the original and are never fetched); only
the pages holding an erased row are fetched, decoded and re-encoded. Everything is read
through a :class:`~lethe.parquet.segments.Source`: :func:`page_ranges` says, from the footer
and the offset indexes alone, which byte ranges a group needs (the caller fetches just
those), and :func:`rewrite_pages` raises :class:`~lethe.parquet.segments.NeedBytes` when it
finds it needs more (a whole chunk, see below), so the caller fetches that and plans again.

Per column chunk (every chunk holds every erased row):

- *Pages*: each run of consecutive pages holding erased rows is decoded (its pages wrapped
  as a minimal Parquet file, :func:`~lethe.parquet.pages.chunk_file`), stripped of the
  erased rows and re-encoded with the chunk's codec, encoding, page version, checksums and
  statistics settings, one row group per run in a temporary one-column file; its data
  pages are taken out of that file. Unchanged pages keep their bytes, headers and
  statistics (no erased row ever contributed to them).
- *Bloom filter*: a chunk with a bloom filter is fetched whole, since the filter is rebuilt
  from all its remaining values (no bit of an erased value may survive); its pages are
  still kept or re-encoded as above. The filter is taken from a one-column plain,
  uncompressed re-encoding of the remaining values with the original's size and
  parameters (the filter hashes the values alone, so it is the one a rewrite builds).
- *Dictionary*: when only pages past an Arrow writer's dictionary fallback (PLAIN) hold
  erased rows, the dictionary page is kept: every entry of it is a value of a kept
  dictionary-encoded page. When a dictionary-encoded page holds an erased row (or the
  writer is not known to reference every entry from a dictionary-encoded page), the chunk
  is fetched whole and its dictionary page still kept when no entry can be a value of
  erased rows alone (:func:`~lethe.parquet.chunkvalues.dictionary_stays`); the replaced
  dictionary-encoded pages are then re-encoded PLAIN (Parquet's dictionary fallback;
  ``encoding_stats`` and ``encodings`` say so), but only when no kept dictionary-encoded
  page follows them: Spark's vectorized reader misaligns rows when a chunk returns to its
  dictionary after a PLAIN page (writers only ever fall back), so such a chunk is
  re-encoded whole.
- *Whole chunk*: otherwise a chunk whose dictionary may hold an erased value is decoded
  and re-encoded whole (that column only, its dictionary rebuilt), as is a floating-point
  one, or one whose statistics cannot be proven (below).
- *Chunk statistics*: ``null_count`` drops by the erased nulls and ``distinct_count`` is
  dropped. ``min``/``max`` stay when the chunk was read whole and every erased value is
  also a remaining one (the set of values is unchanged), or when every erased value lies
  strictly inside them (for byte arrays only when the writer marked them exact);
  otherwise, for fixed-width types,
  they are recomputed from the ColumnIndex entries of the pages (unchanged pages' and the
  new pages'), which are exact there; else the chunk is re-encoded whole. Types whose sort
  order has no exact comparable form (floating point, decimals) are re-encoded whole.
  ``size_statistics`` (level histograms, unencoded byte-array bytes) are adjusted exactly
  by the erased values, or dropped when their shape is unknown.
- *Index structures*: the OffsetIndex is rebuilt (offsets in the new body, every later
  ``first_row_index`` moved down); the ColumnIndex keeps the original entries of unchanged
  pages and takes the new pages' entries from the temporary file; its boundary order
  becomes UNORDERED (always true).
- *Chunk metadata*: offsets, sizes, ``num_values`` and ``encoding_stats`` are the
  original's minus the replaced pages' plus the new pages' (unchanged page headers are not
  fetched; for flat columns a page's values are its rows).

Bytes between chunks (polars stores a copy of each chunk's metadata, statistics included,
after it) are not carried over. A structure this cannot prove exact returns a reason (the
caller re-encodes the whole group): nested or repeated columns, chunks without an offset
index, chunks out of order, index pages, pages disagreeing with the offset index, a
re-encoding that changes a page's type or encoding, or nothing left to copy.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet.chunkmeta import PageFallback as _Fallback
from lethe.parquet.chunkmeta import WholeChunk as _Whole
from lethe.parquet.chunkmeta import encoding_stats, encodings, size_statistics, statistics
from lethe.parquet.chunkvalues import dictionary_stays, lost_values, rebuilt_bloom
from lethe.parquet.enums import (
    CC,
    CMD,
    OI,
    RG,
    Encoding,
    PageType,
    PhysicalType,
    Repetition,
)
from lethe.parquet.footer import (
    ByteRange,
    Page,
    chunk_range,
    parse_tail,
    read_offset_index,
    read_page_header,
    walk_pages,
)
from lethe.parquet.model import ColumnChunk, FileMetaData, InvalidParquet
from lethe.parquet.offsets import (
    set_int,
    shift_column,
    shift_offset_index,
    shifted,
    with_list,
)
from lethe.parquet.pageentries import NewPage as _NewPage
from lethe.parquet.pageentries import ci_entries as _ci_entries
from lethe.parquet.pageentries import conformed as _conformed
from lethe.parquet.pageentries import index_lists as _index_lists
from lethe.parquet.pageentries import rebuilt_indexes as _page_index
from lethe.parquet.pages import (
    ChunkLayout,
    Ranges,
    chunk_file,
    chunk_layout,
    chunk_schema,
    count,
    decode_chunk,
    intersect,
)
from lethe.parquet.reencode import (
    GroupRewrite,
    WriteSpec,
    check_column,
    column_spec,
    compare_chunk,
    natural_schema,
    write_rows,
)
from lethe.parquet.segments import Bytes, Copy, Extent, NeedBytes, Segment, Source
from lethe.parquet.thrift import Struct, ThriftList, TType, decode, encode

__all__ = ["ChunkPlan", "page_ranges", "plan_group", "rewrite_pages"]

_DICT_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})


@dataclass(frozen=True, slots=True)
class _Chunk:
    """A rebuilt column chunk: body, metadata and index structures (body coordinates)."""

    body: tuple[Segment, ...]
    struct: Struct
    offset_index: bytes | None
    column_index: bytes | None
    bloom: bytes | None
    whole: str | None  # why the chunk was re-encoded whole; None when page-level


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """What page level does to one column chunk of an edited group.

    Attributes:
        column: Leaf index of the chunk.
        layout: Its pages, from the OffsetIndex.
        runs: Runs ``[first page, end page)`` of consecutive pages holding erased rows.
        whole: Why the chunk is re-encoded whole, None when only ``runs`` are.
        bloom: Whether the chunk's bloom filter is rebuilt from its remaining values (the
            whole chunk is read, only ``runs`` are re-encoded).
        live: Set when the chunk's dictionary stays only if no entry of it is a value of
            erased rows alone (the whole chunk is read to tell; dictionary-encoded pages
            holding erased rows are re-encoded PLAIN): why the chunk is re-encoded whole
            when it is not so.
    """

    column: int
    layout: ChunkLayout
    runs: tuple[tuple[int, int], ...]
    whole: str | None
    bloom: bool = False
    live: str | None = None

    def ranges(self, cc: ColumnChunk) -> list[ByteRange]:
        """The bytes of the original this chunk's rewrite reads."""
        if self.whole is not None or self.bloom or self.live is not None:
            return [chunk_range(cc)]
        pages = self.layout.pages
        return [
            ByteRange(pages[a].offset, pages[b - 1].offset + pages[b - 1].size)
            for a, b in self.runs
        ]

    @property
    def keeps_data_page(self) -> bool:
        """Whether a data page of the chunk holds no erased row (and may be copied)."""
        return self.whole is None and sum(b - a for a, b in self.runs) < len(self.layout.pages)

    @property
    def copies(self) -> bool:
        """Whether some of the chunk's bytes stay (an unchanged page or its dictionary)."""
        hit = sum(b - a for a, b in self.runs)
        return self.whole is None and (
            hit < len(self.layout.pages) or self.layout.dictionary is not None
        )


# --- the plan, from the footer and the offset indexes -----------------------------------
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


def _runs(layout: ChunkLayout, erased: Ranges) -> tuple[tuple[int, int], ...]:
    """Runs ``[first page, end page)`` of consecutive pages that hold an erased row."""
    out: list[tuple[int, int]] = []
    for p in layout.overlapping(erased):
        if out and out[-1][1] == p.index:
            out[-1] = (out[-1][0], p.index + 1)
        else:
            out.append((p.index, p.index + 1))
    return tuple(out)


def _arrow_fallback(meta: FileMetaData) -> bool:
    """Whether the writer is Arrow C++ (pyarrow), whose dictionary fallback writes every
    value it put in the dictionary into a dictionary-encoded page: then no entry of a
    dictionary is a value of a plain page only. (parquet-java re-encodes the page being
    buffered as plain at fallback but keeps its values in the dictionary.)"""
    return (meta.created_by or "").startswith("parquet-cpp-arrow")


def _check_group(meta: FileMetaData, k: int, erased: Ranges) -> None:
    rg = meta.row_groups[k]
    for path, elem, _d, r in meta.leaves():
        if len(path) != 1 or r != 0 or elem.repetition_type == Repetition.REPEATED:
            raise _Fallback("nested or repeated columns")
    n = rg.num_rows
    if not erased or any(s < 0 or e > n or s >= e for s, e in erased):
        raise _Fallback("the erased positions do not match the group")
    at = 0
    for cc in rg.columns:
        span = chunk_range(cc)
        if span.start < at:
            raise _Fallback("column chunks overlap or are out of order")
        at = span.end


def _chunk_plan(meta: FileMetaData, k: int, j: int, erased: Ranges, source: Source) -> ChunkPlan:
    rg = meta.row_groups[k]
    cc = rg.columns[j]
    oi_struct, _ = _index_structs(cc, source)
    layout = chunk_layout(rg, j, read_offset_index(encode(oi_struct)))
    runs = _runs(layout, erased)
    hit = [layout.pages[i] for a, b in runs for i in range(a, b)]
    why = None
    if layout.predicts_dictionary(hit):
        why = "erased rows in dictionary-encoded pages"
    elif layout.dictionary is not None and not _arrow_fallback(meta):
        why = "a dictionary whose writer may hold values of plain pages in it"
    floating = meta.leaves()[j][1].type in (PhysicalType.FLOAT, PhysicalType.DOUBLE)
    bloom = cc.meta_data.bloom_filter_offset is not None
    return ChunkPlan(j, layout, runs, why if floating else None, bloom, None if floating else why)


def plan_group(meta: FileMetaData, k: int, erased: Ranges, source: Source) -> tuple[ChunkPlan, ...]:
    """What page level does to each chunk of group ``k``, from the footer and the offset
    indexes (in ``source``) alone.

    Raises:
        _Fallback: Page level is not possible here, or would copy nothing.
    """
    _check_group(meta, k, erased)
    try:
        plans = tuple(
            _chunk_plan(meta, k, j, erased, source) for j in range(len(meta.row_groups[k].columns))
        )
    except InvalidParquet as e:
        raise _Fallback(f"page structure not provable: {type(e).__name__}") from e
    if not any(p.copies for p in plans):
        whys = "; ".join(dict.fromkeys(p.whole for p in plans if p.whole is not None))
        raise _Fallback("no unchanged page to copy" + (f" ({whys})" if whys else ""))
    if not any(p.keeps_data_page for p in plans):
        # Only dictionary pages could stay: the data pages are re-encoded either way, and
        # proving a dictionary costs a decode of the whole chunk (decided before any read).
        raise _Fallback("every data page holds an erased row")
    return plans


def page_ranges(
    meta: FileMetaData, k: int, erased: Ranges, source: Source
) -> tuple[ByteRange, ...] | str:
    """The bytes of group ``k`` a page-level rewrite reads (pages holding erased rows, and
    the chunks re-encoded whole), coalesced; or why page level falls back (then the
    row-group splice reads the whole group).

    ``source`` must hold the group's offset indexes.
    """
    try:
        plans = plan_group(meta, k, erased, source)
    except _Fallback as e:
        return str(e)
    cols = meta.row_groups[k].columns
    return _coalesce(r for p in plans for r in p.ranges(cols[p.column]))


def _coalesce(ranges: Iterable[ByteRange]) -> tuple[ByteRange, ...]:
    out: list[ByteRange] = []
    for r in sorted(ranges, key=lambda r: r.start):
        if out and r.start <= out[-1].end:
            out[-1] = ByteRange(out[-1].start, max(out[-1].end, r.end))
        else:
            out.append(r)
    return tuple(out)


# --- shared context -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Context:
    """What every chunk of the group shares."""

    meta: FileMetaData
    k: int
    erased: Ranges
    source: Source
    schema: pa.Schema
    bloom_bytes: Mapping[int, int]

    def keep_mask(self, first: int, end: int) -> pa.Array:
        """For rows ``[first, end)`` of the group, whether each one stays."""
        mask = [True] * (end - first)
        for s, e in intersect(self.erased, ((first, end),)):
            mask[s - first : e - first] = [False] * (e - s)
        return pa.array(mask, type=pa.bool_())

    def decode(
        self, j: int, dictionary: bytes | None, raws: Sequence[bytes], rows: Sequence[int]
    ) -> pa.Array:
        """Pages of chunk ``j`` decoded as the column's natural Arrow type."""
        cc = self.meta.row_groups[self.k].columns[j]
        file = chunk_file(chunk_schema(self.meta, j), cc, dictionary, raws, rows)
        values = decode_chunk(file).combine_chunks()
        t = self.schema.field(j).type
        try:
            return values.cast(t) if values.type != t else values
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise _Fallback("decoded pages do not fit the file's schema") from e


# --- re-encoding runs of pages ----------------------------------------------------------
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
    data: bytes,
    cc: ColumnChunk,
    allowed: frozenset[int],
    types: frozenset[int],
    like: Mapping[int, int],
) -> list[_NewPage]:
    """The data pages of a temporary file's chunk ``cc``, as new bytes (their ColumnIndex
    entries in the lists ``like`` describes: see :func:`_conformed`)."""
    pages = list(walk_pages(data, 0, chunk_range(cc)))
    if any(not p.header.is_data for p in pages):
        raise _Whole("re-encoded pages need a dictionary")
    oi_struct, ci_struct = _index_structs(cc, Source([Extent(0, data)]))
    unenc = oi_struct.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    cis = _conformed(ci_struct, [p.header.num_values or 0 for p in pages], like)
    out = []
    for i, p in enumerate(pages):
        if p.header.type not in types or p.header.encoding not in allowed:
            raise _Fallback("re-encoding changes a page's type or encoding")
        n = p.header.num_values
        assert n is not None
        u = unencoded[i] if unencoded is not None else None
        out.append(_NewPage(Bytes(data[p.offset : p.end]), p, n, cis[i], u))
    return out


def _fetched_pages(ctx: _Context, plan: ChunkPlan, a: int, b: int) -> list[Page]:
    """Pages ``[a, b)`` of a chunk, their headers read and checked against the OffsetIndex."""
    out = []
    for span in plan.layout.pages[a:b]:
        raw = ctx.source.read(span.offset, span.size)
        h, at = read_page_header(raw, 0)
        if not h.is_data or at + h.compressed_page_size != span.size:
            raise _Fallback("a chunk's pages disagree with its offset index")
        if h.num_values != span.rows:
            raise _Fallback("a page's values are not its rows")
        if h.encoding in _DICT_ENCODINGS and plan.live is None:
            raise _Whole("erased rows in dictionary-encoded pages")
        out.append(Page(span.offset, h, at))
    return out


@dataclass(frozen=True, slots=True)
class _Replaced:
    """The pages of a chunk's runs re-encoded: the new pages per run, the pages they
    replace and the erased values."""

    new: list[list[_NewPage]]
    old: list[Page]
    gone: pa.Array


def _reencode_runs(ctx: _Context, plan: ChunkPlan, full: pa.Array | None) -> _Replaced:
    """The runs of ``plan`` re-encoded (decoded from their pages, or sliced from ``full``,
    the chunk's values); dictionary-encoded pages are re-encoded PLAIN."""
    j = plan.column
    pages = plan.layout.pages
    old: list[Page] = []
    kept: list[pa.Table] = []
    gone: list[pa.Array] = []
    name = ctx.schema.field(j).name
    for a, b in plan.runs:
        run = _fetched_pages(ctx, plan, a, b)
        old.extend(run)
        raws = [ctx.source.read(p.offset, p.end - p.offset) for p in run]
        first, end = pages[a].first_row, pages[b - 1].end_row
        values = (
            full.slice(first, end - first)
            if full is not None
            else ctx.decode(j, None, raws, [s.rows for s in pages[a:b]])
        )
        mask = ctx.keep_mask(pages[a].first_row, pages[b - 1].end_row)
        gone.append(values.filter(pc.invert(mask)))
        kept.append(pa.table({name: values.filter(mask)}, schema=pa.schema([ctx.schema.field(j)])))
    spec = column_spec(ctx.meta, ctx.k, j, old, None)
    allowed = frozenset(p.header.encoding for p in old if p.header.encoding is not None)
    if allowed & _DICT_ENCODINGS:
        spec = dataclasses.replace(spec, use_dictionary=(), column_encoding={})
        allowed = (allowed - _DICT_ENCODINGS) | {Encoding.PLAIN}
    one = pa.schema([ctx.schema.field(j)])
    tables = [t for t in kept if t.num_rows]
    tmp = _write_runs(spec, one, tables, ctx.k) if tables else b""
    tgroups = parse_tail(tmp, len(tmp)).metadata if tables else None
    if tgroups is not None:
        check_column(ctx.meta, j, tgroups)
    types = frozenset(p.header.type for p in old)
    _, ci = _index_structs(ctx.meta.row_groups[ctx.k].columns[j], ctx.source)
    like = {fid: len(v.items) // len(pages) for fid, v in _index_lists(ci).items()}
    new: list[list[_NewPage]] = []
    t = 0
    for table in kept:
        if table.num_rows and tgroups is not None:
            new.append(_new_pages(tmp, tgroups.row_groups[t].columns[0], allowed, types, like))
            t += 1
        else:
            new.append([])
    return _Replaced(new, old, pa.concat_arrays(gone))


# --- one chunk --------------------------------------------------------------------------
def _page_chunk(ctx: _Context, plan: ChunkPlan, pos: int) -> _Chunk:
    """Chunk ``plan.column`` page-level, laid out from ``pos``.

    Long: one pass over the chunk's pages, copies and new ones, then its metadata.

    Raises:
        _Whole: The chunk must be re-encoded whole.
    """
    j = plan.column
    cc = ctx.meta.row_groups[ctx.k].columns[j]
    oi, ci = _index_structs(cc, ctx.source)
    spans = plan.layout.pages
    cis = _ci_entries(ci, len(spans))
    unenc = oi.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    full = _remaining(ctx, j) if plan.bloom or plan.live is not None else None
    if full is not None and plan.live is not None:
        _check_dictionary(ctx, plan, *full)
    rep = _reencode_runs(ctx, plan, full[1] if full is not None else None)
    pages: list[_NewPage] = []
    at = 0
    for (a, b), run in zip(plan.runs, rep.new, strict=True):
        for i in range(at, a):
            u = unencoded[i] if unencoded is not None else None
            sp = spans[i]
            pages.append(_NewPage(Copy(sp.offset, sp.offset + sp.size), None, sp.rows, cis[i], u))
        pages.extend(run)
        at = b
    for i in range(at, len(spans)):
        u = unencoded[i] if unencoded is not None else None
        sp = spans[i]
        pages.append(_NewPage(Copy(sp.offset, sp.offset + sp.size), None, sp.rows, cis[i], u))
    md = cc.meta_data.struct
    st = md.get(CMD.STATISTICS)
    if isinstance(st, Struct):
        new_st = statistics(
            ctx.meta.leaves()[j][1],
            ctx.schema.field(j).type,
            st,
            lost_values(rep.gone, full[1], ctx.keep_mask(0, len(full[1])))
            if full is not None
            else rep.gone,
            [p.ci for p in pages],
            sorted(_index_lists(ci)),
        )
        md = md.set(CMD.STATISTICS, TType.STRUCT, new_st)
    body: list[Segment] = []
    start = pos
    d = plan.layout.dictionary
    if d is not None:
        body.append(Copy(d.start, d.end))
        pos += d.length
    offsets = []
    for p in pages:
        offsets.append(pos)
        body.append(p.content)
        pos += p.content.length
    oi_raw, ci_raw = _page_index(pages, offsets, oi, ci)
    added = [p.header for run in rep.new for p in run if p.header is not None]
    size = sum(p.header_length + p.header.uncompressed_page_size for p in added) - sum(
        p.header_length + p.header.uncompressed_page_size for p in rep.old
    )
    values = sum(p.header.num_values or 0 for p in added) - sum(
        p.header.num_values or 0 for p in rep.old
    )
    md = md.without(CMD.INDEX_PAGE_OFFSET, CMD.DICTIONARY_PAGE_OFFSET)
    md = set_int(md, CMD.NUM_VALUES, cc.meta_data.num_values + values)
    md = set_int(md, CMD.TOTAL_COMPRESSED_SIZE, pos - start)
    md = set_int(md, CMD.TOTAL_UNCOMPRESSED_SIZE, cc.meta_data.total_uncompressed_size + size)
    md = set_int(md, CMD.DATA_PAGE_OFFSET, offsets[0])
    if d is not None:
        md = set_int(md, CMD.DICTIONARY_PAGE_OFFSET, start)
    md = encodings(encoding_stats(md, rep.old, added), added)
    md = size_statistics(md, ctx.meta.leaves()[j][1].type, rep.gone)
    s = cc.struct.set(CC.META_DATA, TType.STRUCT, md)
    if s.get(CC.FILE_OFFSET) not in (None, 0):
        s = set_int(s, CC.FILE_OFFSET, start)
    bloom = None
    if plan.bloom and full is not None:
        nbytes = ctx.bloom_bytes.get(j)
        if nbytes is None:
            raise _Whole("a bloom filter of unknown size")
        bloom = rebuilt_bloom(ctx.meta, ctx.k, j, full[0], _kept(ctx, j, full[1]), nbytes)
    return _Chunk(tuple(body), s, oi_raw, ci_raw, bloom, None)


def _remaining(ctx: _Context, j: int) -> tuple[Sequence[Page], pa.Array]:
    """All pages of chunk ``j`` and all its values (decoded, erased rows included)."""
    rg = ctx.meta.row_groups[ctx.k]
    cc = rg.columns[j]
    r = chunk_range(cc)
    raw = ctx.source.read(r.start, r.length)
    pages = walk_pages(raw, r.start, r)
    data = [p for p in pages if p.header.is_data]
    if len(data) + (pages[0].header.type == PageType.DICTIONARY_PAGE) != len(pages):
        raise _Fallback("a chunk has an index page or a misplaced dictionary page")
    dictionary = raw[: data[0].offset - r.start] if data[0].offset > r.start else None
    rows = [p.header.num_values or 0 for p in data]
    if sum(rows) != rg.num_rows:
        raise _Fallback("a chunk's values are not its rows")
    values = ctx.decode(
        j, dictionary, [raw[p.offset - r.start : p.end - r.start] for p in data], rows
    )
    return pages, values


def _kept(ctx: _Context, j: int, values: pa.Array) -> pa.Table:
    """The remaining rows of chunk ``j`` of all its ``values``."""
    field = ctx.schema.field(j)
    mask = ctx.keep_mask(0, len(values))
    return pa.table({field.name: values.filter(mask)}, schema=pa.schema([field]))


def _check_dictionary(
    ctx: _Context, plan: ChunkPlan, pages: Sequence[Page], values: pa.Array
) -> None:
    """Raises :class:`_Whole` unless the dictionary of chunk ``plan.column`` may stay."""
    data = [p for p in pages if p.header.is_data]
    spans = plan.layout.pages
    if len(data) != len(spans):
        raise _Fallback("a chunk's pages disagree with its offset index")
    dict_pages = [p.header.encoding in _DICT_ENCODINGS for p in data]
    replaced = {i for a, b in plan.runs for i in range(a, b)}
    first = min((i for i in replaced if dict_pages[i]), default=len(data))
    if any(d and i not in replaced for i, d in enumerate(dict_pages) if i > first):
        # PLAIN pages only ever follow dictionary-encoded ones (a writer's fallback); Spark's
        # vectorized reader misaligns rows of a chunk that goes back to the dictionary
        raise _Whole("a plain page would precede dictionary-encoded pages")
    rows = [(sp.first_row, sp.end_row) for sp in spans]
    keep = ctx.keep_mask(0, len(values))
    if not dictionary_stays(values, keep, rows, dict_pages, replaced, _arrow_fallback(ctx.meta)):
        raise _Whole(plan.live or "erased rows in dictionary-encoded pages")


def _whole_chunk(ctx: _Context, j: int, pos: int, why: str) -> _Chunk:
    """Chunk ``j`` decoded, stripped of the erased rows and re-encoded whole (that column
    only, as its writer encoded it), moved to ``pos``."""
    cc = ctx.meta.row_groups[ctx.k].columns[j]
    pages, values = _remaining(ctx, j)
    kept = _kept(ctx, j, values)
    field = ctx.schema.field(j)
    spec = column_spec(ctx.meta, ctx.k, j, pages, ctx.bloom_bytes.get(j))
    tmp = write_rows(spec, pa.schema([field]), kept, ctx.k)
    tmeta = parse_tail(tmp, len(tmp)).metadata
    check_column(ctx.meta, j, tmeta)
    tcc = tmeta.row_groups[0].columns[0]
    tr = chunk_range(tcc)
    compare_chunk(field.name, cc, tcc, pages, walk_pages(tmp, 0, tr))
    move = shifted(tr, pos)
    oi = _piece(tmp, tcc.offset_index_offset, tcc.offset_index_length)
    tmd = tcc.meta_data
    return _Chunk(
        (Bytes(tmp[tr.start : tr.end]),),
        shift_column(tcc.struct, move),
        shift_offset_index(oi, move) if oi is not None else None,
        _piece(tmp, tcc.column_index_offset, tcc.column_index_length),
        _piece(tmp, tmd.bloom_filter_offset, tmd.bloom_filter_length),
        why,
    )


def _piece(data: bytes, offset: int | None, length: int | None) -> bytes | None:
    return None if offset is None or length is None else data[offset : offset + length]


# --- the group --------------------------------------------------------------------------
def rewrite_pages(
    meta: FileMetaData,
    k: int,
    erased: Ranges,
    source: Source,
    bloom_bytes: Mapping[int, int],
) -> GroupRewrite | str:
    """Group ``k`` rewritten page by page, or why it cannot be.

    Args:
        meta: The file's footer.
        k: The group.
        erased: The erased rows' positions within the group.
        source: Bytes of the original already fetched: the group's offset and column
            indexes, and the ranges :func:`page_ranges` names.
        bloom_bytes: Length of each column's bloom filter (by leaf index).

    Returns:
        A :class:`~lethe.parquet.reencode.GroupRewrite` starting at the group's start whose
        body copies unchanged page runs of the original, or the reason for falling back.

    Raises:
        NeedBytes: Bytes of the original it must read were not fetched (all of them that
            are known at this point are named).
        SpliceRefused: pyarrow refuses to re-encode pages.
    """
    try:
        plans = plan_group(meta, k, erased, source)
        cols = meta.row_groups[k].columns
        missing = [
            (r.start, r.end)
            for p in plans
            for r in p.ranges(cols[p.column])
            if not source.has(r.start, r.length)
        ]
        if missing:
            raise NeedBytes(missing)
        ctx = _Context(meta, k, erased, source, natural_schema(meta), bloom_bytes)
        return _assemble(ctx, plans)
    except _Fallback as e:
        return str(e)
    except NeedBytes:
        raise
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


def _assemble(ctx: _Context, plans: Sequence[ChunkPlan]) -> GroupRewrite:
    rg = ctx.meta.row_groups[ctx.k]
    base = min(chunk_range(cc).start for cc in rg.columns)
    pos = base
    chunks: list[_Chunk] = []
    need: list[tuple[int, int]] = []
    for plan in plans:
        cc = rg.columns[plan.column]
        why = plan.whole
        if why is None:
            try:
                c = _page_chunk(ctx, plan, pos)
            except _Whole as w:
                why = str(w)
        if why is not None:
            r = chunk_range(cc)
            if not ctx.source.has(r.start, r.length):
                need.append((r.start, r.end))
                continue
            c = _whole_chunk(ctx, plan.column, pos, why)
        chunks.append(c)
        pos += sum(s.length for s in c.body)
    if need:
        raise NeedBytes(need)
    body = [s for c in chunks for s in c.body]
    if not any(isinstance(s, Copy) for s in body):
        why = "; ".join(dict.fromkeys(c.whole for c in chunks if c.whole is not None))
        raise _Fallback("no unchanged page to copy" + (f" ({why})" if why else ""))
    gs = with_list(rg.struct, RG.COLUMNS, [c.struct for c in chunks])
    gs = set_int(gs, RG.NUM_ROWS, rg.num_rows - count(ctx.erased))
    total = sum(ColumnChunk(c.struct).meta_data.total_uncompressed_size for c in chunks)
    gs = set_int(gs, RG.TOTAL_BYTE_SIZE, total)
    if gs.get(RG.TOTAL_COMPRESSED_SIZE) is not None:
        gs = set_int(gs, RG.TOTAL_COMPRESSED_SIZE, pos - base)
    return GroupRewrite(
        tuple(body),
        base,
        rg.num_rows - count(ctx.erased),
        gs,
        tuple(c.bloom for c in chunks),
        tuple(c.column_index for c in chunks),
        tuple(c.offset_index for c in chunks),
        level="page",
        reason=_whole_chunks(chunks),
    )
