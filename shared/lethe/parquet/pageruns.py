"""Re-encoding the runs of pages of a page-level splice (DESIGN §4 "Page level", issue 37
item 2): the plan of one chunk, what every chunk of a group shares, and the runs of pages
holding erased rows decoded, stripped of them and re-encoded as their writer encoded them.
:mod:`lethe.parquet.partial` assembles the chunks and the group.

Dictionary-encoded pages are re-encoded against the chunk's own dictionary
(:mod:`lethe.parquet.dictpages`): pyarrow writes the kept rows of a piece of consecutive
dictionary-encoded pages with a dictionary of its own, and each of its pages' indices is
mapped onto the chunk's; the chunk's dictionary page is then scrubbed of the entries no
remaining row uses. Other pages are re-encoded as they were (PLAIN for those past a
writer's dictionary fallback).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet.chunkmeta import PageFallback as _Fallback
from lethe.parquet.chunkmeta import WholeChunk as _Whole
from lethe.parquet.dictpages import DICT_ENCODINGS as _DICT_ENCODINGS
from lethe.parquet.dictpages import Dictionary, referenced, remapped_page
from lethe.parquet.enums import OI, Encoding, PageType, PhysicalType
from lethe.parquet.fidelity import check_column
from lethe.parquet.footer import (
    ByteRange,
    Page,
    chunk_range,
    parse_tail,
    read_page_header,
    walk_pages,
)
from lethe.parquet.model import ColumnChunk, FileMetaData
from lethe.parquet.pageentries import NewPage as _NewPage
from lethe.parquet.pageentries import conformed as _conformed
from lethe.parquet.pageentries import index_lists as _index_lists
from lethe.parquet.pages import (
    ChunkLayout,
    Ranges,
    chunk_file,
    chunk_schema,
    decode_chunk,
    intersect,
)
from lethe.parquet.reencode import WriteSpec, column_spec
from lethe.parquet.segments import Bytes, Extent, Segment, Source
from lethe.parquet.thrift import Struct, ThriftList, decode

__all__ = [
    "ChunkPlan",
    "Context",
    "Replaced",
    "Target",
    "dictionary_target",
    "index_structs",
    "reencode_runs",
    "scrubbed",
]


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


def index_structs(cc: ColumnChunk, source: Source) -> tuple[Struct, Struct | None]:
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


# --- shared context -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Context:
    """What every chunk of the group shares."""

    meta: FileMetaData
    k: int
    erased: Ranges
    source: Source
    schema: pa.Schema
    bloom_bytes: Mapping[int, int]

    def keep_mask(self, first: int, end: int) -> pa.Array:
        """For rows ``[first, end)`` of the group, whether each one stays."""
        mask = np.ones(end - first, dtype=bool)
        for s, e in intersect(self.erased, ((first, end),)):
            mask[s - first : e - first] = False
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
    target: Target | None = None,
) -> tuple[list[_NewPage], np.ndarray | None]:
    """The data pages of a temporary file's chunk ``cc``, as new bytes (their ColumnIndex
    entries in the lists ``like`` describes: see :func:`_conformed`); with a ``target``, its
    dictionary-encoded pages mapped onto the original's dictionary (and the entries they use)."""
    pages = list(walk_pages(data, 0, chunk_range(cc)))
    codec = cc.meta_data.codec
    used = None
    if target is not None and pages and pages[0].header.type == PageType.DICTIONARY_PAGE:
        d = pages.pop(0)
        own = Dictionary.parse(d, data[d.data_offset : d.end], codec, *target.physical)
        used = target.dictionary.mapping(own)
    if any(not p.header.is_data for p in pages):
        raise _Whole("re-encoded pages need a dictionary")
    oi_struct, ci_struct = index_structs(cc, Source([Extent(0, data)]))
    unenc = oi_struct.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    unencoded = unenc.items if isinstance(unenc, ThriftList) else None
    cis = _conformed(ci_struct, [p.header.num_values or 0 for p in pages], like)
    out = []
    for i, p in enumerate(pages):
        content: Segment = Bytes(data[p.offset : p.end])
        if used is not None and target is not None:
            if p.header.encoding not in _DICT_ENCODINGS:
                raise _Whole("re-encoded pages leave the dictionary")
            h, raw = remapped_page(
                p, data[p.data_offset : p.end], codec, target.max_def, used,
                target.dictionary.width, target.encoding,
            )  # fmt: skip
            p, content = Page(0, h, len(raw) - h.compressed_page_size), Bytes(raw)
        if p.header.type not in types or p.header.encoding not in allowed:
            raise _Fallback("re-encoding changes a page's type or encoding")
        n = p.header.num_values
        assert n is not None
        u = unencoded[i] if unencoded is not None else None
        out.append(_NewPage(content, p, n, cis[i], u))
    return out, used


