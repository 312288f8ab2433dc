"""Adoption in place (issue 28): Hive-partitioned Parquet written by pyarrow, DuckDB and
polars becomes a table without a copy; reads project the partition values, erasure splices
the originals away and GC deletes them (byte audit of the whole bucket); ownership,
idempotence, resumption, schema conflicts and the erasure-readiness report."""

from __future__ import annotations

import io
import json
import pathlib
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import bucket_objects, events
from faults import InjectedFault, on_request
from hypothesis import given
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.adopt.hive import hive_values, is_data_object
from lethe.audit.verify import verify
from lethe.gc import collect
from lethe.storage.store import S3Store
from tests.engines import iceberg_view

DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")


def day_rows(i: int, n: int = 60) -> pa.Table:
    """Rows of one day (customer 42 among them), without the partition column."""
    return events(i * 1000, n, customers=50)


def put_parquet(s3: Any, bucket: str, key: str, t: pa.Table, **kw: Any) -> None:
    buf = io.BytesIO()
    pq.write_table(t, buf, **kw)
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())


def upload_tree(s3: Any, bucket: str, root: pathlib.Path, prefix: str) -> list[str]:
    keys = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            key = f"{prefix}/{p.relative_to(root).as_posix()}"
            s3.put_object(Bucket=bucket, Key=key, Body=p.read_bytes())
            keys.append(key)
    return keys


def with_dt(t: pa.Table, day: str) -> pa.Table:
    return t.append_column("dt", pa.array([date.fromisoformat(day)] * t.num_rows, pa.date32()))


def hive_lake(s3: Any, bucket: str, tmp_path: pathlib.Path, writer: str) -> int:
    """``raw/events/dt=.../`` written by ``writer`` (uncompressed, so a byte audit can see
    values); returns the number of rows."""
    whole = pa.concat_tables([with_dt(day_rows(i), d) for i, d in enumerate(DAYS)])
    out = tmp_path / writer
    if writer == "pyarrow":
        for i, d in enumerate(DAYS):
            put_parquet(
                s3, bucket, f"raw/events/dt={d}/part-0.parquet", day_rows(i), compression="none"
            )
        return whole.num_rows
    if writer == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.register("src", whole)
        con.execute(
            f"COPY (SELECT * FROM src) TO '{out}' (FORMAT PARQUET, PARTITION_BY (dt), "
            "COMPRESSION 'uncompressed')"
        )
    elif writer == "polars":
        import polars as pl

        pl.from_arrow(whole).write_parquet(out, partition_by=["dt"], compression="uncompressed")  # type: ignore[union-attr]
    upload_tree(s3, bucket, out, "raw/events")
    return whole.num_rows


def raw_keys(s3: Any, bucket: str) -> list[str]:
    got = s3.list_objects_v2(Bucket=bucket, Prefix="raw/").get("Contents", [])
    return sorted(o["Key"] for o in got)


def audit_bucket(s3: Any, bucket: str, customer: int, payloads: list[bytes]) -> list[str]:
    """Every object of the bucket that still holds a row of ``customer``: Parquet objects
    decoded (any column ``customer_id`` equal to it), every object searched for the rows'
    payload bytes."""
    holders = []
    for key, body, t in bucket_objects(s3, bucket):
        if (
            t is not None
            and "customer_id" in t.column_names
            and pc.any(pc.equal(t["customer_id"], customer)).as_py()
        ) or any(p in body for p in payloads):
            holders.append(key)
    return holders


