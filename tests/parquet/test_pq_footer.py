"""Footer parsing and exact re-serialization of what pyarrow, DuckDB and polars write."""

from __future__ import annotations

import base64
import io
import itertools
import struct
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from pqhelpers import WRITER_OPTIONS, assert_everything_round_trips, footer_of, rich_table, write

from lethe.errors import SpliceRefused, UnsupportedFile
from lethe.parquet.enums import CC, CMD, FMD, RG, PageType
from lethe.parquet.footer import (
    TailTooShort,
    check_roundtrip,
    chunk_range,
    footer_length,
    index_region,
    index_structures,
    parse_tail,
    read_bloom_filter_header,
    read_column_index,
    read_offset_index,
    row_group_range,
    row_group_ranges,
    walk_pages,
)
from lethe.parquet.model import FileMetaData, InvalidParquet
from lethe.parquet.thrift import ThriftList, TType, decode, decode_prefix, encode

N = 3000


@pytest.mark.parametrize("options", WRITER_OPTIONS.values(), ids=WRITER_OPTIONS.keys())
def test_pyarrow_files_round_trip_exactly(options: dict[str, Any]) -> None:
    table = rich_table()
    data = write(table, row_group_size=1000, **options)
    assert_everything_round_trips(data)
    meta = footer_of(data).metadata
    reference = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert meta.num_rows == reference.num_rows == N
    assert len(meta.row_groups) == reference.num_row_groups == 3
    assert meta.created_by == reference.created_by
    assert "ARROW:schema" in meta.key_value_metadata
    leaves = meta.leaves()
    assert [".".join(p) for p, _, _, _ in leaves] == [
        reference.schema.column(i).path for i in range(reference.num_columns)
    ]
    for g, rg in enumerate(meta.row_groups):
        ref = reference.row_group(g)
        assert rg.num_rows == ref.num_rows
        for j, cc in enumerate(rg.columns):
            r = ref.column(j)
            m = cc.meta_data
            assert m.data_page_offset == r.data_page_offset
            assert m.total_compressed_size == r.total_compressed_size
            assert (m.dictionary_page_offset or None) == (r.dictionary_page_offset or None)
            assert (cc.offset_index_offset is not None) == r.has_offset_index
            assert (cc.column_index_offset is not None) == r.has_column_index


def test_pyarrow_layout_and_index_structures() -> None:
    data = write(rich_table(), row_group_size=1000, **WRITER_OPTIONS["zstd-page-index-bloom"])
    footer = footer_of(data)
    meta = footer.metadata
    ranges = row_group_ranges(meta)
    assert ranges[0].start == 4
    for a, b in itertools.pairwise(ranges):
        assert a.end == b.start
    structures = index_structures(meta)
    kinds = {s.kind for s in structures}
    assert kinds == {"bloom_filter", "column_index", "offset_index"}
    assert sum(s.kind == "bloom_filter" for s in structures) == 2 * 3
    region = index_region(footer)
    assert region is not None
    assert region.start == ranges[-1].end
    assert region.end == footer.start
    for s in structures:
        assert s.length is not None
        assert region.start <= s.offset and s.offset + s.length <= region.end
        raw = data[s.offset : s.offset + s.length]
        if s.kind == "offset_index":
            oi = read_offset_index(raw)
            cc = meta.row_groups[s.row_group].columns[s.column]
            pages = [p for p in walk_pages(data, 0, chunk_range(cc)) if p.header.is_data]
            assert [loc.offset for loc in oi.page_locations] == [p.offset for p in pages]
        elif s.kind == "column_index":
            assert read_column_index(raw).num_pages >= 1
        else:
            hdr, at = read_bloom_filter_header(data, s.offset)
            assert at - s.offset + hdr.num_bytes == s.length
            assert (hdr.algorithm, hdr.hash, hdr.compression) == (1, 1, 1)


def test_chunk_range_starts_at_the_dictionary_page() -> None:
    data = write(rich_table(), row_group_size=1000)
    meta = footer_of(data).metadata
    cc = meta.row_groups[1].columns[1]  # "name": dictionary encoded
    m = cc.meta_data
    assert m.dictionary_page_offset is not None
    assert 0 < m.dictionary_page_offset < m.data_page_offset
    r = chunk_range(cc)
    assert r.start == m.dictionary_page_offset
    pages = walk_pages(data, 0, r)
    assert pages[0].header.type == PageType.DICTIONARY_PAGE
    assert pages[-1].end == r.end


