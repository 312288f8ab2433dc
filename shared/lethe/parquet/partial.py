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
  still kept or re-encoded as above. The filter is rebuilt at the original's size
  (:mod:`lethe.parquet.bloom`; fewer values only lower its false-positive rate).
- *Dictionary*: when only pages past an Arrow writer's dictionary fallback (PLAIN) hold
  erased rows, the dictionary page is kept: every entry of it is a value of a kept
  dictionary-encoded page. When a dictionary-encoded page holds an erased row (or the
  writer is not known to reference every entry from a dictionary-encoded page), the chunk
  is fetched whole; the replaced dictionary-encoded pages are re-encoded against the
  chunk's own dictionary (so the chunk stays dictionary-encoded, issue 37 item 2) and the
  dictionary page is scrubbed of every entry no remaining row references
  (:mod:`lethe.parquet.pageruns`, :mod:`lethe.parquet.dictpages`).
- *Whole chunk*: a floating-point chunk with erased rows in dictionary-encoded pages is
  decoded and re-encoded whole (that column only, its dictionary rebuilt), as is one whose
  statistics cannot be proven (below); each such chunk is a counted fallback
  (``GroupRewrite.fallbacks``).
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

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lethe.errors import SpliceRefused
from lethe.parquet.chunkmeta import PageFallback as _Fallback
from lethe.parquet.chunkmeta import WholeChunk as _Whole
from lethe.parquet.chunkmeta import encoding_stats, encodings, size_statistics, statistics
from lethe.parquet.chunkvalues import lost_values, rebuilt_bloom
from lethe.parquet.enums import (
    CC,
    CMD,
    OI,
    RG,
    PageType,
    PhysicalType,
    Repetition,
)
from lethe.parquet.fidelity import check_column, compare_chunk
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
from lethe.parquet.pageentries import index_lists as _index_lists
from lethe.parquet.pageentries import rebuilt_indexes as _page_index
from lethe.parquet.pageruns import (
    ChunkPlan,
    Context,
    dictionary_target,
    index_structs,
    reencode_runs,
    scrubbed,
)
from lethe.parquet.pages import ChunkLayout, Ranges, chunk_layout, count
from lethe.parquet.reencode import GroupRewrite, column_spec, natural_schema, write_rows
from lethe.parquet.segments import Bytes, Copy, NeedBytes, Segment, Source
from lethe.parquet.thrift import Struct, ThriftList, TType, encode

__all__ = ["ChunkPlan", "page_ranges", "plan_group", "rewrite_pages"]


@dataclass(frozen=True, slots=True)
class _Chunk:
    """A rebuilt column chunk: body, metadata and index structures (body coordinates)."""

    body: tuple[Segment, ...]
    struct: Struct
    offset_index: bytes | None
    column_index: bytes | None
    bloom: bytes | None
    whole: str | None  # why the chunk was re-encoded whole; None when page-level


# --- the plan, from the footer and the offset indexes -----------------------------------
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
    oi_struct, _ = index_structs(cc, source)
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


# --- one chunk --------------------------------------------------------------------------
def _page_chunk(ctx: Context, plan: ChunkPlan, pos: int) -> _Chunk:
    """Chunk ``plan.column`` page-level, laid out from ``pos``.

    Long: one pass over the chunk's pages, copies and new ones, then its metadata.

    Raises:
        _Whole: The chunk must be re-encoded whole.
    """
    j = plan.column
    cc = ctx.meta.row_groups[ctx.k].columns[j]
    oi, ci = index_structs(cc, ctx.source)
    spans = plan.layout.pages
    cis = _ci_entries(ci, len(spans))
    unenc = oi.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    full = _remaining(ctx, j) if plan.bloom or plan.live is not None else None
    target = dictionary_target(ctx, plan, full[0]) if full is not None else None
    rep = reencode_runs(ctx, plan, full[1] if full is not None else None, target)
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
    dict_size = 0  # change of the dictionary page's uncompressed size, header included
    if d is not None:
        scrub = scrubbed(ctx, plan, full[0], target, rep) if target and full else None
        body.append(Copy(d.start, d.end) if scrub is None else Bytes(scrub))
        pos += d.length if scrub is None else len(scrub)
        if scrub is not None and full is not None:
            h, at = read_page_header(scrub, 0)
            old = full[0][0]
            dict_size = at + h.uncompressed_page_size
            dict_size -= old.header_length + old.header.uncompressed_page_size
    offsets = []
    for p in pages:
        offsets.append(pos)
        body.append(p.content)
        pos += p.content.length
    oi_raw, ci_raw = _page_index(pages, offsets, oi, ci)
    added = [p.header for run in rep.new for p in run if p.header is not None]
    size = dict_size + sum(p.header_length + p.header.uncompressed_page_size for p in added)
    size -= sum(p.header_length + p.header.uncompressed_page_size for p in rep.old)
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


def _remaining(ctx: Context, j: int) -> tuple[Sequence[Page], pa.Array]:
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


def _kept(ctx: Context, j: int, values: pa.Array) -> pa.Table:
    """The remaining rows of chunk ``j`` of all its ``values``."""
    field = ctx.schema.field(j)
    mask = ctx.keep_mask(0, len(values))
    return pa.table({field.name: values.filter(mask)}, schema=pa.schema([field]))


def _whole_chunk(ctx: Context, j: int, pos: int, why: str) -> _Chunk:
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
    bloom = _piece(tmp, tmd.bloom_filter_offset, tmd.bloom_filter_length)
    size = ctx.bloom_bytes.get(j)
    if bloom is not None and size is not None:
        with contextlib.suppress(_Whole, SpliceRefused):  # at its size, else pyarrow's
            bloom = rebuilt_bloom(ctx.meta, ctx.k, j, pages, kept, size)
    return _Chunk(
        (Bytes(tmp[tr.start : tr.end]),),
        shift_column(tcc.struct, move),
        shift_offset_index(oi, move) if oi is not None else None,
        _piece(tmp, tcc.column_index_offset, tcc.column_index_length),
        bloom,
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
        ctx = Context(meta, k, erased, source, natural_schema(meta), bloom_bytes)
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


def _assemble(ctx: Context, plans: Sequence[ChunkPlan]) -> GroupRewrite:
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
        fallbacks=tuple(c.whole for c in chunks if c.whole is not None),
    )