@pytest.mark.parametrize("writer", ["pyarrow", "duckdb", "polars"])
def test_adopt_hive_in_place_reads_erases_and_gc_deletes_the_originals(
    s3: Any, bucket: str, tmp_path: pathlib.Path, writer: str, capsys: Any
) -> None:
    from lethe.cli import main

    rows = hive_lake(s3, bucket, tmp_path, writer)
    originals = raw_keys(s3, bucket)
    assert len(originals) == 3
    uri, src = f"s3://{bucket}/tables/events", f"s3://{bucket}/raw/events/"
    before = {k: s3.head_object(Bucket=bucket, Key=k)["ETag"] for k in originals}
    code = main(
        ["adopt", uri, src, "--partitioning", "hive", "--key", "id", "--index", "customer_id",
         "--partition-type", "dt=date", "--json"]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == 3 and out["rows"] == rows and out["data_bytes_written"] == 0
    t = lethe.Table.open(uri)
    assert not list(S3Store(bucket).list("tables/events/data/"))  # no data byte written
    # in place: the manifest names the originals, nothing was copied under the table
    assert sorted(f.path for f in t.manifest.files) == [f"s3://{bucket}/{k}" for k in originals]
    assert t.schema.field("dt").type == pa.date32()
    assert t.indexes == ("customer_id",)
    report = verify(t, deep=True)  # files, footers and the index over the adopted files
    assert report.ok, report.problems
    assert report.files_checked == 3 and report.index_entries_checked == rows
    got = t.scan()
    assert got.num_rows == rows
    assert sorted(set(got["dt"].to_pylist())) == [date.fromisoformat(d) for d in DAYS]
    one = t.scan(filters=[("dt", "=", date(2026, 1, 2))])
    assert one.num_rows == rows // 3 and set(one["dt"].to_pylist()) == {date(2026, 1, 2)}
    assert {k: s3.head_object(Bucket=bucket, Key=k)["ETag"] for k in originals} == before
    # erase customer 42: the originals are spliced into data/, GC deletes them
    n42 = pc.sum(pc.equal(got["customer_id"], 42)).as_py()
    payloads = [
        p.encode() for p in got.filter(pc.equal(got["customer_id"], 42))["payload"].to_pylist()
    ]
    assert n42 > 0
    res = t.erase([("customer_id", "=", 42)], request_id="ticket-42")
    assert res.rows_deleted == n42 and res.complete
    assert t.scan(filters=[("customer_id", "=", 42)]).num_rows == 0
    assert t.scan().num_rows == rows - n42
    assert all(not f.path.startswith("s3://") for f in t.manifest.files)  # all spliced
    assert set(t.scan()["dt"].to_pylist()) == {date.fromisoformat(d) for d in DAYS}
    collect(t, now=datetime.now(UTC) + timedelta(days=30))
    assert raw_keys(s3, bucket) == []
    assert audit_bucket(s3, bucket, 42, payloads) == []
    receipt = lethe.Table.open(uri).erasure_status("ticket-42")
    assert receipt.state == "complete", receipt
    assert lethe.Table.open(uri).scan().num_rows == rows - n42


def test_adopt_is_idempotent_and_refuses_a_changed_file(
    s3: Any, bucket: str, tmp_path: Any
) -> None:
    hive_lake(s3, bucket, tmp_path, "pyarrow")
    uri, src = f"s3://{bucket}/tables/events", f"s3://{bucket}/raw/events/"
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table)
    v = t.version
    again = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(again, lethe.Table) and again.version == v  # nothing new: no commit
    put_parquet(s3, bucket, "raw/events/dt=2026-01-04/part-0.parquet", day_rows(4))
    more = lethe.Table.adopt(uri, src)
    assert isinstance(more, lethe.Table)
    assert more.version == v + 1 and len(more.manifest.files) == 4
    assert more.history()[0].operation == "adopt"
    put_parquet(s3, bucket, "raw/events/dt=2026-01-01/part-0.parquet", day_rows(7))
    with pytest.raises(errors.InvalidRequest, match="changed in place"):
        lethe.Table.adopt(uri, src)


