"""The lake from a shell (issue 36): a URI without a lake says how to create one, the erasure
window is changed with ``lethe lake window-set``, ``lethe lake window`` says when the open
windows close, and durations print as they are written (``1d``, not ``1 day, 0:00:00``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

import lethe
from lethe.cli import main
from lethe.lake.core import Lake
from lethe.lake.model import window_end

SCHEMA = pa.schema([("id", pa.int64(), False), ("customer_id", pa.int64())])


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_a_uri_without_a_lake_says_the_command_that_creates_one(
    bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (habits): ``LakeNotFound`` tells CLI users the CLI command, not
    ``Lake.create``; a table's URI given as the lake says so."""
    lake, table = f"s3://{bucket}/_lethe", f"s3://{bucket}/tables/orders"
    for argv in (["lake", "tables", lake], ["lake", "window-set", lake, "1d"]):
        rc, out, err = _run(argv, capsys)
        assert rc == 2 and out == ""
        assert err.startswith(f"lethe: no lake at {lake} ") and "Traceback" not in err
        assert f"`lethe lake create {lake}`" in err and "Lake.create" not in err
    lethe.Table.create(table, SCHEMA, key="id")
    rc, _, err = _run(["lake", "add", table, lake], capsys)  # the arguments swapped
    assert rc == 2 and f"no lake at {table}" in err and "is a Lethe table" in err
    rc, _, err = _run(["lake", "subjects", "s3://no-such-bucket-lethe-36/_lethe"], capsys)
    assert rc == 2 and err.startswith("lethe: ") and "Traceback" not in err


def test_window_set_and_window_say_durations_as_written(
    bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (habits): ``lethe lake window-set LAKE 6h`` changes the window; ``lake window``
    says when the waiting requests' window closes; ``1d``, never ``1 day, 0:00:00``."""
    uri, table = f"s3://{bucket}/_lethe", f"s3://{bucket}/tables/orders"
    rc, out, _ = _run(["lake", "create", uri], capsys)
    assert rc == 0 and "(erasure window 1d)" in out and "day," not in out
    t = lethe.Table.create(table, SCHEMA, key="id")
    t.append(pa.table({"id": [1, 2, 3], "customer_id": [7, 8, 7]}, schema=SCHEMA))
    assert main(["lake", "map", uri, "customer", table, "customer_id"]) == 0
    assert main(["lake", "forget", uri, "customer", "7", "--request-id", "r-1"]) == 0
    capsys.readouterr()
    rc, out, _ = _run(["lake", "window", uri], capsys)
    assert rc == 0 and "0 erase request(s) due, 1 waiting" in out
    (req,) = Lake.open(uri).doc.requests
    closes = window_end(req.recorded_at, 86400).isoformat(timespec="seconds")
    assert f"1 request(s) wait for the window that closes at {closes} (in " in out
    rc, out, _ = _run(["lake", "window-set", uri, "6h"], capsys)
    assert rc == 0 and f"erasure window of {uri}: 6h (was 1d)" in out
    assert Lake.open(uri).erasure_window == timedelta(hours=6)
    rc, out, _ = _run(["lake", "window", uri], capsys)
    closes = window_end(req.recorded_at, 6 * 3600).isoformat(timespec="seconds")
    assert f"closes at {closes}" in out
    rc, out, _ = _run(["lake", "window-set", uri, "0"], capsys)
    assert rc == 0 and "0s (was 6h)" in out and "spliced at once" in out
    rc, out, _ = _run(["lake", "window", uri], capsys)
    assert rc == 0 and "1 erase request(s) due, 0 waiting" in out and "closes at" not in out
    assert lethe.Table.open(table).scan().column("customer_id").to_pylist() == [8]
    rc, _, err = _run(["lake", "window-set", uri, "soon"], capsys)
    assert rc == 2 and "not a duration: 'soon'" in err


def test_gc_text_says_graces_as_durations(
    table_uri: str, capsys: pytest.CaptureFixture[str], s3: Any
) -> None:
    """Issue 36 (habits): ``lethe gc`` prints ``grace 7d, erasure grace 1h``."""
    lethe.Table.create(table_uri, SCHEMA, key="id")
    rc, out, _ = _run(["gc", table_uri, "--dry-run"], capsys)
    assert rc == 0 and "grace 7d, erasure grace 1h" in out, out


def test_retention_and_clustering_say_durations_as_written(
    table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (habits): ``rows expire 12h`` (not ``43200s``), ``windows of 1d`` (not
    ``86,400 s``)."""
    schema = pa.schema([*SCHEMA, pa.field("ts", pa.timestamp("us", tz="UTC"))])
    t = lethe.Table.create(table_uri, schema, key="id", cluster_by="customer_id",
                           cluster_window=("ts", "1d"))  # fmt: skip
    assert main(["retention", "set", table_uri, "--column", "ts", "--keep", "12h"]) == 0
    assert "rows expire 12h after their 'ts'" in capsys.readouterr().out
    assert "in windows of 1d of ts" in t.compact(dry_run=True).plan.describe()


def test_lake_gc_collects_every_table_and_completes_the_request(
    bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (habits): ``lethe lake gc LAKE`` runs GC over every table of the lake: after a
    forget spliced at once, a dry run deletes nothing and the receipt stays ``removed``; the
    real run deletes the superseded originals in every table and the receipt is complete."""
    uri = f"s3://{bucket}/_lethe"
    assert main(["lake", "create", uri, "--erasure-window", "0"]) == 0
    tables = [f"s3://{bucket}/tables/{n}" for n in ("orders", "tickets")]
    for i, table in enumerate(tables):
        t = lethe.Table.create(table, SCHEMA, key="id")
        t.append(pa.table({"id": [10 * i + 1, 10 * i + 2], "customer_id": [7, 8]}, schema=SCHEMA))
        assert main(["lake", "add", uri, table]) == 0
        assert main(["lake", "map", uri, "customer", table, "customer_id"]) == 0
    assert main(["lake", "forget", uri, "customer", "7", "--request-id", "r-gc"]) == 0
    assert Lake.open(uri).erasure_status("r-gc").state == "removed"
    capsys.readouterr()
    gc = ["lake", "gc", uri, "--retention", "1v", "--erasure-grace", "0s"]
    rc, out, _ = _run([*gc, "--dry-run"], capsys)
    assert rc == 0 and all(t in out for t in tables) and "dry run: nothing deleted" in out
    assert Lake.open(uri).erasure_status("r-gc").state == "removed"
    rc, out, _ = _run(gc, capsys)
    assert rc == 0 and "2 table(s) collected" in out
    assert Lake.open(uri).erasure_status("r-gc").state == "complete"
    for table in tables:
        assert lethe.Table.open(table).scan().column("customer_id").to_pylist() == [8]
