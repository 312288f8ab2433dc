"""The Iceberg view read by DuckDB's own reader (issue 40 item 5): DuckDB 1.4.4 with the
``duckdb-ext-iceberg``/``-httpfs``/``-avro`` wheels, in their own environment
(``.venv-duckdb14``, made by ``make duckdb14``; ``make test`` and so CI make it first), reads
the format-3 and format-2 views of a table with a renamed column, deletes and erasures to
exactly Lethe's rows, next to PyIceberg, Polars and Daft (tests/test_schema_evolution_paths.py).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_schema_evolution_paths import _evolved_view_table

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv-duckdb14" / "bin" / "python"
SCRIPT = ROOT / "devtools" / "duckdb14_view.py"


@pytest.fixture(scope="module")
def duckdb14() -> pathlib.Path:
    if not PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{PYTHON} is missing: .ci/run (make test) must create it (make duckdb14)")
        pytest.skip(f"DuckDB 1.4.4's environment {PYTHON} is absent here: run `make duckdb14`")
    return PYTHON


def _duckdb_rows(python: pathlib.Path, aws: Any, metadata: str, out: pathlib.Path) -> pa.Table:
    proc = subprocess.run(
        [str(python), str(SCRIPT), metadata, aws.endpoint, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return pq.read_table(out)


@pytest.mark.parametrize("fv", [3, 2])
def test_duckdb_1_4_reads_the_view_with_renames_and_deletes(
    aws: Any, table_uri: str, tmp_path: pathlib.Path, duckdb14: pathlib.Path, fv: int
) -> None:
    t = _evolved_view_table(table_uri, widen_day=False)
    assert "body" in t.schema.names and "payload" not in t.schema.names
    assert any(f.dv is not None for f in t.manifest.files)  # deletion vectors to apply
    want = t.scan()
    uri = t.publish_iceberg(format_version=fv)  # type: ignore[arg-type]
    got = _duckdb_rows(duckdb14, aws, uri, tmp_path / "got.parquet")
    assert got.column_names == want.column_names
    got = got.cast(want.schema)
    assert got.sort_by("id").to_pylist() == want.sort_by("id").to_pylist()
    assert got.num_rows == 36 - 2 - 4 - 1  # two deleted, five erased