def _fetched_pages(ctx: Context, plan: ChunkPlan, a: int, b: int) -> list[Page]:
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
class Target:
    """A chunk's own dictionary, that re-encoded dictionary-encoded pages index into."""

    dictionary: Dictionary
    physical: tuple[int, int | None]  # physical type, type length
    max_def: int
    encoding: int  # of its dictionary-encoded pages


@dataclass(frozen=True, slots=True)
class Replaced:
    """The pages of a chunk's runs re-encoded: the new pages per run, the pages they
    replace, the erased values and the dictionary entries the new pages use."""

    new: list[list[_NewPage]]
    old: list[Page]
    gone: pa.Array
    used: list[np.ndarray]


def _pieces(run: Sequence[Page], own: bool) -> list[tuple[int, int, bool]]:
    """``[a, b)`` of a run's pages by whether they are re-encoded with the dictionary."""
    out: list[tuple[int, int, bool]] = []
    for i, p in enumerate(run):
        d = own and p.header.encoding in _DICT_ENCODINGS
        if out and out[-1][2] == d:
            out[-1] = (out[-1][0], i + 1, d)
        else:
            out.append((i, i + 1, d))
    return out


@dataclass(frozen=True, slots=True)
class _Piece:
    run: int
    dictionary: bool
    kept: pa.Table
    pages: Sequence[Page]


def _cut(
    ctx: Context, plan: ChunkPlan, full: pa.Array | None, target: Target | None
) -> tuple[list[_Piece], list[Page], list[pa.Array]]:
    """The runs of ``plan`` fetched and cut into pieces of kept rows (decoded from their
    pages, or sliced from ``full``, the chunk's values); the pages and the erased values."""
    j = plan.column
    pages = plan.layout.pages
    one = pa.schema([ctx.schema.field(j)])
    old: list[Page] = []
    gone: list[pa.Array] = []
    pieces: list[_Piece] = []
    for r, (a, b) in enumerate(plan.runs):
        run = _fetched_pages(ctx, plan, a, b)
        old.extend(run)
        first = pages[a].first_row
        if full is not None:
            values = full.slice(first, pages[b - 1].end_row - first)
        else:
            raws = [ctx.source.read(p.offset, p.end - p.offset) for p in run]
            values = ctx.decode(j, None, raws, [s.rows for s in pages[a:b]])
        mask = ctx.keep_mask(first, pages[b - 1].end_row)
        gone.append(values.filter(pc.invert(mask)))
        for s, e, d in _pieces(run, target is not None):
            at, n = (
                pages[a + s].first_row - first,
                pages[a + e - 1].end_row - pages[a + s].first_row,
            )
            kept = values.slice(at, n).filter(mask.slice(at, n))
            pieces.append(_Piece(r, d, pa.table([kept], schema=one), run[s:e]))
    return pieces, old, gone


