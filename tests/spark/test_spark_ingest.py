"""The Spark ingest job on local Spark against moto's server."""

from __future__ import annotations

import io
import itertools
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, SPARK_MARKS, events

import lethe
from lethe.audit.verify import verify
from lethe.ingest import register_parquet
from spark_jobs._session import LOCAL_JAVA_OPTIONS
from spark_jobs.ingest import run_ingest

pytestmark = SPARK_MARKS

TARGET = 3_000_000
ROW_GROUP = 400_000


def parquet_bytes(t: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


def json_lines(t: pa.Table) -> bytes:
    return "".join(
        json.dumps({**r, "event_time": r["event_time"].isoformat()}) + "\n" for r in t.to_pylist()
    ).encode()


def csv_bytes(t: pa.Table) -> bytes:
    buf = io.BytesIO()
    pcsv.write_csv(t, buf)
    return buf.getvalue()


def test_ingest_a_million_rows_sorted_into_target_sized_files(
    spark: Any, s3: Any, bucket: str, table_uri: str
) -> None:
    n = 1_000_000
    data = events(0, n).take(np.random.default_rng(7).permutation(n))  # keys shuffled
    q = n // 4
    uploads = {
        "incoming/batch/a.parquet": parquet_bytes(data.slice(0, q)),
        "incoming/batch/b.parquet": parquet_bytes(data.slice(q, q)),
        "incoming/batch/c.csv": csv_bytes(data.slice(2 * q, q)),
        "incoming/batch/d.jsonl": json_lines(data.slice(3 * q, q)),
        "incoming/batch/_SUCCESS": b"",
    }
    for key, body in uploads.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=TARGET, row_group_bytes=ROW_GROUP
    )
    r = run_ingest(table_uri, f"s3://{bucket}/incoming/batch/", spark=spark)
    assert (r.version, r.rows_written, r.rows_rejected, r.objects) == (1, n, 0, 4)

    t.refresh()
    hist = t.history()
    assert [h.version for h in hist] == [1, 0] and hist[0].operation == "append"  # one commit
    assert hist[0].rows_added == n and hist[0].files_added == r.files == len(t.manifest.files)
    files = sorted(t.manifest.files, key=lambda f: f.row_groups[0].key_min)  # type: ignore[arg-type, return-value]
    # key order: within every file, and files cover disjoint ascending key ranges
    assert all(f.sorted_by_key for f in files)
    for a, b in itertools.pairwise(files):
        assert a.columns["id"].max < b.columns["id"].min  # type: ignore[operator]
    ids = t.scan(["id"])["id"].to_numpy()
    assert len(ids) == n and (np.sort(ids) == np.arange(n)).all()
    # sizes near the targets
    sizes = [f.size for f in files]
    assert all(0.5 * TARGET <= s <= 1.6 * TARGET for s in sizes), sizes
    full_groups = [rg.length for f in files for rg in f.row_groups[:-1]]
    assert full_groups and all(0.5 * ROW_GROUP <= g <= 2 * ROW_GROUP for g in full_groups)
    assert 0.7 * ROW_GROUP <= statistics.median(full_groups) <= 1.5 * ROW_GROUP
    assert verify(t).ok
    # the same inputs again: recognised, nothing committed, Spark not even started
    again = run_ingest(table_uri, f"s3://{bucket}/incoming/batch/", spark=spark)
    assert again.duplicate and again.version == 1
    assert lethe.Table.open(table_uri).version == 1


def test_malformed_uploads_produce_rejects_with_reasons(
    spark: Any, s3: Any, bucket: str, table_uri: str
) -> None:
    good = events(0, 2000)
    csv_text = csv_bytes(good.slice(0, 1000)).decode().splitlines()
    csv_text[10] = csv_text[10].replace(",", ";")  # one field where four are expected
    csv_text[20] = "not-a-number" + csv_text[20][csv_text[20].index(",") :]
    s3.put_object(Bucket=bucket, Key="up/x.csv", Body=("\n".join(csv_text) + "\n").encode())
    lines = json_lines(good.slice(1000, 1000)).decode().splitlines()
    lines[5] = "{broken json"
    lines[6] = json.dumps({"id": 1006, "customer_id": "many"})
    lines[7] = json.dumps({"payload": "who am i"})
    s3.put_object(Bucket=bucket, Key="up/y.json", Body=("\n".join(lines) + "\n").encode())
    lethe.Table.create(table_uri, EVENTS, key="id")
    rejects = f"s3://{bucket}/rejects/run-{uuid.uuid4().hex[:6]}"
    r = run_ingest(table_uri, f"s3://{bucket}/up/", spark=spark, rejects_uri=rejects)
    assert (r.rows_read, r.rows_rejected, r.rows_written) == (2000, 5, 1995)
    assert r.rejects_uri == rejects and r.rejects_objects >= 1
    t = lethe.Table.open(table_uri)
    assert t.version == 1 and t.scan().num_rows == 1995
    got: list[dict[str, Any]] = []
    for o in s3.list_objects_v2(Bucket=bucket, Prefix="rejects/")["Contents"]:
        body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode()
        got += [json.loads(x) for x in body.splitlines()]
    by = {(g["source"].rsplit("/", 1)[1], g["line"] or g["row"]): g["reason"] for g in got}
    assert len(got) == 5
    assert by[("x.csv", 11)].startswith("expected 4 fields, found 1")
    # data row 19, but the 18th that parsed (the row of a reject counts parsed rows)
    assert by[("x.csv", 18)].startswith("column 'id': cannot convert 'not-a-number'")
    assert by[("y.json", 6)].startswith("not valid JSON")
    assert by[("y.json", 7)].startswith("column 'customer_id': cannot convert 'many'")
    assert by[("y.json", 8)] == "column 'id': required but missing"
    assert all(g["record"] for g in got)


