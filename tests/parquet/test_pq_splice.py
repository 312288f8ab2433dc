"""The row-group splice: exact results, valid files, no trace of erased rows."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pqhelpers import (
    WRITER_OPTIONS,
    assert_engines_read,
    assert_no_stale_copies,
    bloom_may_contain,
    erase,
    expected,
    footer_of,
    plan_erase,
    read_datafusion,
    read_pyarrow,
    rich_table,
    write,
    write_datafusion,
)

from lethe.errors import InvalidRequest, SpliceRefused, UnsupportedFile
from lethe.parquet.decode import decode_row_group
from lethe.parquet.footer import (
    index_region,
    index_structures,
    read_bloom_filter_header,
    row_group_range,
    row_group_ranges,
)
from lethe.parquet.locate import GroupEdit, locate
from lethe.parquet.model import ColumnChunk
from lethe.parquet.parts import PartLimits, plan_parts
from lethe.parquet.reencode import GroupRewrite
from lethe.parquet.segments import Bytes, Copy, Extent, Source, apply_segments
from lethe.parquet.splice import (
    assemble,
    lay_out_data,
    lay_out_region,
    needed_ranges,
    rebuild_groups,
    rewrite_groups,
    splice,
)
from lethe.parquet.thrift import TType, encode
from lethe.parquet.validate import validate

ERASURES: dict[str, dict[int, list[int]]] = {
    "first-group-one-row": {0: [0]},
    "middle-group-many-rows": {1: list(range(3, 900, 2))},
    "last-group-last-row": {2: [999]},
    "whole-middle-group": {1: list(range(1000))},
    "whole-first-group": {0: list(range(1000))},
    "several-groups": {0: [5, 6], 1: list(range(1000)), 2: [0, 500, 999]},
}


def check(data: bytes, table: pa.Table, er: Mapping[int, Iterable[int]]) -> bytes:
    er = {g: list(p) for g, p in er.items()}
    new = erase(data, er)
    assert validate(new) == []
    before = read_pyarrow(data)
    if before.schema.equals(table.schema):
        assert before.equals(table)
    assert read_pyarrow(new).equals(expected(before, data, er))
    return new


@pytest.mark.parametrize("options", WRITER_OPTIONS.values(), ids=WRITER_OPTIONS.keys())
@pytest.mark.parametrize("erasure", ERASURES.values(), ids=ERASURES.keys())
def test_splice_reads_back_minus_the_erased_rows(
    options: dict[str, Any], erasure: dict[int, list[int]]
) -> None:
    table = rich_table()
    data = write(table, row_group_size=1000, **options)
    assert validate(data) == []
    check(data, table, erasure)


@pytest.mark.parametrize(
    "options",
    [WRITER_OPTIONS["zstd-page-index-bloom"], WRITER_OPTIONS["brotli-v2-index"]],
    ids=["v1-bloom", "v2-checksums"],
)
@pytest.mark.parametrize("erasure", ERASURES.values(), ids=ERASURES.keys())
def test_other_engines_read_the_splice(
    tmp_path: Path, options: dict[str, Any], erasure: dict[int, list[int]]
) -> None:
    table = rich_table()
    data = write(table, row_group_size=1000, **options)
    new = check(data, table, erasure)
    path = tmp_path / "spliced.parquet"
    path.write_bytes(new)
    want = expected(table, data, erasure)
    flat = ["id", "name", "score", "amount", "at", "day", "flag", "small"]
    assert_engines_read(path, want, "id", flat)
    # pruning by statistics, page index and bloom filters must not lose or invent rows
    kept = set(want["id"].to_pylist())
    for probe in (0, 5, 999, 1000, 1500, 1999, 2000, 2500, 2999):
        rows = read_datafusion(path, f"id = {probe}")
        assert rows["id"].to_pylist() == ([probe] if probe in kept else [])
        name = f"name-{probe % 97}"
        hits = read_datafusion(path, f"name = '{name}'")
        assert sorted(hits["id"].to_pylist()) == sorted(
            i for i in kept if i % 97 == probe % 97 and i % 11
        )


def test_dropping_every_group_leaves_an_empty_valid_file() -> None:
    table = rich_table(200)
    data = write(table, row_group_size=100, write_page_index=True)
    new = erase(data, {0: range(100), 1: range(100)})
    assert validate(new) == []
    got = read_pyarrow(new)
    assert got.num_rows == 0
    assert got.schema == table.schema


def test_no_edit_copies_the_data_and_rewrites_the_small_index_region() -> None:
    table = rich_table(300)
    data = write(table, row_group_size=100, **WRITER_OPTIONS["zstd-page-index-bloom"])
    plan = plan_erase(data, {})
    footer = footer_of(data)
    data_end = row_group_ranges(footer.metadata)[-1].end
    assert plan.segments[0] == Copy(0, data_end)
    assert len(plan.segments) == 2  # the index region was fetched and is short: inlined
    assert apply_segments(plan.segments, data) == data
    assert [f.new_index for f in plan.groups] == [0, 1, 2]


def test_plan_layout_and_group_fates() -> None:
    table = rich_table()
    data = write(table, row_group_size=500, **WRITER_OPTIONS["zstd-page-index-bloom"])
    footer = footer_of(data)
    ranges = row_group_ranges(footer.metadata)
    plan = plan_erase(data, {1: [7], 3: range(500)})
    segs = plan.segments
    # unchanged groups are copied: group 0 with the magic, then 2, then 4 and 5
    assert segs[0] == Copy(0, ranges[0].end)
    assert isinstance(segs[1], Bytes)
    assert segs[2] == Copy(ranges[2].start, ranges[2].end)
    assert segs[3] == Copy(ranges[4].start, ranges[5].end)
    assert len(segs) == 5
    assert isinstance(segs[-1], Bytes) and segs[-1].data.endswith(
        plan.footer.raw + struct.pack("<I", plan.footer.length) + b"PAR1"
    )
    assert_no_stale_copies(data, plan, [1, 3])
    assert plan.size == len(apply_segments(segs, data))
    assert plan.copied_bytes + plan.new_bytes == plan.size
    fates = [(f.index, f.new_index, f.rows_before, f.rows_after, f.edited) for f in plan.groups]
    assert fates == [
        (0, 0, 500, 500, False),
        (1, 1, 500, 499, True),
        (2, 2, 500, 500, False),
        (3, None, 500, 0, True),
        (4, 3, 500, 500, False),
        (5, 4, 500, 500, False),
    ]
    meta = plan.footer.metadata
    assert all(rg.ordinal is None for rg in meta.row_groups)  # pyarrow writes none
    assert meta.num_rows == 3000 - 501
    assert meta.key_value_metadata == footer.metadata.key_value_metadata
    assert plan.index_region.end == plan.footer.start
    new = apply_segments(segs, data)
    assert new[plan.footer.start : plan.footer.start + plan.footer.length] == plan.footer.raw
    # the new footer describes groups where the bytes are
    for rg in meta.row_groups:
        r = row_group_range(rg)
        assert r.end <= plan.index_region.start


def test_offset_index_entries_of_later_groups_move() -> None:
    table = rich_table()
    data = write(
        table, row_group_size=500, write_page_index=True, data_page_size=256, use_dictionary=False
    )
    plan = plan_erase(data, {0: range(0, 500, 3)})
    new = apply_segments(plan.segments, data)
    old_meta, new_meta = footer_of(data).metadata, plan.footer.metadata
    delta = (
        row_group_range(new_meta.row_groups[1]).start
        - row_group_range(old_meta.row_groups[1]).start
    )
    assert delta < 0
    from lethe.parquet.footer import read_offset_index

    pages = 0
    for g in range(1, 6):
        for old, cur in zip(
            old_meta.row_groups[g].columns, new_meta.row_groups[g].columns, strict=True
        ):
            assert old.offset_index_offset is not None and cur.offset_index_offset is not None
            a = read_offset_index(
                data[
                    old.offset_index_offset : old.offset_index_offset
                    + (old.offset_index_length or 0)
                ]
            )
            b = read_offset_index(
                new[
                    cur.offset_index_offset : cur.offset_index_offset
                    + (cur.offset_index_length or 0)
                ]
            )
            pages += len(a.page_locations)
            assert [x.offset + delta for x in a.page_locations] == [
                x.offset for x in b.page_locations
            ]
            assert [x.first_row_index for x in a.page_locations] == [
                x.first_row_index for x in b.page_locations
            ]
    assert pages > 5 * 14  # several pages per chunk
    assert validate(new) == []


def test_unchanged_index_structures_are_copied_not_read() -> None:
    """Runs of unchanged bloom filters stay server-side copies (here at a 64 KiB scale)."""
    n, rg = 120_000, 20_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "v": [i % 7 for i in range(n)]})
    data = write(
        table, row_group_size=rg, write_page_index=True, bloom_filter_options={"id": {"fpp": 0.001}}
    )
    footer = footer_of(data)
    blooms = [rg.columns[0].meta_data.bloom_filter_length or 0 for rg in footer.metadata.row_groups]
    assert min(blooms) >= 32 << 10
    edit = {2: [17]}
    # fetch only what the splice must read: the footer and the moved offset indexes
    needed = needed_ranges(footer, edit)
    assert 0 < sum(r.length for r in needed) < 1000
    fetched = [Extent(r.start, data[r.start : r.end]) for r in needed]
    fetched.append(Extent(footer.start, data[footer.start :]))
    g = row_group_range(footer.metadata.row_groups[2])
    rows = decode_row_group(footer.metadata, 2, data[g.start : g.end])
    keep = rows.filter(pa.array([i != 17 for i in range(rows.num_rows)]))
    plan = splice(
        footer, {2: GroupEdit(data[g.start : g.end], keep)}, fetched, inline_below=64 << 10
    )
    new = apply_segments(plan.segments, data)
    assert validate(new) == []
    assert read_pyarrow(new).equals(expected(table, data, edit))
    assert_no_stale_copies(data, plan, edit)
    # new bytes: the re-encoded group, its bloom filter, the small rest of the region
    assert plan.new_bytes < g.length + blooms[2] + 5000
    lim = PartLimits(min_part=64 << 10, max_part=1 << 20, min_copy_source=0)
    parts = plan_parts(plan.segments, len(data), limits=lim)
    assert parts.bytes_downloaded < 64 << 10


# --- no trace ---------------------------------------------------------------------------------
SECRET_ID = 0x0123_4567_89AB_CDEF
SECRET = "zz-erase-me-4f1c9e@example.org"


def secret_table(n: int = 3000, at: int = 1234) -> pa.Table:
    ids = [SECRET_ID if i == at else i for i in range(n)]
    emails = [SECRET if i == at else f"user-{i:06d}@example.org" for i in range(n)]
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "email": emails, "n": [i % 10 for i in range(n)]}
    )


@pytest.mark.parametrize("dictionary", [True, False])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_no_trace_of_an_erased_value_survives(dictionary: bool, page_version: str) -> None:
    table = secret_table()
    data = write(
        table,
        row_group_size=1000,
        compression="none",
        use_dictionary=dictionary,
        data_page_version=page_version,
        write_page_index=True,
        bloom_filter_options={"id": {"ndv": 1000}, "email": {"ndv": 1000}},
    )
    id_bytes, email_bytes = struct.pack("<q", SECRET_ID), SECRET.encode()
    # the original holds them in data, statistics and column index
    assert data.count(id_bytes) >= 3 and data.count(email_bytes) >= 3
    meta = footer_of(data).metadata

    def blooms(file: bytes, g: int) -> list[bytes]:
        m = footer_of(file).metadata
        out = []
        for cc in m.row_groups[g].columns[:2]:
            off = cc.meta_data.bloom_filter_offset
            assert off is not None
            hdr, at = read_bloom_filter_header(file, off)
            out.append(file[at : at + hdr.num_bytes])
        return out

    old_id_bloom, old_email_bloom = blooms(data, 1)
    assert bloom_may_contain(old_id_bloom, id_bytes)
    assert bloom_may_contain(old_email_bloom, email_bytes)
    new = check(data, table, {1: [234]})
    assert id_bytes not in new
    assert email_bytes not in new
    assert old_id_bloom not in new and old_email_bloom not in new
    id_bloom, email_bloom = blooms(new, 1)
    assert not bloom_may_contain(id_bloom, id_bytes)
    assert not bloom_may_contain(email_bloom, email_bytes)
    remaining = [i for i in range(1000, 2000) if i != 1234]
    assert all(bloom_may_contain(id_bloom, struct.pack("<q", i)) for i in remaining)
    stats = pq.ParquetFile(pa.BufferReader(new)).metadata.row_group(1).column(0).statistics
    assert (stats.min, stats.max) == (1000, 1999)
    assert meta.row_groups[1].num_rows == 1000


# --- property: any table, any erase set -----------------------------------------------------
COLUMN_KINDS = {
    "int": (pa.int64(), lambda r, i: r.choice([None, i, -i, 1 << 40])),
    "str": (pa.string(), lambda r, i: r.choice([None, f"s{i % 7}", f"long-{i}" * 3, ""])),
    "float": (pa.float32(), lambda r, i: r.choice([None, i / 3, float("inf"), -0.0])),
    "bool": (pa.bool_(), lambda r, i: r.choice([None, True, False])),
    "list": (pa.list_(pa.int16()), lambda r, i: r.choice([None, [], [i % 100, None], [1, 2, 3]])),
    "struct": (
        pa.struct([("a", pa.int32()), ("b", pa.string())]),
        lambda r, i: r.choice([None, {"a": i, "b": None}, {"a": None, "b": "x"}]),
    ),
    "dec": (pa.decimal128(9, 3), lambda r, i: r.choice([None, i * 1000, -7]) and None),
    "ts": (pa.timestamp("ms"), lambda r, i: r.choice([None, i * 86_400_000, 0])),
}
OPTION_SETS = [
    {},
    {"compression": "zstd", "write_page_index": True, "bloom_filter_options": {"c0": True}},
    {"data_page_version": "2.0", "use_dictionary": False, "write_page_index": True},
    {"compression": "none", "data_page_size": 64, "write_batch_size": 8, "write_page_index": True},
    {"compression": "gzip", "write_statistics": False, "write_page_checksum": True},
]


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.Table, dict[str, Any], int, set[int]]:
    import random

    rnd = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.integers(1, 250))
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMN_KINDS)), min_size=1, max_size=4))
    cols = {}
    for j, kind in enumerate(kinds):
        typ, gen = COLUMN_KINDS[kind]
        cols[f"c{j}"] = pa.array([gen(rnd, i) for i in range(n)], typ)
    table = pa.table(cols)
    options = draw(st.sampled_from(OPTION_SETS))
    if "bloom_filter_options" in options and kinds[0] == "bool":
        options = {k: v for k, v in options.items() if k != "bloom_filter_options"}
    rg_size = draw(st.integers(1, max(1, n)))
    erased = set(draw(st.lists(st.integers(0, n - 1), max_size=n)))
    return table, options, rg_size, erased


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_splice_equals_a_rewrite_from_scratch(
    case: tuple[pa.Table, dict[str, Any], int, set[int]],
) -> None:
    table, options, rg_size, erased = case
    data = write(table, row_group_size=rg_size, **options)
    starts = list(range(0, table.num_rows, rg_size))
    er: dict[int, list[int]] = {}
    for row in sorted(erased):
        g = row // rg_size
        er.setdefault(g, []).append(row - starts[g])
    new = erase(data, er)
    assert validate(new) == []
    keep = pa.array([i not in erased for i in range(table.num_rows)])
    rewrite = read_pyarrow(write(table.filter(keep), row_group_size=rg_size, **options))
    got = read_pyarrow(new)
    assert got.equals(rewrite)
    assert got.equals(table.filter(keep))


# --- decode_row_group -----------------------------------------------------------------------
def test_decode_row_group_matches_pyarrow() -> None:
    table = rich_table()
    data = write(table, row_group_size=700, **WRITER_OPTIONS["zstd-page-index-bloom"])
    meta = footer_of(data).metadata
    reference = pq.ParquetFile(pa.BufferReader(data))
    for g in range(len(meta.row_groups)):
        r = row_group_range(meta.row_groups[g])
        got = decode_row_group(meta, g, data[r.start : r.end])
        assert got.equals(reference.read_row_group(g))
    with pytest.raises(InvalidRequest, match="spans"):
        decode_row_group(meta, 0, data[4:10])


def test_int96_out_of_nanosecond_range_is_unsupported() -> None:
    far = pa.array([-(10**16), 0, 10**16], pa.timestamp("us"))  # years 1653 and 2286
    for table in (
        pa.table({"t": far}),
        pa.table({"s": pa.StructArray.from_arrays([far], ["t"])}),
        pa.table({"l": pa.array([[x] for x in far.to_pylist()], pa.list_(pa.timestamp("us")))}),
    ):
        data = write(table, use_deprecated_int96_timestamps=True)
        meta = footer_of(data).metadata
        r = row_group_range(meta.row_groups[0])
        with pytest.raises(UnsupportedFile, match="INT96"):
            decode_row_group(meta, 0, data[r.start : r.end])
    near = pa.array([-(10**15), 0, 10**15], pa.timestamp("us"))
    table = pa.table({"t": near})
    data = write(table, use_deprecated_int96_timestamps=True, row_group_size=1)
    check(data, read_pyarrow(data), {1: [0]})


# --- refusals ---------------------------------------------------------------------------------
def _plain_file() -> tuple[bytes, pa.Table]:
    table = rich_table(300)
    return write(table, row_group_size=100, write_page_index=True), table


def _edit(data: bytes, g: int, keep: pa.Table | None = None) -> GroupEdit:
    meta = footer_of(data).metadata
    r = row_group_range(meta.row_groups[g])
    raw = data[r.start : r.end]
    rows = decode_row_group(meta, g, raw)
    return GroupEdit(raw, rows.slice(1) if keep is None else keep)


def test_refuses_a_footer_that_does_not_round_trip() -> None:
    data, _ = _plain_file()
    footer = footer_of(data)
    raw = footer.raw
    overlong = bytes([raw[0], raw[1] | 0x80, 0x00]) + raw[2:]
    from lethe.parquet.footer import Footer

    bad = Footer(footer.metadata, overlong, footer.start, footer.file_size)
    with pytest.raises(SpliceRefused, match="re-serialize"):
        splice(bad, {0: _edit(data, 0)}, [Extent(0, data)])


def _patched_footer(data: bytes, fn: Any) -> Any:
    from lethe.parquet.footer import Footer
    from lethe.parquet.model import FileMetaData

    footer = footer_of(data)
    struct_ = fn(footer.metadata.struct)
    raw = encode(struct_)
    return Footer(FileMetaData(struct_), raw, footer.start, footer.file_size)


def test_refuses_unknown_offset_bearing_fields() -> None:
    data, _ = _plain_file()
    patched = _patched_footer(data, lambda s: s.set(20, TType.I64, 12345))
    with pytest.raises(SpliceRefused, match="unknown to Lethe"):
        splice(patched, {0: _edit(data, 0)}, [Extent(0, data)])


def test_refuses_a_codec_pyarrow_cannot_write() -> None:
    data, _ = _plain_file()

    def lzo(s: Any) -> Any:
        from lethe.parquet.model import FileMetaData
        from lethe.parquet.thrift import ThriftList

        meta = FileMetaData(s)
        rg = meta.row_groups[0]
        cc = rg.columns[0].struct
        md = cc.get(3).set(4, TType.I32, 3)
        cols = (cc.set(3, TType.STRUCT, md), *(c.struct for c in rg.columns[1:]))
        g = rg.struct.set(1, TType.LIST, ThriftList(TType.STRUCT, cols))
        return s.set(
            4, TType.LIST, ThriftList(TType.STRUCT, (g, *(x.struct for x in meta.row_groups[1:])))
        )

    patched = _patched_footer(data, lzo)
    with pytest.raises(SpliceRefused, match="codec 3"):
        splice(patched, {0: _edit(data, 0)}, [Extent(0, data)])


def test_refuses_rows_that_do_not_fit_the_schema() -> None:
    data, _ = _plain_file()
    wrong = pa.table({"other": [1, 2]})
    with pytest.raises(SpliceRefused, match="do not fit"):
        splice(footer_of(data), {0: _edit(data, 0, wrong)}, [Extent(0, data)])


def test_refuses_when_index_bytes_were_not_fetched() -> None:
    data, _ = _plain_file()
    footer = footer_of(data)
    region = index_region(footer)
    assert region is not None
    with pytest.raises(SpliceRefused, match="not provided"):
        splice(footer, {0: _edit(data, 0)}, [Extent(footer.start, data[footer.start :])])
    plan = splice(footer, {0: _edit(data, 0)}, [Extent(region.start, data[region.start :])])
    assert validate(apply_segments(plan.segments, data)) == []


def test_rejects_bad_edits() -> None:
    data, _ = _plain_file()
    footer = footer_of(data)
    edit = _edit(data, 0)
    with pytest.raises(InvalidRequest, match="no row group 7"):
        splice(footer, {7: edit}, [Extent(0, data)])
    with pytest.raises(InvalidRequest, match="spans"):
        splice(
            footer,
            {1: edit},
            [Extent(0, data)]
            if len(edit.data) != row_group_range(footer.metadata.row_groups[1]).length
            else [],
        )
    rows = decode_row_group(footer.metadata, 0, edit.data)
    too_many = pa.concat_tables([rows, rows.slice(0, 1)])
    with pytest.raises(InvalidRequest, match="cannot keep"):
        splice(footer, {0: GroupEdit(edit.data, too_many)}, [Extent(0, data)])


def test_refuses_a_schema_pyarrow_would_change() -> None:
    # a legacy two-level list (repeated primitive without the LIST wrapper group) comes
    # back from pyarrow as a three-level list
    data, table = _plain_file()

    def legacy(s: Any) -> Any:
        from lethe.parquet.model import FileMetaData
        from lethe.parquet.thrift import ThriftList

        meta = FileMetaData(s)
        elems = [e.struct for e in meta.schema]
        i = next(k for k, e in enumerate(meta.schema) if e.name == "small")
        elems[i] = elems[i].set(3, TType.I32, 2).without(6, 10)  # REPEATED uint8 -> int32
        return s.set(2, TType.LIST, ThriftList(TType.STRUCT, tuple(elems)))

    patched = _patched_footer(data, legacy)
    rows = pa.table({**{n: table[n].slice(0, 99) for n in table.column_names}})
    r = row_group_range(patched.metadata.row_groups[0])
    with pytest.raises(SpliceRefused):
        splice(patched, {0: GroupEdit(data[r.start : r.end], rows)}, [Extent(0, data)])


def test_bloom_filters_without_length() -> None:
    """Older parquet-java wrote bloom_filter_offset without bloom_filter_length."""
    from lethe.parquet.enums import CC, CMD, FMD, RG
    from lethe.parquet.model import FileMetaData
    from lethe.parquet.thrift import Struct, ThriftList

    table = rich_table(1200)
    data = write(table, row_group_size=400, **WRITER_OPTIONS["zstd-page-index-bloom"])
    footer = footer_of(data)

    def strip(fm: Struct) -> Struct:
        groups = []
        for rg in FileMetaData(fm).row_groups:
            cols = []
            for cc in rg.columns:
                md = cc.meta_data.struct.without(CMD.BLOOM_FILTER_LENGTH)
                cols.append(cc.struct.set(CC.META_DATA, TType.STRUCT, md))
            groups.append(
                rg.struct.set(RG.COLUMNS, TType.LIST, ThriftList(TType.STRUCT, tuple(cols)))
            )
        return fm.set(FMD.ROW_GROUPS, TType.LIST, ThriftList(TType.STRUCT, tuple(groups)))

    raw = encode(strip(footer.metadata.struct))
    old = data[: footer.start] + raw + struct.pack("<I", len(raw)) + b"PAR1"
    assert validate(old) == []
    before = footer_of(old)
    assert all(
        s.length is None for s in index_structures(before.metadata) if s.kind == "bloom_filter"
    )
    assert needed_ranges(before, [1])  # the headers must be read
    new = check(old, table, {1: [3, 4]})
    after = footer_of(new).metadata
    # unedited groups keep the footer as it was; the re-encoded one says how long its are
    for g, rg in enumerate(after.row_groups):
        lengths = [cc.meta_data.bloom_filter_length for cc in rg.columns[:2]]
        assert all((x is None) == (g != 1) for x in lengths)


# --- files with interleaved bloom filters (arrow-rs / DataFusion layout) -------------------
def test_bloom_filters_between_row_groups_are_cut_out(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(30000)), "s": [f"v{i}" for i in range(30000)]})
    path = write_datafusion(tmp_path / "df.parquet", table, max_row_group_size=10000)
    data = path.read_bytes()
    footer = footer_of(data)
    ranges = row_group_ranges(footer.metadata)
    bloom_offsets = [
        cc.meta_data.bloom_filter_offset for rg in footer.metadata.row_groups for cc in rg.columns
    ]
    assert all(o is not None for o in bloom_offsets)
    assert any(o is not None and o < ranges[-1].end for o in bloom_offsets)  # interleaved
    t = read_pyarrow(data)
    for er in ({0: [0]}, {1: range(10000)}, {0: [1], 2: [7]}):
        plan = plan_erase(data, er)
        assert_no_stale_copies(data, plan, er)
        # the unedited groups' bloom filters between groups stay where they are
        kept = [
            cc.meta_data.bloom_filter_offset
            for g, rg in enumerate(footer.metadata.row_groups)
            if g not in er
            for cc in rg.columns
            if (cc.meta_data.bloom_filter_offset or 0) < ranges[-1].end
        ]
        assert kept
        assert all(
            any(isinstance(s, Copy) and s.start <= (o or -1) < s.end for s in plan.segments)
            for o in kept
        )
        new = check(data, t, er)
        out = tmp_path / "new.parquet"
        out.write_bytes(new)
        assert read_datafusion(out, "id = 15")["id"].to_pylist() == (
            [] if 0 in er and 15 in er[0] else [15]
        )


def test_sorting_columns_and_file_offsets_are_kept() -> None:
    table = rich_table(400)
    data = write(table, row_group_size=100, sorting_columns=[pq.SortingColumn(0)])
    new = erase(data, {1: [3]})
    meta = pq.ParquetFile(pa.BufferReader(new)).metadata
    for g in range(meta.num_row_groups):
        assert meta.row_group(g).sorting_columns == (pq.SortingColumn(0),)
    ours = footer_of(new).metadata
    for rg in ours.row_groups:
        r = row_group_range(rg)
        assert rg.file_offset == r.start
        for cc in rg.columns:
            assert ColumnChunk(cc.struct).file_offset in (
                0,
                cc.meta_data.dictionary_page_offset or cc.meta_data.data_page_offset,
            )


def _kept_as_is(data: bytes, footer: Any, g: int) -> GroupRewrite:
    """A rewrite of group ``g`` that keeps every page: one copy of its original bytes, its
    metadata and index structures in the original's coordinates."""
    rg = footer.metadata.row_groups[g]
    r = row_group_range(rg)

    def piece(offset: int | None, length: int | None) -> bytes | None:
        return None if offset is None or length is None else data[offset : offset + length]

    return GroupRewrite(
        (Copy(r.start, r.end),),
        r.start,
        rg.num_rows,
        rg.struct,
        tuple(
            piece(c.meta_data.bloom_filter_offset, c.meta_data.bloom_filter_length)
            for c in rg.columns
        ),
        tuple(piece(c.column_index_offset, c.column_index_length) for c in rg.columns),
        tuple(piece(c.offset_index_offset, c.offset_index_length) for c in rg.columns),
    )


