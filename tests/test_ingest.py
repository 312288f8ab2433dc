"""lethe.ingest without Spark: row validation with rejects, raw readers on moto's server,
direct registration of foreign Parquet files."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from lethe import errors
from lethe.audit.verify import verify
from lethe.ingest import (
    InputObject,
    conform,
    detect_format,
    ingest_request_id,
    list_inputs,
    read_object,
    register_parquet,
)
from lethe.storage.store import S3Store


def put(s3: Any, bucket: str, key: str, body: bytes) -> InputObject:
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    h = s3.head_object(Bucket=bucket, Key=key)
    fmt = detect_format(key)
    assert fmt is not None
    return InputObject(bucket, key, int(h["ContentLength"]), h["ETag"], fmt)


def read_all(bucket: str, obj: InputObject) -> tuple[pa.Table, pa.Table]:
    parts = list(read_object(S3Store(bucket), obj, EVENTS))
    good = pa.concat_tables([p.good for p in parts])
    rejects = pa.concat_tables([p.rejects for p in parts])
    return good, rejects


def parquet_bytes(t: pa.Table, **kw: Any) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf, **kw)
    return buf.getvalue()


# --- conform ---------------------------------------------------------------------------------------
def test_conform_converts_and_rejects_row_by_row() -> None:
    raw = pa.table(
        {
            "id": ["1", "2", "x", None, "5", "6"],
            "event_time": [
                "2024-01-01T00:00:00Z",
                "2024-01-01 10:00:00",  # no offset: read as UTC
                "2024-01-01T00:00:00+02:00",
                None,
                "yesterday",
                None,
            ],
            "customer_id": ["7", "8", "9", "10", "11", "99999999999"],
            "bogus": [None, None, None, None, None, None],
        }
    )
    out = conform(raw, EVENTS, source="s3://b/in.csv", first_row=100)
    assert out.good.schema == EVENTS
    assert out.good.column("id").to_pylist() == [1, 2]
    assert out.good.column("payload").null_count == 2  # a missing nullable column: nulls
    ts = out.good.column("event_time").to_pylist()
    assert [t.isoformat() for t in ts] == ["2024-01-01T00:00:00+00:00", "2024-01-01T10:00:00+00:00"]
    rej = {r["row"]: r for r in out.rejects.to_pylist()}
    assert sorted(rej) == [102, 103, 104, 105]
    assert rej[102]["reason"].startswith("column 'id': cannot convert 'x' to int64")
    assert rej[103]["reason"] == "column 'id': required but missing"
    assert "'event_time'" in rej[104]["reason"] and "yesterday" in rej[104]["reason"]
    assert "'customer_id'" in rej[105]["reason"] and "99999999999" in rej[105]["reason"]
    assert json.loads(rej[104]["record"])["id"] == "5"
    assert {r["source"] for r in rej.values()} == {"s3://b/in.csv"}


def test_conform_rejects_values_in_unknown_columns_only_where_present() -> None:
    raw = pa.table({"id": [1, 2, 3], "extra": [None, "x", None]})
    out = conform(raw, EVENTS, source="s")
    assert out.good.column("id").to_pylist() == [1, 3]
    assert out.rejects.column("reason").to_pylist() == [
        "unknown column 'extra' (not in the table schema)"
    ]


def test_conform_missing_required_column_rejects_every_row() -> None:
    out = conform(pa.table({"payload": ["a", "b"]}), EVENTS, source="s")
    assert out.good.num_rows == 0 and out.rejects.num_rows == 2


# --- raw readers ---------------------------------------------------------------------------------
def test_csv_with_malformed_rows(s3: Any, bucket: str) -> None:
    body = (
        b"id,event_time,customer_id,payload\n"
        b"1,2024-01-01T00:00:00Z,3,hello\n"
        b"2,2024-01-01T00:00:01Z,3\n"  # a field short
        b'x,2024-01-01T00:00:02Z,3,"bad id"\n'
        b"4,2024-01-01T00:00:03Z,,\n"  # empty nullable fields: nulls
        b',2024-01-01T00:00:04Z,3,"no id"\n'
        b'5,2024-01-01T00:00:05Z,3,"with, comma"\n'
    )
    obj = put(s3, bucket, "incoming/a.csv", body)
    good, rej = read_all(bucket, obj)
    assert good.column("id").to_pylist() == [1, 4, 5]
    assert good.column("payload").to_pylist() == ["hello", None, "with, comma"]
    rows = rej.to_pylist()
    assert len(rows) == 3
    short = next(r for r in rows if r["row"] is None)
    assert short["line"] == 3 and "expected 4 fields, found 3" in short["reason"]
    assert short["record"] == "2,2024-01-01T00:00:01Z,3"
    reasons = sorted(r["reason"][:30] for r in rows if r["row"] is not None)
    assert reasons == ["column 'id': cannot convert 'x", "column 'id': required but miss"]


def test_gzipped_csv_and_json_lines(s3: Any, bucket: str) -> None:
    csv_buf = io.BytesIO()
    pcsv.write_csv(events(0, 5000), csv_buf)
    obj = put(s3, bucket, "incoming/e.csv.gz", gzip.compress(csv_buf.getvalue()))
    good, rej = read_all(bucket, obj)
    assert rej.num_rows == 0 and good.equals(events(0, 5000))
    lines = "".join(
        json.dumps({**r, "event_time": r["event_time"].isoformat()}) + "\n"
        for r in events(0, 3000).to_pylist()
    )
    obj = put(s3, bucket, "incoming/e.jsonl.gz", gzip.compress(lines.encode()))
    good, rej = read_all(bucket, obj)
    assert rej.num_rows == 0 and good.equals(events(0, 3000))


def test_json_lines_bad_lines_get_their_own_reasons(s3: Any, bucket: str) -> None:
    lines = [
        '{"id": 1, "payload": "a"}',
        '{"id": 2, "payload": 17}',  # wrong type: the fast reader gives up on the chunk
        "",
        "not json",
        "[1, 2]",
        '{"id": 3, "payload": "c", "surprise": true}',
        '{"id": 4, "event_time": "2024-02-02T00:00:00Z"}',
        '{"payload": "no id"}',
    ]
    obj = put(s3, bucket, "incoming/x.json", ("\n".join(lines) + "\n").encode())
    good, rej = read_all(bucket, obj)
    assert good.column("id").to_pylist() == [1, 4]
    by_line = {r["line"]: r for r in rej.to_pylist()}
    assert sorted(by_line) == [2, 4, 5, 6, 8]
    assert "'payload'" in by_line[2]["reason"] and "17" in by_line[2]["reason"]
    assert by_line[4]["reason"].startswith("not valid JSON")
    assert by_line[5]["reason"] == "a JSON line must hold an object, not list"
    assert by_line[6]["reason"] == "unknown column 'surprise' (not in the table schema)"
    assert by_line[8]["reason"] == "column 'id': required but missing"
    assert by_line[4]["record"] == "not json"


def test_clean_json_lines_take_the_fast_path_with_exact_line_numbers(s3: Any, bucket: str) -> None:
    lines = [json.dumps({"id": i, "customer_id": i % 7}) for i in range(1000)]
    lines[500] = json.dumps({"id": 500, "customer_id": 2**40})  # converts, but not to int32
    obj = put(s3, bucket, "incoming/y.ndjson", "\n".join(lines).encode())  # no final newline
    good, rej = read_all(bucket, obj)
    assert good.num_rows == 999
    (r,) = rej.to_pylist()
    assert (r["row"], r["line"]) == (500, 501) and "'customer_id'" in r["reason"]
    assert json.loads(r["record"]) == {"id": 500, "customer_id": 2**40}


def test_parquet_upload_with_other_but_convertible_types(s3: Any, bucket: str) -> None:
    t = events(0, 1000)
    other = t.cast(
        pa.schema(
            [
                pa.field("id", pa.int32()),  # narrower and nullable
                ("event_time", pa.timestamp("ms", tz="UTC")),
                ("customer_id", pa.int64()),
                ("payload", pa.large_string()),
            ]
        )
    )
    ids = other.column("id").to_pylist()
    ids[10] = None
    other = other.set_column(0, "id", pa.array(ids, pa.int32()))
    obj = put(s3, bucket, "incoming/p.parquet", parquet_bytes(other))
    good, rej = read_all(bucket, obj)
    assert good.num_rows == 999 and rej.column("row").to_pylist() == [10]
    assert good.equals(pa.concat_tables([t.slice(0, 10), t.slice(11)]).combine_chunks())


def test_list_inputs_and_request_ids(s3: Any, bucket: str) -> None:
    for k in ("in/a.csv", "in/b.jsonl", "in/c.parquet", "in/_SUCCESS", "in/.hidden"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    s3.put_object(Bucket=bucket, Key="in/empty.csv", Body=b"")
    objs = list_inputs(f"s3://{bucket}/in")
    assert [(o.key, o.format) for o in objs] == [
        ("in/a.csv", "csv"),
        ("in/b.jsonl", "json"),
        ("in/c.parquet", "parquet"),
    ]
    assert [o.key for o in list_inputs(f"s3://{bucket}/in/a.csv")] == ["in/a.csv"]
    assert len(list_inputs(f"s3://{bucket}/in/", fmt="csv")) == 3
    one = ingest_request_id(objs[:1])
    assert one == f"s3://{bucket}/in/a.csv#{objs[0].etag.strip(chr(34))}"
    assert ingest_request_id(objs) == ingest_request_id(list(reversed(objs)))
    s3.put_object(Bucket=bucket, Key="in/d.txt", Body=b"x")
    with pytest.raises(errors.InvalidRequest, match="--format"):
        list_inputs(f"s3://{bucket}/in")


# --- direct registration -------------------------------------------------------------------------
def upload(s3: Any, bucket: str, key: str, body: bytes) -> str:
    return str(s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"])


def test_register_parquet_once_and_read_it_back(s3: Any, bucket: str, table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    data = events(0, 5000)
    etag = upload(
        s3,
        bucket,
        "incoming/ok.parquet",
        parquet_bytes(data, row_group_size=1000, sorting_columns=[pq.SortingColumn(0)]),
    )
    r = register_parquet(t, "incoming/ok.parquet", etag=etag.strip('"'), size=None)
    assert (r.version, r.duplicate, r.rows, r.row_groups) == (1, False, 5000, 5)
    f = t.manifest.files[0]
    assert f.path == r.path and f.path.startswith("data/") and f.sorted_by_key
    assert f.columns["id"].min == 0 and f.row_groups[1].key_min == 1000
    assert t.scan().equals(data)
    assert t.lookup(4321).column("payload").to_pylist() == ["payload-4321"]
    again = register_parquet(t, "incoming/ok.parquet", etag=etag)
    assert again.duplicate and again.version == 1
    assert lethe.Table.open(table_uri).version == 1
    assert t.history()[0].operation == "register"
    assert verify(t).ok


def test_register_refuses_a_wrong_schema_and_leaves_the_table_alone(
    s3: Any, bucket: str, table_uri: str
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    bad = events(0, 10).drop_columns(["payload"]).append_column("extra", pa.array(["x"] * 10))
    bad = bad.set_column(2, "customer_id", pa.array([1.5] * 10))
    upload(s3, bucket, "incoming/bad.parquet", parquet_bytes(bad))
    with pytest.raises(errors.SchemaMismatch) as e:
        register_parquet(t, "incoming/bad.parquet")
    msg = str(e.value)
    assert "missing columns ['payload']" in msg and "unknown columns ['extra']" in msg
    assert "column 'customer_id' is double, the table has int32" in msg
    assert lethe.Table.open(table_uri).version == 0
    assert not list(t.store.list(t.key_of("data/")))
    # nullable where the table requires values, with a null: refused; without nulls: fine
    nullable = events(0, 3).cast(
        pa.schema([pa.field(f.name, f.type, nullable=True) for f in EVENTS])
    )
    ids = pa.array([1, None, 3], pa.int64())
    upload(s3, bucket, "incoming/nulls.parquet", parquet_bytes(nullable.set_column(0, "id", ids)))
    with pytest.raises(errors.SchemaMismatch, match="required by the table"):
        register_parquet(t, "incoming/nulls.parquet")
    upload(s3, bucket, "incoming/nonulls.parquet", parquet_bytes(nullable))
    assert register_parquet(t, "incoming/nonulls.parquet").rows == 3
    upload(s3, bucket, "incoming/not.parquet", b"hello world, not parquet")
    with pytest.raises(errors.UnsupportedFile):
        register_parquet(t, "incoming/not.parquet")


def test_register_foreign_parquet_from_duckdb_and_polars(
    s3: Any, bucket: str, table_uri: str, tmp_path: Any
) -> None:
    import duckdb
    import polars as pl

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    data = events(0, 2000)
    p1 = tmp_path / "duck.parquet"
    con = duckdb.connect()
    con.register("src", data.slice(0, 1000))
    con.execute(f"COPY (SELECT * FROM src ORDER BY id) TO '{p1}' (FORMAT PARQUET)")
    con.close()
    p2 = tmp_path / "polars.parquet"
    pl.from_arrow(data.slice(1000)).write_parquet(p2)
    for name, p in (("duck", p1), ("polars", p2)):
        upload(s3, bucket, f"incoming/{name}.parquet", p.read_bytes())
        r = register_parquet(t, f"incoming/{name}.parquet")
        assert not r.duplicate and r.rows == 1000, name
    got = t.scan().sort_by("id")
    assert got.equals(data)
    assert t.lookup(1500).num_rows == 1
    assert verify(t).ok


def test_library_entry_points_take_a_context_and_leave_the_handle(
    s3: Any, bucket: str, table_uri: str
) -> None:
    """Issue 38 item 2: registration and verify take a table's context (the façade is no
    longer imported below it): given one, they return what they committed and move no
    handle; given a :class:`lethe.Table`, the handle follows as it always did."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    etag = upload(s3, bucket, "incoming/ctx.parquet", parquet_bytes(events(0, 100)))
    r = register_parquet(t.context, "incoming/ctx.parquet", etag=etag, size=None)
    assert (r.version, r.rows, t.version) == (1, 100, 0)  # the handle stays where it was
    assert verify(t.context).version == 0 and verify(t.refresh().context).files_checked == 1
    etag = upload(s3, bucket, "incoming/ctx2.parquet", parquet_bytes(events(100, 10)))
    assert register_parquet(t, "incoming/ctx2.parquet", etag=etag).version == t.version == 2