def test_row_group_range_ignores_file_offset() -> None:
    data = write(rich_table(), row_group_size=1000)
    meta = footer_of(data).metadata
    rg = meta.row_groups[1]
    honest = row_group_range(rg)
    lying = rg.struct.set(5, rg.struct.field(5).type if rg.struct.field(5) else 6, 12345)  # type: ignore[union-attr]
    from lethe.parquet.model import RowGroup

    assert row_group_range(RowGroup(lying)) == honest
    # a 0 dictionary_page_offset means "none" for some writers
    cc = rg.columns[0].struct
    md = cc.get(3)
    assert md is not None
    zero = cc.set(3, cc.field(3).type, md.set(11, 6, 0))  # type: ignore[union-attr, arg-type]
    from lethe.parquet.model import ColumnChunk

    assert chunk_range(ColumnChunk(zero)).start == rg.columns[0].meta_data.data_page_offset


def _with_zero_dictionary_offsets(data: bytes) -> bytes:
    """The file with ``dictionary_page_offset = 0`` ("none" for some writers) in every chunk."""
    footer = footer_of(data)
    groups = []
    for rg in footer.metadata.row_groups:
        cols = [
            cc.struct.set(
                CC.META_DATA,
                TType.STRUCT,
                cc.meta_data.struct.set(CMD.DICTIONARY_PAGE_OFFSET, TType.I64, 0),
            )
            for cc in rg.columns
        ]
        groups.append(rg.struct.set(RG.COLUMNS, TType.LIST, ThriftList(TType.STRUCT, tuple(cols))))
    fm = footer.metadata.struct.set(
        FMD.ROW_GROUPS, TType.LIST, ThriftList(TType.STRUCT, tuple(groups))
    )
    raw = encode(fm)
    return data[: footer.start] + raw + struct.pack("<I", len(raw)) + b"PAR1"


@pytest.mark.parametrize("variant", ["dictionary", "plain", "zero dictionary offset"])
def test_writer_and_reader_locate_groups_by_the_same_rule(variant: str) -> None:
    """DESIGN §4.1 once: the writer and the reader apply it to pyarrow's metadata."""
    from lethe.parquet.footer import chunk_span
    from lethe.writing.writer import row_group_range as writer_range

    data = write(rich_table(), row_group_size=1000, use_dictionary=variant == "dictionary")
    if variant == "zero dictionary offset":
        data = _with_zero_dictionary_offsets(data)
    meta = footer_of(data).metadata
    arrow = pq.read_metadata(pa.BufferReader(data))
    for g, rg in enumerate(meta.row_groups):
        r = row_group_range(rg)
        assert writer_range(arrow.row_group(g)) == (r.start, r.end)
        for j, cc in enumerate(rg.columns):
            assert chunk_span(arrow.row_group(g).column(j)) == chunk_range(cc)
    if variant == "dictionary":
        assert any(chunk_range(cc).start < cc.meta_data.data_page_offset for cc in rg.columns)
    else:
        assert all(chunk_range(cc).start == cc.meta_data.data_page_offset for cc in rg.columns)
    if variant == "zero dictionary offset":
        assert arrow.row_group(0).column(0).dictionary_page_offset == 0
    assert pq.read_table(pa.BufferReader(data)).num_rows == N


def test_parse_tail_needs_the_whole_footer() -> None:
    data = write(rich_table(), row_group_size=1000)
    n = footer_length(data[-8:], len(data))
    with pytest.raises(TailTooShort) as e:
        parse_tail(data[-(n + 7) :], len(data))
    assert e.value.needed == n + 8
    footer = parse_tail(data[-(n + 8) :], len(data))
    assert footer.start == len(data) - n - 8
    assert footer.length == n
    assert footer.file_size == len(data)


