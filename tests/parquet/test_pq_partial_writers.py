"""Page-level erase of files other writers wrote with page indexes: DataFusion (arrow-rs) and
Spark (parquet-java). (pyarrow's files: ``test_pq_partial.py``; DuckDB writes no page index,
so its files take the row-group splice, with the reason, in ``test_pq_partial.py`` too.)

Each spliced file must validate, keep unchanged pages as copies of the original, and read back
identically (minus the erased rows) in pyarrow, DuckDB, DataFusion (page index on, with point
filters), polars and, for Spark's files, Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pqhelpers import (
    assert_engines_read,
    erase,
    expected,
    footer_of,
    read_datafusion,
    read_pyarrow,
    spark_session,
    write_datafusion,
)
from test_pq_partial import spliced, table

from lethe.parquet.bloom import bloom_filter
from lethe.parquet.footer import row_group_range
from lethe.parquet.segments import Copy
from lethe.parquet.splice import SplicePlan

ERASE = {1: [0, 1, 2500, 3999], 2: [1777]}


def read_back_everywhere(
    tmp_path: Path, data: bytes, erase: Mapping[int, list[int]], key: str = "id"
) -> tuple[Path, SplicePlan]:
    """Splice page by page; check the result in every Python-side reader; the path and plan."""
    new, plan = spliced(data, erase)  # validates
    want = expected(read_pyarrow(data), data, erase)
    assert read_pyarrow(new).equals(want)
    path = tmp_path / "spliced.parquet"
    path.write_bytes(new)
    assert_engines_read(path, want, key, polars=True)
    before = read_pyarrow(data)[key].to_pylist()
    starts = [0]
    for rg in footer_of(data).metadata.row_groups:
        starts.append(starts[-1] + rg.num_rows)
    gone = [before[starts[g] + p] for g, ps in erase.items() for p in ps]
    kept = [k for k in (before[0], before[len(before) // 2], before[-1]) if k not in gone]
    for k in gone[:3] + kept:  # DataFusion prunes pages by the rebuilt page index
        assert read_datafusion(path, f"{key} = {k}").num_rows == (k in kept)
    return path, plan


def assert_some_group_at_page_level(data: bytes, plan: SplicePlan) -> None:
    """At least one edited group was rewritten page by page, with unchanged pages copied."""
    fates = [f for f in plan.groups if f.edited]
    assert all(f.level == "page" or f.reason for f in fates), fates
    paged = [f.index for f in fates if f.level == "page"]
    assert paged, fates
    r = row_group_range(footer_of(data).metadata.row_groups[paged[0]])
    assert any(isinstance(s, Copy) and r.start <= s.start and s.end <= r.end for s in plan.segments)


# --- DataFusion (arrow-rs) ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "dictionary"), [("1.0", True), ("2.0", True), ("1.0", False)], ids=str
)
def test_datafusion_files_erase_page_by_page(
    tmp_path: Path, version: str, dictionary: bool
) -> None:
    data = datafusion_file(tmp_path, version, dictionary)
    _, plan = read_back_everywhere(tmp_path, data, ERASE)
    assert_some_group_at_page_level(data, plan)


def datafusion_file(tmp_path: Path, version: str, dictionary: bool) -> bytes:
    """``table(12_000)`` as DataFusion writes it: 4,000-row groups, small pages, blooms."""
    path = write_datafusion(
        tmp_path / "df.parquet",
        table(12_000),
        max_row_group_size=4000,
        data_pagesize_limit=4096,
        data_page_row_count_limit=1000,
        writer_version=version,
        dictionary_enabled=dictionary,
    )
    data = path.read_bytes()
    assert "datafusion" in (footer_of(data).metadata.created_by or "")
    return data


def _bloom_of(data: bytes, g: int, j: int) -> bytes:
    m = footer_of(data).metadata.row_groups[g].columns[j].meta_data
    assert m.bloom_filter_offset is not None and m.bloom_filter_length is not None
    return data[m.bloom_filter_offset :][: m.bloom_filter_length]


def test_boolean_bloom_filters_of_arrow_rs_are_rebuilt_without_the_erased_value(
    tmp_path: Path,
) -> None:
    """arrow-rs fills bloom filters of BOOLEAN columns, which pyarrow refuses to build: erasing
    the one False of a group leaves a filter that holds True alone, at both granularities."""
    n = 12_000
    t = pa.table({"id": list(range(n)), "flag": [i != 5000 for i in range(n)]})
    path = write_datafusion(
        tmp_path / "b.parquet",
        t,
        max_row_group_size=4000,
        data_pagesize_limit=1024,
        data_page_row_count_limit=500,
    )
    data = path.read_bytes()
    old = _bloom_of(data, 1, 1)
    # the same hash input as arrow-rs: its filter is reproduced byte for byte
    assert bloom_filter(pa.array([True, False]), len(old)) == old
    assert bloom_filter(pa.array([True]), len(old)) != old
    paged, plan = spliced(data, {1: [1000]})
    assert plan.groups[1].level == "page", plan.groups
    whole = erase(data, {1: [1000]})
    for new in (paged, whole):
        assert _bloom_of(new, 1, 1) == bloom_filter(pa.array([True]), len(old))
        assert _bloom_of(new, 0, 1) == _bloom_of(data, 0, 1)
        got = read_pyarrow(new)
        assert got.num_rows == n - 1 and 5000 not in got["id"].to_pylist()
        path.write_bytes(new)
        assert read_datafusion(path, "flag = false").num_rows == 0
        assert read_datafusion(path, "flag = true").num_rows == n - 1


# --- Spark (parquet-java) -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session(
        "lethe-page-level-writers", **{"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    ) as session:
        yield session


SPARK_FLAT = """
    select id, concat('person-', id) as name, cast(id as double) * 1.5 as f,
           case when id % 3 = 0 then null else id end as n, id % 2 = 0 as b,
           cast(id % 100 as int) as small, timestamp_seconds(1600000000 + id) as ts
    from range(30000)
