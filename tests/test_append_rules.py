"""One rule for every append input (issue 36 item 3), as the README states it: a column under
an earlier name of a renamed column is that column; a missing column refuses the append."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lethe
from lethe import errors
from lethe.cli import main

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("note", pa.string())])


@pytest.fixture
def renamed_table(table_uri: str) -> str:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(pa.table({"id": [1], "note": ["a"]}, schema=SCHEMA))
    with t.update_schema() as u:
        u.rename_column("note", "memo")
    return table_uri


def _memo(uri: str) -> dict[int, str]:
    rows = lethe.Table.open(uri).scan().to_pylist()
    return {r["id"]: r["memo"] for r in rows}


def test_the_earlier_name_is_the_column_in_every_append_form(
    renamed_table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = renamed_table
    t = lethe.Table.open(uri)
    t.append(pa.table({"id": [2], "note": ["b"]}))  # a pa.Table
    old = pa.table({"id": [3], "note": ["c"]})
    t.append(pa.RecordBatchReader.from_batches(old.schema, old.to_batches()))  # a stream
    (tmp_path / "x.csv").write_text("id,note\n4,d\n")
    pq.write_table(pa.table({"id": [5], "note": ["e"]}), tmp_path / "x.parquet")
    (tmp_path / "x.jsonl").write_text('{"id": 6, "note": "f"}\n{"id": 7, "memo": "g"}\n')
    assert main(["append", uri, str(tmp_path / "x.csv")]) == 0
    assert main(["append", uri, str(tmp_path / "x.parquet")]) == 0
    assert main(["append", uri, str(tmp_path / "x.jsonl")]) == 0  # issue 36 item 3: JSON lines
    assert _memo(uri) == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 6: "f", 7: "g"}
    both = pa.table({"id": [6], "note": ["f"], "memo": ["g"]})
    with pytest.raises(errors.SchemaMismatch, match="come twice"):
        lethe.Table.open(uri).append(both)
    capsys.readouterr()
    (tmp_path / "y.jsonl").write_text('{"id": 8, "note": "h", "memo": "i"}\n')
    assert main(["append", uri, str(tmp_path / "y.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "column 'memo' comes twice (as 'note' and 'memo'): 1 row (row 0)" in err


def test_a_missing_column_refuses_csv_as_it_refuses_parquet(
    renamed_table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = renamed_table
    (tmp_path / "x.csv").write_text("id\n7\n")
    pq.write_table(pa.table({"id": [8]}), tmp_path / "x.parquet")
    capsys.readouterr()
    for f in ("x.csv", "x.parquet"):
        assert main(["append", uri, str(tmp_path / f)]) == 2
        assert "missing columns ['memo']" in capsys.readouterr().err
    assert sorted(_memo(uri)) == [1]