def test_spark_written_parquet_registers_directly(
    spark: Any, s3: Any, bucket: str, table_uri: str, tmp_path: Any
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    data = events(0, 3000)
    df = spark.createDataFrame(data)
    for name, ts_type in (("micros", "TIMESTAMP_MICROS"), ("int96", "INT96")):
        spark.conf.set("spark.sql.parquet.outputTimestampType", ts_type)
        out = tmp_path / name
        df.coalesce(1).write.parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        s3.put_object(Bucket=bucket, Key=f"incoming/{name}.parquet", Body=part.read_bytes())
    spark.conf.unset("spark.sql.parquet.outputTimestampType")
    res = register_parquet(t, "incoming/micros.parquet")
    assert res.rows == 3000 and not res.duplicate
    assert t.scan().sort_by("id").equals(data)
    with pytest.raises(lethe.errors.SchemaMismatch, match="TIMESTAMP_MICROS"):
        register_parquet(t, "incoming/int96.parquet")
    assert lethe.Table.open(table_uri).version == 1


def test_spark_submit_entry_point(s3: Any, bucket: str, table_uri: str) -> None:
    """``spark-submit spark_jobs/ingest.py ...`` in its own JVM, as on EMR (the script imports
    its helpers from the checkout, workers get this interpreter, S3 is moto's server)."""
    root = Path(__file__).resolve().parents[2]
    lethe.Table.create(table_uri, EVENTS, key="id")
    s3.put_object(Bucket=bucket, Key="drop/e.csv", Body=csv_bytes(events(0, 500)))
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable  # what `make` exports
    cmd = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--driver-java-options",
        LOCAL_JAVA_OPTIONS,
        "spark_jobs/ingest.py",
        "--table",
        table_uri,
        "--input",
        f"s3://{bucket}/drop/e.csv",
        "--format",
        "csv",
        "--json",
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (report["version"], report["rows_written"], report["rows_rejected"]) == (1, 500, 0)
    assert lethe.Table.open(table_uri).scan().equals(events(0, 500))


def test_ingest_into_a_clustered_table_sorts_by_window_and_subject(
    spark: Any, s3: Any, bucket: str, table_uri: str
) -> None:
    from lethe.maintenance.clustering import ClusterSpec, cluster_order

    data = events(0, 20_000, customers=30)  # one event per second: about 6 hourly windows
    s3.put_object(Bucket=bucket, Key="upc/a.parquet", Body=parquet_bytes(data))
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", cluster_by="customer_id", cluster_window="1h"
    )
    r = run_ingest(table_uri, f"s3://{bucket}/upc/", spark=spark)
    assert r.rows_written == 20_000
    t = lethe.Table.open(table_uri)
    spec = ClusterSpec.of(t.manifest.properties)
    assert spec is not None
    for f in t.manifest.files:  # each file in the cluster order (window, then customer)
        body = s3.get_object(Bucket=bucket, Key=t.key_of(f.path))["Body"].read()
        got = pq.read_table(pa.BufferReader(body), columns=["event_time", "customer_id"])
        assert np.array_equal(cluster_order(got, spec), np.arange(got.num_rows))
    assert sorted(t.scan(["id"])["id"].to_pylist()) == list(range(20_000))


def test_ingest_evolves_only_with_evolve_and_otherwise_refuses_every_column(
    spark: Any, s3: Any, bucket: str, table_uri: str
) -> None:
    """A Parquet upload with a new column (``country``) and a widened one (``customer_id``
    int64, values past int32): refused without ``--evolve`` (every input and column named,
    nothing read or written), taken with it (one schema commit, then the append)."""
    from lethe.catalog.schemas import field_id
    from spark_jobs.ingest import main

    new = events(0, 500)
    new = new.set_column(2, "customer_id", pa.array([2**40 + i for i in range(500)], pa.int64()))
    new = new.append_column("country", pa.array(["NL", None] * 250))
    s3.put_object(Bucket=bucket, Key="evolve/a.parquet", Body=parquet_bytes(new))
    s3.put_object(Bucket=bucket, Key="evolve/b.csv", Body=csv_bytes(events(500, 100)))
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    with pytest.raises(lethe.errors.SchemaMismatch) as e:
        run_ingest(table_uri, f"s3://{bucket}/evolve/", spark=spark)
    msg = str(e.value)
    assert "a.parquet" in msg and "unknown columns ['country']" in msg
    assert "column 'customer_id' is int64, the table has int32" in msg and "--evolve" in msg
    assert lethe.Table.open(table_uri).version == 0
    assert main(["--table", table_uri, "--input", f"s3://{bucket}/evolve/", "--evolve"]) == 0
    t = lethe.Table.open(table_uri)
    assert t.version == 2 and [sid for sid, _ in t.schema_history] == [0, 1]
    assert t.schema.field("customer_id").type == pa.int64()
    assert field_id(t.schema.field("country")) == 5
    assert {f.schema_id for f in t.manifest.files} == {1}
    got = sorted(t.scan().to_pylist(), key=lambda r: r["id"])
    assert len(got) == 600
    assert got[1]["customer_id"] == 2**40 + 1 and got[0]["country"] == "NL"
    assert got[550]["customer_id"] == 50 and got[550]["country"] is None  # the CSV rows
    # the files carry field ids (every engine reads the view by id)
    f = t.manifest.files[0]
    body = s3.get_object(Bucket=bucket, Key=f"{t.uri[5:].split('/', 1)[1]}/{f.path}")["Body"]
    ids = [field_id(x) for x in pq.read_schema(io.BytesIO(body.read()))]
    assert ids == [1, 2, 3, 4, 5]
    assert verify(t, deep=True).ok
