"""Files of other writers: DuckDB, polars, DataFusion and Spark (parquet-java).

Every footer must round-trip byte for byte; every splice must read back identically (minus the
erased rows) and validate, or be refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from pqhelpers import (
    assert_engines_read,
    assert_everything_round_trips,
    erase,
    expected,
    footer_of,
    plan_erase,
    read_datafusion,
    read_pyarrow,
    spark_session,
    write_datafusion,
)

from lethe.errors import SpliceRefused
from lethe.parquet.validate import validate

ERASE = [{0: [0]}, {1: "all"}, {2: [5, 100]}, {0: [1, 2], 2: [0]}]


def resolve(data: bytes, er: dict[int, Any]) -> dict[int, list[int]]:
    meta = footer_of(data).metadata
    return {
        g: list(range(meta.row_groups[g].num_rows)) if rows == "all" else rows
        for g, rows in er.items()
    }


def check_splices(
    data: bytes, tmp_path: Path, *, key: str = "id", datafusion_filters: bool = True
) -> list[bytes]:
    assert validate(data) == []
    assert_everything_round_trips(data)
    before = read_pyarrow(data)
    out = []
    for er in ERASE:
        er = resolve(data, er)
        new = erase(data, er)
        assert validate(new) == [], er
        want = expected(before, data, er)
        assert read_pyarrow(new).equals(want)
        path = tmp_path / "new.parquet"
        path.write_bytes(new)
        flat = [f.name for f in want.schema if not pa.types.is_nested(f.type)]
        assert_engines_read(path, want, key, flat)
        n = before.num_rows
        for probe in (0, 1, 5, n // 2, n - 1) if datafusion_filters else ():
            hits = read_datafusion(path, f"{key} = {probe}")[key].to_pylist()
            assert hits == [x for x in want[key].to_pylist() if x == probe]
        out.append(new)
    return out


# --- DuckDB -------------------------------------------------------------------------------------
DUCKDB_QUERY = """
    copy (
        select range as id, 'v' || (range % 100) as s, (range * 1.5)::double as f,
               (range % 1000)::decimal(9, 2) as dec, (range % 1000)::decimal(18, 3) as dec18,
               timestamp '2020-01-01' + to_seconds(range) as ts,
               date '2020-01-01' + (range % 100)::int as d,
               [range, range + 1] as l, {{'a': range, 'b': 'x'}} as st, range % 2 = 0 as b,
               case when range % 3 = 0 then null else range end as n, range::int as i32,
               (range % 100)::tinyint as i8, range::uhugeint::ubigint as u64
        from range(12288)
    ) to '{path}' (format parquet, row_group_size 4096{extra})
"""


@pytest.mark.parametrize("extra", ["", ", compression zstd", ", parquet_version v2"])
def test_duckdb_files_splice(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "duck.parquet"
    con = duckdb.connect()
    con.execute(DUCKDB_QUERY.format(path=path, extra=extra))
    con.close()
    data = path.read_bytes()
    assert "DuckDB" in (footer_of(data).metadata.created_by or "")
    # DataFusion cannot skip inside DuckDB's DELTA_BINARY_PACKED pages ("cannot skip
    # miniblock"), original file included: no filtered DataFusion reads for v2 pages
    check_splices(data, tmp_path, datafusion_filters="v2" not in extra)


def test_duckdb_wide_decimals_are_refused(tmp_path: Path) -> None:
    """DuckDB stores DECIMAL(p > 18) in 16 bytes; pyarrow would use the minimal width."""
    path = tmp_path / "duck.parquet"
    con = duckdb.connect()
    con.execute(
        f"copy (select range as id, (range * 1.5)::decimal(21, 1) as x from range(100)) "
        f"to '{path}' (format parquet)"
    )
    con.close()
    data = path.read_bytes()
    with pytest.raises(SpliceRefused, match="schema element 'x'"):
        plan_erase(data, {0: [3]})


# --- polars -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "snappy", "data_page_size": 1000}, {"statistics": "full"}],
    ids=["default", "snappy-small-pages", "full-statistics"],
)
def test_polars_files_splice(tmp_path: Path, options: dict[str, Any]) -> None:
    n = 12000
    df = pl.DataFrame(
        {
            "id": list(range(n)),
            "s": [f"v{i % 100}" for i in range(n)],
            "f": [i / 3 for i in range(n)],
            "l": [[i, i] for i in range(n)],
            "n": [None if i % 3 == 0 else i for i in range(n)],
        }
    )
    path = tmp_path / "polars.parquet"
    df.write_parquet(path, row_group_size=4000, **options)
    data = path.read_bytes()
    meta = footer_of(data).metadata
    assert "Polars" in (meta.created_by or "")
    assert [rg.ordinal for rg in meta.row_groups] == [0, 1, 2]
    news = check_splices(data, tmp_path)
    dropped = footer_of(news[1]).metadata  # group 1 erased whole
    assert [rg.ordinal for rg in dropped.row_groups] == [0, 1]
    # polars' ColumnChunk.file_offset points past the chunk (at an inline ColumnMetaData):
    # it moves with its group
    from lethe.parquet.footer import chunk_range, row_group_range

    moved = footer_of(news[0]).metadata.row_groups
    data_end = row_group_range(meta.row_groups[-1]).end
    for old, new in zip(meta.row_groups[1:], moved[1:], strict=True):
        shift = row_group_range(new).start - row_group_range(old).start
        assert shift < 0
        for a, b in zip(old.columns, new.columns, strict=True):
            if a.file_offset <= data_end:
                assert b.file_offset == a.file_offset + shift
            else:  # pointed into the old index region: now the chunk's start
                assert b.file_offset == chunk_range(b).start


# --- DataFusion (arrow-rs) ----------------------------------------------------------------------
def test_datafusion_files_splice(tmp_path: Path) -> None:
    n = 12000
    table = pa.table(
        {"id": list(range(n)), "s": [f"v{i}" for i in range(n)], "x": [i % 7 for i in range(n)]}
    )
    path = write_datafusion(tmp_path / "df.parquet", table, max_row_group_size=4000)
    data = path.read_bytes()
    assert "datafusion" in (footer_of(data).metadata.created_by or "")
    check_splices(data, tmp_path)


# --- Spark --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session("lethe-parquet-tests") as session:
        yield session


def comparable(df: Any) -> Any:
    """Spark cannot compare MAP columns in set operations: compare their JSON."""
    from pyspark.sql import functions as f

    return df.withColumn("m", f.to_json("m"))


SPARK_QUERY = """
    select id, concat('v', id % 100) as s, cast(id as double) * 1.5 as f,
           cast(id % 1000 as decimal(9, 2)) as dec, cast(id as decimal(20, 3)) as bigdec,
           timestamp_seconds(1600000000 + id) as ts, array(id, id + 1) as l,
           named_struct('a', id, 'b', 'x') as st, id % 2 = 0 as b,
           case when id % 3 = 0 then null else id end as n,
           date_add(date '2020-01-01', cast(id % 100 as int)) as d, cast(id as int) as i32,
           map('k', id) as m
    from range(30000)