def test_adopt_resumes_after_a_crash_between_batches(s3: Any, bucket: str) -> None:
    for i in range(6):
        put_parquet(s3, bucket, f"raw/ev/dt=2026-02-0{i + 1}/a.parquet", day_rows(i, 10))
    uri, src = f"s3://{bucket}/tables/ev", f"s3://{bucket}/raw/ev/"
    client = S3Store(bucket).client
    lethe.Table.create(
        uri, day_rows(0, 1).schema.append(pa.field("dt", pa.string())), key="id", s3=client
    )
    heads: list[str] = []

    def crash_after_first_commit(op: str, params: dict[str, Any]) -> None:
        if heads:  # the first batch's commit landed: the process dies before the next one
            raise InjectedFault("killed between batches")
        if str(params.get("url_path", "")).endswith("/_latest_manifest"):
            heads.append("head")

    with (
        on_request(client, ("PutObject",), crash_after_first_commit),
        pytest.raises((errors.LetheError, InjectedFault)),
    ):
        lethe.Table.adopt(uri, src, batch_files=2, s3=client)
    t = lethe.Table.open(uri, s3=client)
    assert len(t.manifest.files) == 2 and t.history()[0].operation == "adopt"
    t2 = lethe.Table.adopt(uri, src, batch_files=2, s3=client)  # resume: only the rest
    assert isinstance(t2, lethe.Table)
    assert len(t2.manifest.files) == 6 and t2.scan().num_rows == 60
    assert [h.operation for h in t2.history()[:3]] == ["adopt", "adopt", "adopt"]
    assert t2.version == t.version + 2


def test_adopt_without_ownership_reads_and_deletes_but_refuses_erase(
    s3: Any, bucket: str, tmp_path: Any
) -> None:
    rows = hive_lake(s3, bucket, tmp_path, "pyarrow")
    uri = f"s3://{bucket}/tables/ro"
    t = lethe.Table.adopt(uri, f"s3://{bucket}/raw/events/", key="id", take_ownership=False)
    assert isinstance(t, lethe.Table)
    assert all(f.owned is False for f in t.manifest.files)
    d = t.delete([("customer_id", "=", 7)])
    assert d.rows_deleted > 0 and t.scan().num_rows == rows - d.rows_deleted
    with pytest.raises(errors.InvalidRequest, match="take_ownership=False"):
        t.erase([("customer_id", "=", 42)])
    with pytest.raises(errors.InvalidRequest, match="does not own"):
        t.purge()
    assert len(raw_keys(s3, bucket)) == 3


def test_mixed_schemas_are_refused_naming_files_and_columns(s3: Any, bucket: str) -> None:
    put_parquet(s3, bucket, "raw/m/dt=1/a.parquet", day_rows(0, 5))
    bad = day_rows(1, 5).set_column(2, "customer_id", pa.array(["x"] * 5))
    put_parquet(s3, bucket, "raw/m/dt=2/b.parquet", bad)
    with pytest.raises(errors.SchemaMismatch) as ei:
        lethe.Table.adopt(f"s3://{bucket}/tables/m", f"s3://{bucket}/raw/m/", key="id")
    msg = str(ei.value)
    assert "customer_id" in msg and "dt=2/b.parquet" in msg and "dt=1/a.parquet" in msg
    assert not list(S3Store(bucket).list("tables/m/"))  # nothing created