@pytest.mark.parametrize(
    ("tail", "size", "error", "match"),
    [
        (b"PAR1", 100, InvalidParquet, "too short"),
        (b"\x00" * 8, 100, InvalidParquet, "no PAR1"),
        (struct.pack("<I", 1000) + b"PAR1", 100, InvalidParquet, "exceeds"),
        (struct.pack("<I", 10) + b"PARE", 100, UnsupportedFile, "encrypted"),
    ],
)
def test_parse_tail_rejects(tail: bytes, size: int, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_tail(tail, size)


def test_garbage_footer_is_invalid() -> None:
    raw = b"\x19\xff\xff"
    tail = raw + struct.pack("<I", len(raw)) + b"PAR1"
    with pytest.raises(InvalidParquet, match="does not decode"):
        parse_tail(tail, 100)


class _Kms(pe.KmsClient):  # type: ignore[misc]
    def __init__(self, _config: Any) -> None:
        super().__init__()

    def wrap_key(self, key_bytes: bytes, _master_key_identifier: str) -> bytes:
        return base64.b64encode(key_bytes)

    def unwrap_key(self, wrapped_key: bytes, _master_key_identifier: str) -> bytes:
        return base64.b64decode(wrapped_key)


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_encrypted_files_are_unsupported(plaintext_footer: bool) -> None:
    config = pe.EncryptionConfiguration(
        footer_key="fk",
        column_keys={"ck": ["x"]},
        plaintext_footer=plaintext_footer,
        double_wrapping=False,
    )
    props = pe.CryptoFactory(_Kms).file_encryption_properties(pe.KmsConnectionConfig(), config)
    buf = io.BytesIO()
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    with pq.ParquetWriter(buf, schema, encryption_properties=props) as w:
        w.write_table(pa.table({"x": [1, 2], "y": [3, 4]}))
    data = buf.getvalue()
    with pytest.raises(UnsupportedFile, match="encrypted"):
        parse_tail(data, len(data))


def test_check_roundtrip_refuses_what_it_cannot_reproduce() -> None:
    data = write(rich_table(100))
    raw = footer_of(data).raw
    assert check_roundtrip(raw) == decode(raw)
    # FileMetaData.version (field 1, i32) written with an over-long varint
    assert raw[0] == 0x15
    overlong = bytes([0x15, raw[1] | 0x80, 0x00]) + raw[2:]
    assert decode(overlong) == decode(raw)
    with pytest.raises(SpliceRefused, match="re-serialize"):
        check_roundtrip(overlong)
    with pytest.raises(SpliceRefused, match="does not decode"):
        check_roundtrip(raw[:-3])


def test_unknown_fields_survive_the_codec() -> None:
    data = write(rich_table(100))
    meta = footer_of(data).metadata
    extended = meta.struct.set(42, 8, b"future")  # type: ignore[arg-type]
    again = FileMetaData(decode(encode(extended)))
    assert again.struct.get(42) == b"future"
    assert again.num_rows == meta.num_rows


def test_duckdb_files_round_trip_exactly(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "d.parquet"
    query = """
        copy (
            select range as id, 'v' || (range % 100) as s, range * 1.5 as f,
                   [range, range + 1] as l, {{'a': range, 'b': 'x'}} as st,
                   case when range % 3 = 0 then null else range end as n
            from range(25000)
        ) to '{path}' (format parquet, row_group_size 10000{extra})
    """
    for extra in ["", ", compression zstd", ", parquet_version v2"]:
        con.execute(query.format(path=path, extra=extra))
        data = path.read_bytes()
        assert_everything_round_trips(data)
        meta = footer_of(data).metadata
        assert meta.created_by is not None and "DuckDB" in meta.created_by
        assert [rg.num_rows for rg in meta.row_groups] == [10240, 10240, 4520] or sum(
            rg.num_rows for rg in meta.row_groups
        ) == 25000
    con.close()


def test_polars_files_round_trip_exactly(tmp_path: Path) -> None:
    df = pl.DataFrame(
        {
            "id": list(range(20000)),
            "s": [f"v{i % 100}" for i in range(20000)],
            "l": [[i, i] for i in range(20000)],
        }
    )
    path = tmp_path / "p.parquet"
    for options in [{}, {"compression": "snappy", "data_page_size": 1000}, {"statistics": "full"}]:
        df.write_parquet(path, row_group_size=5000, **options)  # type: ignore[arg-type]
        data = path.read_bytes()
        assert_everything_round_trips(data)
        meta = footer_of(data).metadata
        assert meta.created_by is not None and "Polars" in meta.created_by
        assert meta.num_rows == 20000


def test_decode_prefix_reads_page_headers_in_place() -> None:
    data = write(rich_table(100))
    meta = footer_of(data).metadata
    first = meta.row_groups[0].columns[0]
    header, end = decode_prefix(data, chunk_range(first).start)
    assert end > chunk_range(first).start
    assert header.get(1) in (0, 2)
