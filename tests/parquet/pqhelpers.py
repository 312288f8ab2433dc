"""Helpers shared by the ``lethe.parquet`` tests: writing, splicing in memory, reading back."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from lethe.parquet import sbbf
from lethe.parquet.decode import decode_row_group
from lethe.parquet.footer import (
    ByteRange,
    Footer,
    check_roundtrip,
    chunk_range,
    index_region,
    index_structures,
    parse_tail,
    read_bloom_filter_header,
    row_group_range,
    walk_pages,
)
from lethe.parquet.locate import GroupEdit
from lethe.parquet.pages import runs
from lethe.parquet.segments import Bytes, Copy, Extent, Segment, apply_segments
from lethe.parquet.splice import SplicePlan, splice
from lethe.parquet.thrift import decode, encode

TAIL = 1 << 20


def write(table: pa.Table, **kwargs: Any) -> bytes:
    """Write ``table`` with pyarrow to memory."""
    buf = io.BytesIO()
    pq.write_table(table, buf, **kwargs)
    return buf.getvalue()


def footer_of(data: bytes) -> Footer:
    """Parse the footer the way a splice does: from a speculative tail."""
    return parse_tail(data[-TAIL:], len(data))


def group_offsets(data: bytes) -> list[int]:
    """Row offset of the first row of every group."""
    meta = footer_of(data).metadata
    out, at = [], 0
    for rg in meta.row_groups:
        out.append(at)
        at += rg.num_rows
    return out


def plan_erase(
    data: bytes,
    erase: Mapping[int, Iterable[int]],
    *,
    with_runs: bool = False,
    page_level: bool = True,
) -> SplicePlan:
    """Plan a splice that removes rows by position within their group (``with_runs``: each
    group's edit also names the erased runs, for the page-level splice).

    Only the bytes a real splice would fetch are handed over: the tail from the start of the
    index region (or the footer) and the edited groups.
    """
    footer = footer_of(data)
    region = index_region(footer)
    tail_from = min(region.start if region else footer.start, footer.start)
    edits = {}
    for g, positions in erase.items():
        rng = row_group_range(footer.metadata.row_groups[g])
        raw = data[rng.start : rng.end]
        rows = decode_row_group(footer.metadata, g, raw)
        drop = sorted(set(positions))
        dropped = set(drop)
        keep = rows.filter(pa.array([i not in dropped for i in range(rows.num_rows)]))
        edits[g] = GroupEdit(raw, keep, runs(drop)) if with_runs else GroupEdit(raw, keep)
    return splice(footer, edits, [Extent(tail_from, data[tail_from:])], page_level=page_level)


def assert_everything_round_trips(data: bytes) -> None:
    """Footer, every page header, offset and column index and bloom header: byte-exact."""
    footer = footer_of(data)
    assert encode(decode(footer.raw)) == footer.raw
    check_roundtrip(footer.raw)
    meta = footer.metadata
    for rg in meta.row_groups:
        for cc in rg.columns:
            for page in walk_pages(data, 0, chunk_range(cc)):
                raw = data[page.offset : page.data_offset]
                assert encode(decode(raw)) == raw
    for s in index_structures(meta):
        if s.kind == "bloom_filter":
            hdr, at = read_bloom_filter_header(data, s.offset)
            assert encode(hdr.struct) == data[s.offset : at]
        else:
            assert s.length is not None
            raw = data[s.offset : s.offset + s.length]
            assert encode(decode(raw)) == raw


def assert_no_stale_copies(data: bytes, plan: SplicePlan, edited: Iterable[int]) -> None:
    """No copied range holds bytes of an edited group or of one of its index structures."""
    footer = footer_of(data)
    stale = [row_group_range(footer.metadata.row_groups[g]) for g in edited]
    for s in index_structures(footer.metadata):
        if s.row_group in set(edited):
            stale.append(ByteRange(s.offset, s.offset + (s.length or 1)))
    for seg in plan.segments:
        if isinstance(seg, Copy):
            assert not any(ByteRange(seg.start, seg.end).overlaps(r) for r in stale), seg


def erase(data: bytes, erase: Mapping[int, Iterable[int]]) -> bytes:
    """The spliced file, built in memory."""
    plan = plan_erase(data, erase)
    assert_no_stale_copies(data, plan, erase)
    new = apply_segments(plan.segments, data)
    assert len(new) == plan.size
    return new


def expected(table: pa.Table, data: bytes, erase: Mapping[int, Iterable[int]]) -> pa.Table:
    """``table`` minus the erased rows (positions per group)."""
    starts = group_offsets(data)
    drop = {starts[g] + p for g, ps in erase.items() for p in ps}
    mask = pa.array([i not in drop for i in range(table.num_rows)])
    return table.filter(mask)


def assert_rewrite_from_scratch(
    table: pa.Table, data: bytes, erase: Mapping[int, Iterable[int]], new: bytes, **kwargs: Any
) -> None:
    """``new`` (``data`` spliced) holds the rows ``erase`` leaves, equal to those rows written
    from scratch with the same writer options."""
    want = expected(table, data, erase)
    assert read_pyarrow(new).equals(want)
    assert read_pyarrow(new).equals(read_pyarrow(write(want, **kwargs)))


@st.composite
def segment_layouts(
    draw: st.DrawFn, sizes: tuple[int, int], most: int, copy_max: int, new_max: int
) -> tuple[list[Segment], int]:
    """A source size drawn from ``sizes`` and 1..``most`` segments over it: copies of up to
    ``copy_max`` source bytes and runs of 1..``new_max`` new bytes."""
    size = draw(st.integers(*sizes))
    segs: list[Segment] = []
    for _ in range(draw(st.integers(1, most))):
        if draw(st.booleans()):
            a = draw(st.integers(0, size - 1))
            segs.append(Copy(a, draw(st.integers(a + 1, min(size, a + copy_max)))))
        else:
            segs.append(Bytes(bytes([draw(st.integers(0, 255))]) * draw(st.integers(1, new_max))))
    return segs, size


def read_pyarrow(data: bytes) -> pa.Table:
    """Read with pyarrow."""
    return pq.read_table(pa.BufferReader(data))


def read_duckdb(path: Path) -> pa.Table:
    """Read with DuckDB."""
    con = duckdb.connect()
    try:
        return con.sql(f"select * from read_parquet('{path}')").to_arrow_table()
    finally:
        con.close()


def datafusion_context() -> Any:
    """A DataFusion context that uses page indexes, bloom filters and filter pushdown."""
    import datafusion

    config = (
        datafusion.SessionConfig()
        .set("datafusion.execution.parquet.enable_page_index", "true")
        .set("datafusion.execution.parquet.bloom_filter_on_read", "true")
        .set("datafusion.execution.parquet.pushdown_filters", "true")
        .set("datafusion.execution.parquet.reorder_filters", "true")
        .set("datafusion.execution.parquet.pruning", "true")
    )
    return datafusion.SessionContext(config)


def write_datafusion(path: Path, table: pa.Table, **options: Any) -> Path:
    """Write ``table`` as DataFusion (arrow-rs) does, bloom filters on, into one file at
    ``path`` (``options``: more ``datafusion.ParquetWriterOptions``); the file written."""
    import datafusion

    datafusion.SessionContext().from_arrow(table).write_parquet_with_options(
        str(path),
        datafusion.ParquetWriterOptions(
            bloom_filter_on_write=True, allow_single_file_parallelism=False, **options
        ),
    )
    return next(path.glob("*.parquet")) if path.is_dir() else path


def read_datafusion(path: Path, where: str | None = None) -> pa.Table:
    """Read with DataFusion (page index, bloom filters and pushdown on)."""
    ctx = datafusion_context()
    ctx.register_parquet("t", str(path))
    sql = "select * from t" + (f" where {where}" if where else "")
    table: pa.Table = ctx.sql(sql).to_arrow_table()
    return table


def same_rows(a: pa.Table, b: pa.Table, key: str | None = None) -> bool:
    """Whether two tables hold the same rows (in order, or sorted by ``key``)."""
    x, y = a.to_pylist(), b.to_pylist()
    if key is not None:
        x.sort(key=lambda r: r[key])
        y.sort(key=lambda r: r[key])
    return x == y


def assert_engines_read(
    path: Path,
    want: pa.Table,
    key: str,
    columns: list[str] | None = None,
    *,
    polars: bool = False,
) -> None:
    """DuckDB and DataFusion (and polars, if asked) read the file at ``path`` as ``want``'s
    rows, sorted by ``key`` (only ``columns``, if given, on both sides)."""
    import polars as pl

    reads = {"duckdb": read_duckdb(path), "datafusion": read_datafusion(path)}
    if polars:
        reads["polars"] = pl.read_parquet(path).to_arrow()
    for engine, got in reads.items():
        if columns is not None:
            got, exp = got.select(columns), want.select(columns)
        else:
            exp = want
        assert same_rows(got, exp, key), engine


def keep_where(table: pa.Table, predicate: Callable[[pa.Table], pa.Array]) -> pa.Table:
    """Rows of ``table`` where ``predicate`` holds."""
    return table.filter(predicate(table))


def rich_table(n: int = 3000) -> pa.Table:
    """Flat and nested columns, decimals, timestamps, nulls."""
    ids = list(range(n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"name-{i % 97}" if i % 11 else None for i in ids]),
            "score": pa.array([i / 7 for i in ids], pa.float64()),
            "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
            "big": pa.array([decimal.Decimal(i) for i in ids], pa.decimal128(30, 0)),
            "at": pa.array([i * 1_000_001 for i in ids], pa.timestamp("us", tz="UTC")),
            "ns": pa.array([i * 1_000_000_007 for i in ids], pa.timestamp("ns")),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 400) for i in ids]),
            "tags": pa.array(
                [[f"t{i % 5}", f"u{i % 3}"] if i % 4 else None for i in ids],
                pa.list_(pa.string()),
            ),
            "point": pa.array(
                [{"x": i, "y": None if i % 3 else float(i)} for i in ids],
                pa.struct([("x", pa.int32()), ("y", pa.float64())]),
            ),
            "attrs": pa.array(
                [[("k", str(i))] if i % 2 else [] for i in ids], pa.map_(pa.string(), pa.string())
            ),
            "flag": pa.array([i % 3 == 0 if i % 13 else None for i in ids]),
            "raw": pa.array([bytes([i % 256]) * (i % 5) for i in ids], pa.binary()),
            "small": pa.array([i % 100 for i in ids], pa.uint8()),
        }
    )


WRITER_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "none-v2": {"compression": "none", "data_page_version": "2.0"},
    "zstd-page-index-bloom": {
        "compression": "zstd",
        "write_page_index": True,
        "bloom_filter_options": {"id": {"ndv": 1000, "fpp": 0.01}, "name": True},
    },
    "gzip-no-dict": {"compression": "gzip", "use_dictionary": False, "write_statistics": False},
    "brotli-v2-index": {
        "compression": "brotli",
        "data_page_version": "2.0",
        "write_page_index": True,
        "write_page_checksum": True,
    },
    "lz4-small-pages": {"compression": "lz4", "data_page_size": 512, "write_batch_size": 64},
    "encodings": {
        "use_dictionary": ["name"],
        "column_encoding": {"id": "DELTA_BINARY_PACKED", "score": "BYTE_STREAM_SPLIT"},
        "store_decimal_as_integer": True,
        "sorting_columns": [pq.SortingColumn(0)],
    },
    "int96-v1": {"use_deprecated_int96_timestamps": True, "version": "1.0"},
}


# --- bloom filters, independently of any Parquet library ------------------------------------
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M = (1 << 64) - 1
# the spec's eight salts, the library's (pyarrow-written filters probed here anchor them)
_SALT = tuple(int(x) for x in sbbf._SALT)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """xxHash64, the hash of Parquet bloom filters."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], int.from_bytes(data[i + 8 * k : i + 8 * k + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i : i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i : i + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def bloom_may_contain(bitset: bytes, value: bytes) -> bool:
    """Split-block bloom filter membership of a value's plain encoding."""
    h = xxh64(value)
    blocks = len(bitset) // 32
    at = (((h >> 32) * blocks) >> 32) * 32
    key = h & 0xFFFFFFFF
    for i, salt in enumerate(_SALT):
        word = int.from_bytes(bitset[at + 4 * i : at + 4 * i + 4], "little")
        if not word >> (((key * salt) & 0xFFFFFFFF) >> 27) & 1:
            return False
    return True


@contextmanager
def spark_session(app: str, **conf: str) -> Iterator[Any]:
    """A local one-core SparkSession for reading and writing files in these tests (no UI,
    one shuffle partition, 1 GiB driver), with ``conf`` on top; stopped on exit."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.memory", "1g")
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
