"""The structural validator finds what readers would trip over."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pyarrow as pa
import pytest
from pqhelpers import footer_of, rich_table, write

from lethe.parquet.enums import CC, CMD, FMD, RG
from lethe.parquet.footer import chunk_range, walk_pages
from lethe.parquet.thrift import Struct, ThriftList, TType, encode
from lethe.parquet.validate import Problem, validate

OPTIONS = {
    "write_page_index": True,
    "bloom_filter_options": {"id": True},
    "use_dictionary": ["name"],
    "data_page_size": 1024,
    "write_batch_size": 64,
    "write_page_checksum": True,
    "compression": "none",
}


@pytest.fixture(scope="module")
def data() -> bytes:
    return write(rich_table(1000), row_group_size=400, **OPTIONS)


def refooter(data: bytes, edit: Callable[[Struct], Struct]) -> bytes:
    footer = footer_of(data)
    raw = encode(edit(footer.metadata.struct))
    return data[: footer.start] + raw + struct.pack("<I", len(raw)) + b"PAR1"


def _items(s: Struct, fid: int) -> list[Struct]:
    lst = s.get(fid)
    assert isinstance(lst, ThriftList)
    return [x for x in lst.items if isinstance(x, Struct)]


def _put(s: Struct, fid: int, items: list[Struct]) -> Struct:
    return s.set(fid, TType.LIST, ThriftList(TType.STRUCT, tuple(items)))


def edit_chunk(g: int, j: int, fn: Callable[[Struct], Struct]) -> Callable[[Struct], Struct]:
    def edit(fm: Struct) -> Struct:
        groups = _items(fm, FMD.ROW_GROUPS)
        cols = _items(groups[g], RG.COLUMNS)
        cols[j] = fn(cols[j])
        groups[g] = _put(groups[g], RG.COLUMNS, cols)
        return _put(fm, FMD.ROW_GROUPS, groups)

    return edit


def edit_meta(g: int, j: int, fid: int, fn: Callable[[int], int]) -> Callable[[Struct], Struct]:
    def inner(cc: Struct) -> Struct:
        md = cc.get(CC.META_DATA)
        assert isinstance(md, Struct)
        v = md.get(fid)
        assert isinstance(v, int)
        return cc.set(CC.META_DATA, TType.STRUCT, md.set(fid, TType.I64, fn(v)))

    return edit_chunk(g, j, inner)


def messages(problems: list[Problem]) -> str:
    return "\n".join(str(p) for p in problems)


def test_a_valid_file_has_no_problems(data: bytes) -> None:
    assert validate(data) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (edit_meta(1, 0, CMD.NUM_VALUES, lambda v: v + 1), "pages hold 400 values"),
        (edit_meta(0, 0, CMD.TOTAL_COMPRESSED_SIZE, lambda v: v - 1), "past the chunk's end"),
        (edit_meta(0, 0, CMD.TOTAL_COMPRESSED_SIZE, lambda v: v + 1), ""),
        (edit_meta(1, 1, CMD.DICTIONARY_PAGE_OFFSET, lambda v: v + 1), ""),
        (edit_meta(2, 0, CMD.BLOOM_FILTER_OFFSET, lambda v: v + 1), "bloom filter"),
        (edit_meta(2, 0, CMD.BLOOM_FILTER_LENGTH, lambda v: v + 1), "bloom_filter_length"),
        (
            edit_chunk(
                1,
                0,
                lambda c: c.set(
                    CC.OFFSET_INDEX_OFFSET, TType.I64, c.get(CC.OFFSET_INDEX_OFFSET) + 0
                ),
            ),
            None,
        ),  # type: ignore[operator]
        (lambda fm: fm.set(FMD.NUM_ROWS, TType.I64, 999), "num_rows 999"),
    ],
    ids=[
        "num-values",
        "chunk-too-short",
        "chunk-too-long",
        "dictionary-offset",
        "bloom-offset",
        "bloom-length",
        "unchanged",
        "file-num-rows",
    ],
)
def test_footer_corruptions_are_found(
    data: bytes, edit: Callable[[Struct], Struct], expected: str | None
) -> None:
    problems = validate(refooter(data, edit))
    if expected is None:
        assert problems == []
    else:
        assert problems, "corruption not found"
        assert expected in messages(problems)


def test_offset_indexes_pointing_at_another_groups_pages(data: bytes) -> None:
    fm = footer_of(data).metadata
    other = fm.row_groups[0].columns[0]

    def steal(cc: Struct) -> Struct:
        assert other.offset_index_offset is not None and other.offset_index_length is not None
        cc = cc.set(CC.OFFSET_INDEX_OFFSET, TType.I64, other.offset_index_offset)
        return cc.set(CC.OFFSET_INDEX_LENGTH, TType.I32, other.offset_index_length)

    problems = validate(refooter(data, edit_chunk(1, 0, steal)))
    assert "offset index page 0: offset" in messages(problems)


def test_column_index_with_the_wrong_page_count(data: bytes) -> None:
    fm = footer_of(data).metadata
    pages = [
        len([p for p in walk_pages(data, 0, chunk_range(cc)) if p.header.is_data])
        for cc in fm.row_groups[0].columns
    ]
    many = max(range(len(pages)), key=lambda j: pages[j])
    few = next(j for j in range(len(pages)) if pages[j] != pages[many])
    donor = fm.row_groups[0].columns[many]

    def steal(cc: Struct) -> Struct:
        assert donor.column_index_offset is not None and donor.column_index_length is not None
        cc = cc.set(CC.COLUMN_INDEX_OFFSET, TType.I64, donor.column_index_offset)
        return cc.set(CC.COLUMN_INDEX_LENGTH, TType.I32, donor.column_index_length)

    problems = validate(refooter(data, edit_chunk(0, few, steal)))
    assert "column index null_pages has" in messages(problems)


def test_offset_index_entries_checked_one_by_one(data: bytes) -> None:
    fm = footer_of(data).metadata
    cc = fm.row_groups[1].columns[0]
    assert cc.offset_index_offset is not None and cc.offset_index_length is not None
    off, n = cc.offset_index_offset, cc.offset_index_length
    from lethe.parquet.footer import read_offset_index

    oi = read_offset_index(data[off : off + n])
    locs = _items(oi.struct, 1)
    assert len(locs) > 2
    for field, delta, expected in [(1, 3, "offset"), (2, -1, "size"), (3, 1, "first row")]:
        bad = list(locs)
        v = bad[1].get(field)
        assert isinstance(v, int)
        bad[1] = bad[1].set(field, bad[1].field(field).type, v + delta)  # type: ignore[union-attr]
        raw = encode(_put(oi.struct, 1, bad))
        # append the corrupted index at the end of the data area and point the chunk to it
        footer = footer_of(data)
        body = data[: footer.start] + raw

        size = len(raw)

        def point(c: Struct, at: int = footer.start, size: int = size) -> Struct:
            c = c.set(CC.OFFSET_INDEX_OFFSET, TType.I64, at)
            return c.set(CC.OFFSET_INDEX_LENGTH, TType.I32, size)

        new_fm = edit_chunk(1, 0, point)(footer.metadata.struct)
        fraw = encode(new_fm)
        problems = validate(body + fraw + struct.pack("<I", len(fraw)) + b"PAR1")
        assert f"offset index page 1: {expected}" in messages(problems)


def test_page_crc_is_checked(data: bytes) -> None:
    fm = footer_of(data).metadata
    page = walk_pages(data, 0, chunk_range(fm.row_groups[0].columns[2]))[0]
    assert page.header.crc is not None
    broken = bytearray(data)
    broken[page.data_offset] ^= 0x01
    assert "CRC mismatch" in messages(validate(bytes(broken)))


def test_overlapping_row_groups(data: bytes) -> None:
    def dup(fm: Struct) -> Struct:
        groups = _items(fm, FMD.ROW_GROUPS)
        return _put(fm, FMD.ROW_GROUPS, [*groups, groups[0]]).set(FMD.NUM_ROWS, TType.I64, 1400)

    assert "overlaps" in messages(validate(refooter(data, dup)))


def test_ordinals_are_checked(data: bytes) -> None:
    def ordinal(fm: Struct) -> Struct:
        groups = _items(fm, FMD.ROW_GROUPS)
        groups[1] = groups[1].set(RG.ORDINAL, TType.I16, 5)
        return _put(fm, FMD.ROW_GROUPS, groups)

    assert "ordinal is 5" in messages(validate(refooter(data, ordinal)))


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        (b"", "does not start with PAR1"),
        (b"PAR1" + b"\x00" * 20, "footer"),
        (b"PAR1" + b"\x19" * 4 + struct.pack("<I", 4) + b"PAR1", "footer"),
    ],
)
def test_not_parquet(blob: bytes, expected: str) -> None:
    problems = validate(blob)
    assert (problems and problems[0].where.startswith(expected.split()[0])) or expected in messages(
        problems
    )


def test_flat_and_v2_row_counts() -> None:
    table = pa.table({"x": list(range(100)), "l": [[i] for i in range(100)]})
    data = write(table, data_page_version="2.0", write_page_index=True, row_group_size=50)
    assert validate(data) == []

    def rows(fm: Struct) -> Struct:
        groups = _items(fm, FMD.ROW_GROUPS)
        groups[0] = groups[0].set(RG.NUM_ROWS, TType.I64, 49)
        return _put(fm, FMD.ROW_GROUPS, groups).set(FMD.NUM_ROWS, TType.I64, 99)

    found = messages(validate(refooter(data, rows)))
    assert "v2 pages hold 50 rows, not 49" in found
    assert "50 values in a flat column of 49 rows" in found