"""
SPARK_LAYOUTS = {
    "v1-dict": {},
    "v2-dict": {"parquet.writer.version": "v2"},
    "v1-plain-zstd-crc": {
        "parquet.enable.dictionary": "false",
        "compression": "zstd",
        "parquet.page.write-checksum.enabled": "true",
    },
}


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.xdist_group("spark")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # py4j sockets
@pytest.mark.parametrize("layout", SPARK_LAYOUTS.values(), ids=SPARK_LAYOUTS.keys())
def test_spark_files_erase_page_by_page(spark: Any, tmp_path: Path, layout: dict[str, str]) -> None:
    writer = spark.sql(SPARK_FLAT).coalesce(1).write.mode("overwrite")
    opts = {"parquet.block.size": "60000", "parquet.page.size": "4096"} | layout
    for k, v in opts.items():
        writer = writer.option(k, v)
    writer.parquet(str(tmp_path / "out"))
    source = next((tmp_path / "out").glob("*.parquet"))
    data = source.read_bytes()
    meta = footer_of(data).metadata
    assert (meta.created_by or "").startswith("parquet-mr")
    assert len(meta.row_groups) >= 3
    erase = {g: [p for p in ps if p < meta.row_groups[g].num_rows] for g, ps in ERASE.items()}
    path, plan = read_back_everywhere(tmp_path, data, erase)
    assert_some_group_at_page_level(data, plan)
    want = read_pyarrow(path.read_bytes())
    df = spark.read.parquet(str(path))
    assert df.count() == want.num_rows
    assert sorted(r["id"] for r in df.select("id").collect()) == sorted(want["id"].to_pylist())
    for probe in (0, 5, 29_999, *(want["id"].to_pylist()[:2])):
        assert df.where(f"id = {probe}").count() == (probe in set(want["id"].to_pylist()))
    gone = sorted(set(read_pyarrow(data)["id"].to_pylist()) - set(want["id"].to_pylist()))
    assert gone and all(df.where(f"id = {g}").count() == 0 for g in gone)
    got = sorted(r["name"] for r in df.where("small > 90").select("name").collect())
    exp = sorted(
        n
        for n, s in zip(want["name"].to_pylist(), want["small"].to_pylist(), strict=True)
        if s > 90
    )
    assert got == exp, (
        sorted(set(got) - set(exp))[:20],
        sorted(set(exp) - set(got))[:20],
        plan.groups,
    )


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.xdist_group("spark")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # py4j sockets
@pytest.mark.parametrize("dictionary", [True, False], ids=["dict", "plain"])
def test_spark_reads_page_level_datafusion_files(
    spark: Any, tmp_path: Path, dictionary: bool
) -> None:
    """Spark's vectorized reader (its default) reads every column of the spliced file."""
    data = datafusion_file(tmp_path, "1.0", dictionary)
    path, plan = read_back_everywhere(tmp_path, data, ERASE)
    assert_some_group_at_page_level(data, plan)
    want = read_pyarrow(path.read_bytes())
    cols = ["id", "name", "small", "flag", "score"]
    got = sorted(tuple(r[c] for c in cols) for r in spark.read.parquet(str(path)).collect())
    assert got == sorted(tuple(r[c] for c in cols) for r in want.to_pylist())