"""
SPARK_VARIANTS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "int96": ({}, {}),
    "micros": ({}, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}),
    "v2-pages": (
        {"parquet.writer.version": "v2"},
        {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
    ),
    "bloom-crc-zstd": (
        {
            "parquet.bloom.filter.enabled#id": "true",
            "parquet.bloom.filter.enabled#s": "true",
            "parquet.page.write-checksum.enabled": "true",
            "compression": "zstd",
        },
        {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
    ),
}


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.xdist_group("spark")
@pytest.mark.parametrize("variant", SPARK_VARIANTS.values(), ids=SPARK_VARIANTS.keys())
def test_spark_files_splice(
    spark: Any, tmp_path: Path, variant: tuple[dict[str, str], dict[str, str]]
) -> None:
    options, conf = variant
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        writer = spark.sql(SPARK_QUERY).coalesce(1).write.mode("overwrite")
        writer = writer.option("parquet.block.size", 200_000)
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.parquet(str(tmp_path / "out"))
    finally:
        for k in conf:
            spark.conf.unset(k)
    source = next((tmp_path / "out").glob("*.parquet"))
    data = source.read_bytes()
    meta = footer_of(data).metadata
    assert (meta.created_by or "").startswith("parquet-mr")
    assert len(meta.row_groups) > 3
    if "parquet.bloom.filter.enabled#id" in options:
        assert meta.row_groups[0].columns[0].meta_data.bloom_filter_offset is not None
    news = check_splices(data, tmp_path)
    original = spark.read.parquet(str(source))
    before = set(read_pyarrow(data).column("id").to_pylist())
    for k in (0, 3):  # one row of the first group; rows of two groups
        path = tmp_path / f"spliced-{k}.parquet"
        path.write_bytes(news[k])
        gone = sorted(before - set(read_pyarrow(news[k]).column("id").to_pylist()))
        assert gone
        spliced = comparable(spark.read.parquet(str(path)))
        want = comparable(original.filter(~original.id.isin(gone)))
        assert spliced.count() == want.count() == len(before) - len(gone)
        assert spliced.exceptAll(want).union(want.exceptAll(spliced)).count() == 0
        # (count, not collect: pyspark's collect leaks a socket to the garbage collector)
        for probe in (gone[0], 5, 29_999):
            assert spliced.filter(spliced.id == probe).count() == (probe not in gone)


def test_polars_inline_metadata_keeps_no_trace(tmp_path: Path) -> None:
    """polars copies each chunk's metadata (statistics) after the chunk: it must go too."""
    import struct

    secret_id, secret = 0x0123_4567_89AB_CDEF, "zz-erase-me-4f1c9e@example.org"
    n, at = 3000, 1999  # the last row of the middle group: its chunk's statistics max
    df = pl.DataFrame(
        {
            "id": [secret_id if i == at else i for i in range(n)],
            "email": [secret if i == at else f"user-{i:06d}@example.org" for i in range(n)],
        }
    )
    path = tmp_path / "polars.parquet"
    df.write_parquet(path, row_group_size=1000, compression="uncompressed", statistics=True)
    data = path.read_bytes()
    id_bytes, email_bytes = struct.pack("<q", secret_id), secret.encode()
    footer = footer_of(data)
    assert data[: footer.start].count(id_bytes) >= 2  # data page and inline statistics
    assert data[: footer.start].count(email_bytes) >= 2
    new = erase(data, {1: [999]})
    assert validate(new) == []
    assert id_bytes not in new and email_bytes not in new
    assert read_pyarrow(new).equals(expected(read_pyarrow(data), data, {1: [999]}))
