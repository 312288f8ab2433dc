"""The ``lethe`` command line end to end against moto's server."""

from __future__ import annotations

from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import events

from lethe.cli import main, parse_where


def test_cli_story(table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "events.parquet"
    pq.write_table(events(0, 2_000), src)
    csv = tmp_path / "more.csv"
    pacsv.write_csv(events(2_000, 500), csv)
    assert (
        main(
            ["create", table_uri, "--schema", str(src), "--key", "id", "--row-group-bytes", "8000"]
        )
        == 0
    )
    assert main(["append", table_uri, str(src)]) == 0
    assert main(["append", table_uri, str(csv)]) == 0
    assert "appended 500 rows" in capsys.readouterr().out
    assert (
        main(["scan", table_uri, "--where", "customer_id = 7", "--columns", "id,customer_id"]) == 0
    )
    out = capsys.readouterr().out
    assert "(25 rows" in out and "customer_id" in out
    exported = tmp_path / "out.parquet"
    assert main(["scan", table_uri, "--where", "id >= 2400", "--out", str(exported)]) == 0
    assert pq.read_table(exported).num_rows == 100
    assert main(["delete", table_uri, "--where", "id in [1, 2, 3]", "--request-id", "r1"]) == 0
    assert "deleted 3 rows" in capsys.readouterr().out
    assert main(["delete", table_uri, "--where", "id in [1, 2, 3]", "--request-id", "r1"]) == 0
    assert "already committed" in capsys.readouterr().out
    assert main(["history", table_uri]) == 0
    hist = capsys.readouterr().out
    assert "delete" in hist and "append" in hist and "create" in hist
    assert main(["inspect", table_uri]) == 0
    assert "row_groups=" in capsys.readouterr().out
    assert main(["erase", table_uri, "--where", "id = 10", "--request-id", "r2"]) == 0
    out = capsys.readouterr().out
    assert (
        # only the erased row: the 3 a plain delete hid stay under the DV (issue 39)
        "erased 1 rows (1 newly deleted)" in out and "copied server-side" in out
    )  # ids 1-3 were in its group
    assert main(["gc", table_uri, "--dry-run"]) == 0
    assert "dry" in capsys.readouterr().out.lower()
    assert main(["verify", table_uri]) == 0
    assert "0 problems" in capsys.readouterr().out
    assert main(["iceberg", "publish", table_uri]) == 0
    out = capsys.readouterr().out
    assert "published version" in out and out.strip().endswith(".metadata.json")
    assert main(["iceberg", "publish", table_uri]) == 0
    assert "already published" in capsys.readouterr().out


def test_cli_errors_are_clear(bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", f"s3://{bucket}/missing"]) == 2
    assert "TableNotFound" in capsys.readouterr().err
    assert main(["delete", f"s3://{bucket}/missing", "--where", "id = 1"]) == 2


def test_parse_where() -> None:
    assert parse_where("a not in [1,2]") == ("a", "not in", [1, 2])
    assert parse_where("ts >= '2024-01-01'") == ("ts", ">=", "2024-01-01")