def test_the_phases_place_a_rewrite_that_copies_original_pages() -> None:
    """What page-level splices will build on: a rewrite's body may be copies of the
    original. The middle group, re-encoded, changes size; the last one, "rewritten" as a
    copy of itself, must still read back, its offsets and offset index moved."""
    table = rich_table()
    data = write(table, row_group_size=1000, **WRITER_OPTIONS["zstd-page-index-bloom"])
    footer = footer_of(data)
    source = Source([Extent(0, data)])
    r1, r2 = (row_group_range(footer.metadata.row_groups[g]) for g in (1, 2))
    rows1 = decode_row_group(footer.metadata, 1, data[r1.start : r1.end])
    keep1 = rows1.slice(0, 700)
    edits = {
        1: GroupEdit(data[r1.start : r1.end], keep1),
        2: GroupEdit(data[r2.start : r2.end], pa.table({})),
    }
    located = locate(footer, edits, source)
    rewrites = {
        **rewrite_groups(footer.metadata, located, {1: edits[1]}),
        2: _kept_as_is(data, footer, 2),
    }
    area = lay_out_data(located, rewrites)
    groups = rebuild_groups(footer.metadata, located, rewrites, area, source)
    plan = assemble(footer, area, groups, lay_out_region(area, groups, source, 1 << 20))
    assert Copy(r2.start, r2.end) in plan.segments
    assert area.placed[2] != r2.start  # it moved: the re-encoded group before it shrank
    new = apply_segments(plan.segments, data)
    assert validate(new) == []
    before = read_pyarrow(data)
    want = pa.concat_tables([before.slice(0, 1000), before.slice(1000, 700), before.slice(2000)])
    assert read_pyarrow(new).equals(want)
    assert [(f.rows_after, f.edited) for f in plan.groups] == [
        (1000, False),
        (700, True),
        (1000, True),
    ]


