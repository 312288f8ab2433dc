"""The Iceberg view of an adopted table whose segments mix files adopted with partition
values (identity spec 1) and files Lethe wrote (their partition columns inside, spec 0): one
manifest per spec per segment, read exactly by PyIceberg (format 2 and 3) and polars, pruned
on the partition column, and the manifests of untouched segments reused across publishes."""

from __future__ import annotations

import pathlib
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import events
from test_adopt import DAYS, hive_lake, with_dt

import lethe
from lethe.iceberg import avro as iavro
from lethe.iceberg import publish
from lethe.iceberg.publish import PublishResult
from lethe.maintenance.compaction import CompactionOptions
from tests.engines import iceberg_view


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    cols = ("id", "dt", "customer_id", "payload")
    return sorted(zip(*(t[c].to_pylist() for c in cols), strict=True))


def _check_view(aws: Any, s3: Any, bucket: str, t: lethe.Table, r: PublishResult) -> set[int]:
    """PyIceberg and polars read the view as Lethe does; a filter on ``dt`` plans only the
    files that can hold the day. Returns the spec ids of the manifest list."""
    import polars as pl
    from pyiceberg.expressions import EqualTo

    st = iceberg_view(aws, r.uri)
    want = t.scan()
    assert _rows(st.scan().to_arrow()) == _rows(want)
    assert _rows(pl.scan_iceberg(st).collect().to_arrow()) == _rows(want)
    for d in (date(2026, 1, 1), date(2026, 1, 4)):
        q = st.scan(row_filter=EqualTo("dt", d.isoformat()))
        planned = {task.file.file_path for task in q.plan_files()}
        holding = {
            f.path if f.path.startswith("s3://") else f"{t.uri}/{f.path}"
            for f in t.manifest.files
            if d.isoformat() in _days_of(t, f)
        }
        assert planned == holding, d  # pruned to exactly the files holding the day
        assert _rows(q.to_arrow()) == _rows(want.filter(pc.equal(want["dt"], d)))
    snap = st.current_snapshot()
    assert snap is not None
    body = s3.get_object(Bucket=bucket, Key=snap.manifest_list.split("/", 3)[3])["Body"].read()
    return {mf.partition_spec_id for mf in iavro.decode_manifest_list(body)}


def _days_of(t: lethe.Table, f: Any) -> set[str]:
    """The days a file may hold (its partition value, or its ``dt`` statistics' range)."""
    if f.partition:
        return {date.fromordinal(date(1970, 1, 1).toordinal() + f.partition["dt"]).isoformat()}
    st = f.columns["dt"]
    lo = date.fromordinal(date(1970, 1, 1).toordinal() + st.min)
    hi = date.fromordinal(date(1970, 1, 1).toordinal() + st.max)
    return {date.fromordinal(o).isoformat() for o in range(lo.toordinal(), hi.toordinal() + 1)}


@pytest.mark.slow
@pytest.mark.parametrize("format_version", [2, 3])
def test_a_view_mixing_adopted_and_lethe_written_files_reads_exactly(
    aws: Any, s3: Any, bucket: str, tmp_path: pathlib.Path, format_version: int, monkeypatch: Any
) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # no polars_iceberg plugin here
    rows = hive_lake(s3, bucket, tmp_path, "pyarrow")
    uri = f"s3://{bucket}/tables/mixed"
    t = lethe.Table.adopt(
        uri, f"s3://{bucket}/raw/events/", key="id", partition_types={"dt": pa.date32()}
    )
    fv: Any = format_version

    results: list[PublishResult] = []

    def view() -> set[int]:
        results.append(publish(t.catalog, t.manifest, format_version=fv))
        return _check_view(aws, s3, bucket, t, results[-1])

    assert view() == {1}
    # Lethe-written rows: one file of a day the adopted files have, one spanning two days
    # (no cast: the adopted schema has ``id`` nullable, as the footers declare it, and rows
    # whose ``id`` is required go into it as they are)
    t.append(with_dt(events(10_000, 40, customers=50), DAYS[1]))
    two = pa.concat_tables(
        [with_dt(events(20_000, 30, customers=50), DAYS[2]),
         with_dt(events(20_030, 30, customers=50), "2026-01-04")]
    )  # fmt: skip
    t.append(two)
    assert t.scan().num_rows == rows + 100
    assert view() == {0, 1}
    # one segment holds both kinds: its data manifest and the spec-1 companion
    assert sum(k.endswith(".spec1.avro") for k in results[-1].written) == 1
    t.delete([("customer_id", "=", 7)])  # DVs in both kinds of files
    assert view() == {0, 1}
    assert results[-1].reused == 2  # both data manifests of the unchanged segment object
    deletes = [k for k in results[-1].written if k.startswith("metadata/lethe-x-")]
    assert len(deletes) == 2 and deletes[1] == deletes[0].replace(".avro", ".spec1.avro")
    n42 = t.scan(filters=[("customer_id", "=", 42)]).num_rows
    assert n42 > 0
    t.erase([("customer_id", "=", 42)])  # splices both kinds
    assert t.scan(filters=[("customer_id", "=", 42)]).num_rows == 0
    view()
    t.compact(CompactionOptions(min_deleted_fraction=0.01, small_file_fraction=1.0))
    view()
    assert {date.fromisoformat(d) for d in (*DAYS, "2026-01-04")} == set(t.scan()["dt"].to_pylist())