def test_dry_run_reports_erasure_readiness_per_file(s3: Any, bucket: str, capsys: Any) -> None:
    put_parquet(s3, bucket, "raw/r/dt=1/a.parquet", day_rows(0), write_page_index=True)
    put_parquet(s3, bucket, "raw/r/dt=2/b.parquet", day_rows(1), write_page_index=False)
    store = S3Store(bucket)
    plan = lethe.Table.adopt(
        f"s3://{bucket}/tables/r", f"s3://{bucket}/raw/r/", key="id", dry_run=True,
        s3=store.client, partition_types={"dt": pa.int32()},
    )  # fmt: skip
    assert isinstance(plan, lethe.AdoptPlan)
    by = {f.uri.rsplit("/", 2)[1]: f for f in plan.files}
    assert by["dt=1"].page_index and by["dt=1"].action == "page-level splice"
    assert not by["dt=2"].page_index and by["dt=2"].needs_rewrite
    assert by["dt=1"].partition == {"dt": 1}
    doc = json.loads(plan.to_json())
    assert doc["unready"] == [by["dt=2"].uri] and doc["rows"] == 120
    assert "dt int32 (partition)" in plan.describe()
    # only the footers were read, nothing written
    io = store.stats.snapshot()
    assert io.count("put") == 0 and io.bytes_uploaded == 0
    assert io.bytes_downloaded <= 1.1 * plan.footer_bytes
    assert not list(store.list("tables/r/"))
    # the same plan from the command line, as JSON
    from lethe.cli import main

    capsys.readouterr()
    src = f"s3://{bucket}/raw/r/"
    assert (
        main(["adopt", f"s3://{bucket}/tables/r", src, "--key", "id", "--dry-run", "--json"]) == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert cli["unready"] == doc["unready"] and len(cli["files"]) == 2
    assert main(["adopt", f"s3://{bucket}/tables/r", src, "--key", "id", "--dry-run"]) == 0
    assert "needs one rewrite first" not in capsys.readouterr().out  # pyarrow's codecs splice
    assert not list(store.list("tables/r/"))


def test_hive_paths() -> None:
    assert hive_values("raw/", "raw/a=x%2Fy/b=__HIVE_DEFAULT_PARTITION__/f.parquet") == {
        "a": "x/y",
        "b": None,
    }
    assert is_data_object("dt=1/part-0.parquet") and is_data_object("part-00000")
    assert not is_data_object("_SUCCESS") and not is_data_object("_delta_log/0.json")
    assert not is_data_object("dt=1/.part-0.parquet.crc")


def test_unknown_formats_are_clear(s3: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/t/{uuid.uuid4().hex}"
    with pytest.raises(errors.InvalidRequest, match="unknown source_format"):
        lethe.Table.adopt(uri, f"s3://{bucket}/x/", key="id", source_format="orc")  # type: ignore[arg-type]
    with pytest.raises(errors.NotFound):  # auto: an Iceberg metadata file, which is not there
        lethe.Table.adopt(uri, f"s3://{bucket}/x/v1.metadata.json", key="id")


def test_rewrite_unready_rewrites_only_the_marked_files_and_gc_deletes_the_originals(
    s3: Any, bucket: str, capsys: Any
) -> None:
    from lethe.cli import main

    put_parquet(s3, bucket, "raw/u/dt=2026-01-01/a.parquet", day_rows(0), write_page_index=True)
    put_parquet(s3, bucket, "raw/u/dt=2026-01-02/b.parquet", day_rows(1), write_page_index=False)
    uri = f"s3://{bucket}/tables/u"
    args = ["adopt", uri, f"s3://{bucket}/raw/u/", "--key", "id", "--partition-type", "dt=date"]
    assert main([*args, "--rewrite-unready", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rewritten"] == 1
    t = lethe.Table.open(uri)
    paths = sorted(f.path for f in t.manifest.files)
    assert paths[0].startswith("data/") and paths[1].endswith("dt=2026-01-01/a.parquet")
    new = t.manifest.file(paths[0])
    assert new is not None and new.partition == {"dt": 20455} and new.owned is None
    body = S3Store(bucket).get(t.key_of(new.path)).body
    md = pq.read_metadata(pa.BufferReader(body))
    assert "dt" not in md.schema.names  # the partition value stays in the manifest
    assert md.row_group(0).column(0).has_offset_index
    got = t.scan()
    assert got.num_rows == 120
    assert set(got["dt"].to_pylist()) == {date(2026, 1, 1), date(2026, 1, 2)}
    # the replaced original goes once no kept version references it (retention 1 version)
    collect(t, retention="1v", now=datetime.now(UTC) + timedelta(days=30))
    assert raw_keys(s3, bucket) == ["raw/u/dt=2026-01-01/a.parquet"]
    assert lethe.Table.open(uri).scan().num_rows == 120


@pytest.mark.parametrize("format_version", [2, 3])
def test_iceberg_view_has_an_identity_spec_and_pyiceberg_reads_dt(
    aws: Any, s3: Any, bucket: str, tmp_path: Any, format_version: int
) -> None:
    from pyiceberg.expressions import EqualTo

    from lethe.iceberg import publish

    rows = hive_lake(s3, bucket, tmp_path, "pyarrow")
    uri = f"s3://{bucket}/tables/ice"
    t = lethe.Table.adopt(
        uri, f"s3://{bucket}/raw/events/", key="id", partition_types={"dt": pa.date32()}
    )
    assert isinstance(t, lethe.Table)
    t.delete([("customer_id", "=", 7)])  # a DV on adopted files: the view must keep it
    r = publish(t.catalog, t.manifest, format_version=format_version)  # type: ignore[arg-type]
    st = iceberg_view(aws, r.uri)
    spec = st.spec()
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("dt", "identity")]
    got = st.scan().to_arrow()
    want = t.scan()
    assert (
        got.num_rows
        == want.num_rows
        == rows - pc.sum(pc.equal(day_rows(0)["customer_id"], 7)).as_py() * 3
    )
    assert sorted(set(got["dt"].to_pylist())) == [date.fromisoformat(d) for d in DAYS]
    assert sorted(zip(got["id"].to_pylist(), got["dt"].to_pylist(), strict=True)) == sorted(
        zip(want["id"].to_pylist(), want["dt"].to_pylist(), strict=True)
    )
    one = st.scan(row_filter=EqualTo("dt", "2026-01-02"))
    assert len(list(one.plan_files())) == 1  # pruned by the partition tuple
    assert set(one.to_arrow()["dt"].to_pylist()) == {date(2026, 1, 2)}


def test_union_schema_reads_missing_columns_as_null(s3: Any, bucket: str) -> None:
    put_parquet(s3, bucket, "raw/w/dt=1/a.parquet", day_rows(0, 5))
    wide = day_rows(1, 5).append_column("country", pa.array(["PT"] * 5))
    put_parquet(s3, bucket, "raw/w/dt=2/b.parquet", wide)
    t = lethe.Table.adopt(f"s3://{bucket}/tables/w", f"s3://{bucket}/raw/w/", key="id")
    assert isinstance(t, lethe.Table)
    assert t.schema.names == ["id", "event_time", "customer_id", "payload", "country", "dt"]
    got = t.scan().sort_by("id")
    assert got["country"].to_pylist() == [None] * 5 + ["PT"] * 5
    assert got["dt"].to_pylist() == ["1"] * 5 + ["2"] * 5
    assert t.scan(filters=[("country", "=", "PT")]).num_rows == 5
    assert t.scan(filters=[("dt", "=", "1")]).num_rows == 5


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
            st.one_of(st.none(), st.text(min_size=1, max_size=12)),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda kv: kv[0],
    )
)
def test_hive_directories_round_trip(parts: list[tuple[str, str | None]]) -> None:
    """Whatever the values (slashes, '=', unicode, null), the escaped directories decode to them."""
    from urllib.parse import quote

    from lethe.adopt.hive import HIVE_NULL

    dirs = "/".join(f"{k}={HIVE_NULL if v is None else quote(v, safe='')}" for k, v in parts)
    assert hive_values("raw/x", f"raw/x/{dirs}/part-0.parquet") == dict(parts)


def test_a_given_schema_types_the_partition_columns(s3: Any, bucket: str) -> None:
    put_parquet(s3, bucket, "raw/g/dt=2026-01-01/hour=7/a.parquet", day_rows(0, 5))
    schema = (
        day_rows(0, 1)
        .schema.append(pa.field("dt", pa.date32()))
        .append(pa.field("hour", pa.int32()))
    )
    t = lethe.Table.adopt(
        f"s3://{bucket}/tables/g", f"s3://{bucket}/raw/g/", key="id", schema=schema
    )
    assert isinstance(t, lethe.Table)
    assert t.schema.field("dt").type == pa.date32() and t.schema.field("hour").type == pa.int32()
    got = t.scan(filters=[("hour", "=", 7)])
    assert got.num_rows == 5 and set(got["dt"].to_pylist()) == {date(2026, 1, 1)}
    assert t.scan(filters=[("hour", "=", 8)]).num_rows == 0
    with pytest.raises(errors.SchemaMismatch, match="payload"):
        lethe.Table.adopt(
            f"s3://{bucket}/tables/g2",
            f"s3://{bucket}/raw/g/",
            key="id",
            schema=pa.schema([f for f in schema if f.name != "payload"]),
        )


def test_rows_a_source_deleted_become_dvs_in_the_adopting_commit(s3: Any, bucket: str) -> None:
    """A source's deleted positions (Iceberg position deletes, Delta DVs) stay deleted: the
    adopting commit carries them as Lethe DVs (read back, and in the Iceberg view)."""
    from lethe.adopt.batch import commit_batch
    from lethe.adopt.footers import read_footers
    from lethe.adopt.source import SourceFile

    put_parquet(s3, bucket, "raw/d/a.parquet", day_rows(0, 10))
    uri = f"s3://{bucket}/tables/d"
    t = lethe.Table.create(uri, day_rows(0, 1).schema, key="id")
    store = S3Store(bucket)
    head = store.head("raw/d/a.parquet")
    sf = SourceFile(f"s3://{bucket}/raw/d/a.parquet", head.size, head.etag, {}, (0, 3, 9))
    done = commit_batch(t.context, read_footers(t.store, [sf]), fmt="iceberg", own=True)
    assert t.refresh().version == done.snapshot.version  # the table at the commit
    f = t.manifest.files[0]
    assert f.dv is not None and f.dv.cardinality == 3 and t.version == 1
    assert t.history()[0].operation == "adopt" and t.history()[0].rows_deleted == 3
    got = sorted(t.scan()["id"].to_pylist())
    assert got == [i for i in range(10) if i not in (0, 3, 9)]


def test_delete_and_erase_by_a_partition_column(s3: Any, bucket: str, tmp_path: Any) -> None:
    rows = hive_lake(s3, bucket, tmp_path, "pyarrow")
    uri = f"s3://{bucket}/tables/p"
    t = lethe.Table.adopt(
        uri, f"s3://{bucket}/raw/events/", key="id", partition_types={"dt": pa.date32()}
    )
    assert isinstance(t, lethe.Table)
    d = t.delete([("dt", "=", date(2026, 1, 1))])
    assert d.rows_deleted == rows // 3 and d.files_touched == 1  # pruned by the partition stats
    e = t.erase([("dt", "=", date(2026, 1, 2))])
    assert e.rows_deleted == rows // 3 and e.files_removed == 1  # the whole file goes
    assert set(t.scan()["dt"].to_pylist()) == {date(2026, 1, 3)}
    collect(t, now=datetime.now(UTC) + timedelta(days=30))
    assert raw_keys(s3, bucket) == [
        "raw/events/dt=2026-01-01/part-0.parquet",  # only hidden by a DV (delete, not erase)
        "raw/events/dt=2026-01-03/part-0.parquet",
    ]


def test_adopting_into_a_table_merges_new_columns_and_refuses_other_types(
    s3: Any, bucket: str
) -> None:
    uri = f"s3://{bucket}/tables/x"
    t = lethe.Table.create(uri, day_rows(0, 1).schema, key="id")
    t.append(day_rows(0, 5))
    wide = day_rows(1, 5).append_column("country", pa.array(["PT"] * 5))
    put_parquet(s3, bucket, "raw/x/a.parquet", wide)
    got = lethe.Table.adopt(uri, f"s3://{bucket}/raw/x/", partitioning=None)
    assert isinstance(got, lethe.Table)
    assert got.schema.names[-1] == "country"
    # issue 38 item 4: the new column and the batch that brings it are one version
    assert [h.operation for h in got.history()[:2]] == ["adopt", "append"]
    assert got.version == t.version + 1 and got.manifest.operation.params["schema_add"] == 1
    rows = got.scan().sort_by("id")
    assert rows["country"].to_pylist() == [None] * 5 + ["PT"] * 5
    bad = day_rows(2, 5).set_column(2, "customer_id", pa.array(["x"] * 5))
    put_parquet(s3, bucket, "raw/y/b.parquet", bad)
    with pytest.raises(errors.SchemaMismatch, match=r"customer_id.*raw/y/b.parquet"):
        lethe.Table.adopt(uri, f"s3://{bucket}/raw/y/", partitioning=None)