def reencode_runs(
    ctx: Context, plan: ChunkPlan, full: pa.Array | None, target: Target | None
) -> Replaced:
    """The runs of ``plan`` re-encoded: dictionary-encoded pages against ``target`` (the
    chunk's dictionary), else PLAIN; the others as they were."""
    j = plan.column
    one = pa.schema([ctx.schema.field(j)])
    pieces, old, gone = _cut(ctx, plan, full, target)
    types = frozenset(p.header.type for p in old)
    _, ci = index_structs(ctx.meta.row_groups[ctx.k].columns[j], ctx.source)
    like = {fid: len(v.items) // len(plan.layout.pages) for fid, v in _index_lists(ci).items()}
    made: dict[int, list[_NewPage]] = {}
    used: list[np.ndarray] = []
    for d in (False, True):
        group = [(i, p) for i, p in enumerate(pieces) if p.dictionary == d and p.kept.num_rows]
        if not group:
            continue
        olds = [pg for _, p in group for pg in p.pages]
        spec = column_spec(ctx.meta, ctx.k, j, olds, None)
        allowed = frozenset(p.header.encoding for p in olds if p.header.encoding is not None)
        if not d and allowed & _DICT_ENCODINGS:
            spec = dataclasses.replace(spec, use_dictionary=(), column_encoding={})
            allowed = (allowed - _DICT_ENCODINGS) | {Encoding.PLAIN}
        tmp = _write_runs(spec, one, [p.kept for _, p in group], ctx.k)
        tmeta = parse_tail(tmp, len(tmp)).metadata
        check_column(ctx.meta, j, tmeta)
        for t, (i, _) in enumerate(group):
            cc = tmeta.row_groups[t].columns[0]
            made[i], u = _new_pages(tmp, cc, allowed, types, like, target if d else None)
            if u is not None:
                used.append(u)
    new: list[list[_NewPage]] = [[] for _ in plan.runs]
    for i, p in enumerate(pieces):
        new[p.run].extend(made.get(i, []))
    return Replaced(new, old, pa.concat_arrays(gone), used)


def dictionary_target(ctx: Context, plan: ChunkPlan, pages: Sequence[Page]) -> Target | None:
    """The chunk's dictionary, when its dictionary-encoded pages are re-encoded against it."""
    if plan.live is None:
        return None
    d = pages[0]
    if d.header.type != PageType.DICTIONARY_PAGE:
        raise _Whole("dictionary-encoded pages without a dictionary page")
    if ctx.meta.leaves()[plan.column][1].type in (PhysicalType.FLOAT, PhysicalType.DOUBLE):
        raise _Whole("a floating-point dictionary")
    elem = ctx.meta.leaves()[plan.column][1]
    cc = ctx.meta.row_groups[ctx.k].columns[plan.column]
    raw = ctx.source.read(d.data_offset, d.header.compressed_page_size)
    if elem.type is None:
        raise _Whole("a column without a physical type")
    physical = (elem.type, elem.type_length)
    dictionary = Dictionary.parse(d, raw, cc.meta_data.codec, *physical)
    encs = [p.header.encoding for p in pages if p.header.encoding in _DICT_ENCODINGS]
    encoding = encs[0] if encs else Encoding.RLE_DICTIONARY
    return Target(dictionary, physical, ctx.meta.leaves()[plan.column][2], encoding)


def scrubbed(
    ctx: Context, plan: ChunkPlan, pages: Sequence[Page], target: Target, rep: Replaced
) -> bytes | None:
    """The chunk's dictionary page with the entries no remaining row uses overwritten (see
    :mod:`lethe.parquet.dictpages`), None when every entry is used."""
    replaced = {i for a, b in plan.runs for i in range(a, b)}
    data = [p for p in pages if p.header.is_data]
    kept = [
        (p, ctx.source.read(p.data_offset, p.header.compressed_page_size))
        for i, p in enumerate(data)
        if i not in replaced
    ]
    codec = ctx.meta.row_groups[ctx.k].columns[plan.column].meta_data.codec
    used = np.concatenate([referenced(kept, codec, target.max_def), *rep.used])
    return target.dictionary.scrubbed(used.astype(np.int64))
