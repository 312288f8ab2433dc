"""``lethe adopt`` checks the whole plan before its first write (issue 36, item 6 and the
``--partition-type`` traceback): unknown ``--key``/``--index`` columns are refused, in a dry run
and a real one, naming the known columns; a failed adoption leaves nothing behind, so running
it again with corrected arguments works."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import events
from faults import InjectedFault, on_request

import lethe
from lethe.cli import main


def _hive(s3: Any, bucket: str) -> str:
    for i, day in enumerate(("2026-01-01", "2026-01-02")):
        buf = io.BytesIO()
        pq.write_table(events(i * 100, 100, customers=20), buf)
        s3.put_object(Bucket=bucket, Key=f"raw/ev/dt={day}/part-0.parquet", Body=buf.getvalue())
    return f"s3://{bucket}/raw/ev/"


def _all_keys(s3: Any, bucket: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", ()))


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    ("bad", "named"),
    [(["--key", "idd"], "'idd'"), (["--key", "id", "--index", "custmer_id"], "'custmer_id'")],
)
def test_unknown_key_or_index_is_refused_before_any_write(
    s3: Any, bucket: str, capsys: pytest.CaptureFixture[str], dry_run: bool, bad: list[str],
    named: str,
) -> None:  # fmt: skip
    """Issue 36 item 6: ``--key idd`` / ``--index custmer_id`` refused with the known names."""
    src = _hive(s3, bucket)
    before = _all_keys(s3, bucket)
    uri = f"s3://{bucket}/tables/ev"
    args = ["-q", "adopt", uri, src, *bad, *(["--dry-run"] if dry_run else [])]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("lethe: ") and named in err and "customer_id" in err and "dt" in err
    assert "Traceback" not in err
    assert _all_keys(s3, bucket) == before  # no table, no ledger, no markers
    # corrected, it works (and types dt this time)
    ok = ["adopt", uri, src, "--key", "id", "--index", "customer_id", "--partition-type", "dt=date"]
    assert main(ok) == 0
    t = lethe.Table.open(uri)
    assert t.schema.field("dt").type == pa.date32() and t.indexes == ("customer_id",)
    assert t.scan().num_rows == 200


def test_a_failed_adoption_leaves_nothing_behind(
    s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (tracebacks): re-running ``adopt --partition-type dt=date`` after an adoption
    that failed after its first write (a file without the key column) works."""
    src = _hive(s3, bucket)
    buf = io.BytesIO()
    pq.write_table(pa.table({"customer_id": pa.array([1], pa.int32())}), buf)
    s3.put_object(Bucket=bucket, Key="raw/ev/dt=2026-01-03/nokey.parquet", Body=buf.getvalue())
    uri = f"s3://{bucket}/tables/ev"
    before = _all_keys(s3, bucket)
    assert main(["-q", "adopt", uri, src, "--key", "id"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lethe: ") and "nokey.parquet" in err
    assert _all_keys(s3, bucket) == before
    s3.delete_object(Bucket=bucket, Key="raw/ev/dt=2026-01-03/nokey.parquet")
    args = ["adopt", uri, src, "--key", "id", "--partition-type", "dt=date"]
    assert main(args) == 0, capsys.readouterr().err
    assert lethe.Table.open(uri).schema.field("dt").type == pa.date32()


@pytest.mark.parametrize("fail_on", ["manifest/adopted/", "_latest_manifest"])
def test_a_write_failing_in_the_first_commit_removes_the_new_table(
    s3: Any, bucket: str, fail_on: str
) -> None:
    """Issue 36 item 6: an adoption into a new table that fails in its first commit (the
    ledger's PUT, the commit's head) leaves no table, ledger or ownership marker behind."""
    src = _hive(s3, bucket)
    before = _all_keys(s3, bucket)
    uri = f"s3://{bucket}/tables/ev"
    seen: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        path = str(params.get("url_path", ""))
        if fail_on in path and "tables/ev/" in path:
            seen.append(path)
            if fail_on == "manifest/adopted/" or len(seen) > 1:  # the create's head passes
                raise InjectedFault(f"injected failure of {op} {path}")

    with on_request(s3, ("PutObject",), hook), pytest.raises(Exception, match="injected"):
        lethe.Table.adopt(uri, src, key="id", indexes=["customer_id"], s3=s3)
    assert seen
    assert _all_keys(s3, bucket) == before
    t = lethe.Table.adopt(uri, src, key="id", indexes=["customer_id"], s3=s3)
    assert isinstance(t, lethe.Table) and t.scan().num_rows == 200


def test_partition_types_follow_the_table(
    s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (tracebacks): ``--partition-type dt=date`` into a table that has ``dt`` as a
    string is refused, naming both types (it was ``ArrowTypeError: Expected bytes, got a
    'int'``); without it, new directories are read as the table's type."""
    src = _hive(s3, bucket)
    strings, dates = f"s3://{bucket}/tables/s", f"s3://{bucket}/tables/d"
    assert main(["adopt", strings, src, "--key", "id", "--no-ownership"]) == 0
    args = ["adopt", dates, src, "--key", "id", "--partition-type", "dt=date", "--no-ownership"]
    assert main(args) == 0
    capsys.readouterr()
    buf = io.BytesIO()
    pq.write_table(events(500, 10), buf)
    s3.put_object(Bucket=bucket, Key="raw/ev/dt=2026-01-03/part-0.parquet", Body=buf.getvalue())
    assert main(["-q", "adopt", strings, src, "--partition-type", "dt=date", "--no-ownership"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lethe: ") and "date32" in err and "string" in err
    assert main(["adopt", strings, src, "--no-ownership"]) == 0
    assert main(["adopt", dates, src, "--no-ownership"]) == 0
    got = lethe.Table.open(dates).scan()
    assert got.num_rows == 210 and str(got.schema.field("dt").type) == "date32[day]"
    assert sorted(set(got["dt"].to_pylist()))[-1].isoformat() == "2026-01-03"
    assert set(lethe.Table.open(strings).scan()["dt"].to_pylist()) == {
        "2026-01-01", "2026-01-02", "2026-01-03"
    }  # fmt: skip