@pytest.mark.parametrize("g", [0, 1, 2])
def test_refuses_an_index_structure_inside_row_group_data(g: int) -> None:
    """A column index whose declared bytes lie inside any row group's data is refused (the
    overlap check finds the group by binary search over the groups in file order, issue 37
    item 4, instead of comparing every structure with every group)."""
    from lethe.parquet.enums import CC
    from lethe.parquet.model import FileMetaData
    from lethe.parquet.thrift import ThriftList

    data, _ = _plain_file()
    inside = row_group_range(footer_of(data).metadata.row_groups[g]).start + 3

    def misplaced(s: Any) -> Any:
        meta = FileMetaData(s)
        rg = meta.row_groups[-1]
        cc = rg.columns[0].struct.set(CC.COLUMN_INDEX_OFFSET, TType.I64, inside)
        cc = cc.set(CC.COLUMN_INDEX_LENGTH, TType.I32, 2)
        cols = (cc, *(c.struct for c in rg.columns[1:]))
        last = rg.struct.set(1, TType.LIST, ThriftList(TType.STRUCT, cols))
        groups = (*(x.struct for x in meta.row_groups[:-1]), last)
        return s.set(4, TType.LIST, ThriftList(TType.STRUCT, groups))

    patched = _patched_footer(data, misplaced)
    with pytest.raises(SpliceRefused, match="overlaps row group data"):
        splice(patched, {0: _edit(data, 0)}, [Extent(0, data)])
