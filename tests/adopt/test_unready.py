"""The erasure-readiness report's "needs one rewrite first" branch (issue 28) on a file a
real writer made that the splice refuses: delta-rs (``deltalake`` 1.6, arrow-rs's Parquet
writer) with ``compression="LZ4"`` writes the Hadoop LZ4 codec (codec 5), which the splice
cannot re-encode (pyarrow and DuckDB write ``LZ4_RAW`` instead). The dry run marks that file
only, ``--rewrite-unready`` rewrites only it, and an erasure then removes a person from both
files (GC, then a byte audit of the bucket)."""

from __future__ import annotations

import json
import pathlib
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import WriterProperties, write_deltalake
from test_adopt import audit_bucket, day_rows, put_parquet, raw_keys

import lethe
from lethe.adopt.footers import readiness
from lethe.cli import main
from lethe.gc import collect


def _lz4_file(tmp_path: pathlib.Path, t: pa.Table) -> bytes:
    out = tmp_path / "lz4"
    write_deltalake(str(out), t, writer_properties=WriterProperties(compression="LZ4"))
    (path,) = out.glob("*.parquet")
    return path.read_bytes()


def test_a_file_the_splice_refuses_needs_one_rewrite_then_erases(
    s3: Any, bucket: str, tmp_path: pathlib.Path, capsys: Any
) -> None:
    body = _lz4_file(tmp_path, day_rows(1))
    refused = readiness(body, len(body)).refused
    assert refused and all("codec LZ4" in r for r in refused)
    s3.put_object(Bucket=bucket, Key="raw/z/dt=2026-01-02/part-0.parquet", Body=body)
    put_parquet(
        s3,
        bucket,
        "raw/z/dt=2026-01-01/a.parquet",
        day_rows(0),
        compression="none",
        write_page_index=True,
    )
    uri, src = f"s3://{bucket}/tables/z", f"s3://{bucket}/raw/z/"
    args = ["adopt", uri, src, "--key", "id", "--partition-type", "dt=date"]
    assert main([*args, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "needs one rewrite first (column id: codec LZ4" in text
    assert main([*args, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["unready"] == [f"{src}dt=2026-01-02/part-0.parquet"]
    actions = {f["uri"].rsplit("/", 2)[1]: f["action"] for f in plan["files"]}
    assert actions == {
        "dt=2026-01-01": "page-level splice",
        "dt=2026-01-02": "needs one rewrite first",
    }
    assert main([*args, "--rewrite-unready", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rewritten"] == 1
    t = lethe.Table.open(uri)
    new = next(f for f in t.manifest.files if f.path.startswith("data/"))
    assert new.partition == {"dt": 20455}
    md = pq.read_metadata(
        pa.BufferReader(s3.get_object(Bucket=bucket, Key=t.key_of(new.path))["Body"].read())
    )
    assert md.row_group(0).column(0).compression != "LZ4"
    got = t.scan()
    whole = pa.concat_tables([day_rows(0), day_rows(1)])
    assert sorted(got["id"].to_pylist()) == sorted(whole["id"].to_pylist())
    assert set(got["dt"].to_pylist()) == {date(2026, 1, 1), date(2026, 1, 2)}
    gone = pc.equal(whole["customer_id"], 42)
    payloads = [p.encode() for p in whole.filter(gone)["payload"].to_pylist()]
    res = t.erase([("customer_id", "=", 42)], request_id="t-42")
    assert res.rows_deleted == len(payloads) > 0 and res.complete
    collect(t, now=datetime.now(UTC) + timedelta(days=30))
    assert raw_keys(s3, bucket) == []
    assert audit_bucket(s3, bucket, 42, payloads) == []
    assert lethe.Table.open(uri).scan().num_rows == whole.num_rows - len(payloads)
