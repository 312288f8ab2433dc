"""Read a published Iceberg view with DuckDB 1.4.4's own reader, in its own environment.

The ``duckdb-ext-iceberg`` wheel (with ``-httpfs`` and ``-avro``) on PyPI is built for DuckDB
1.4.4 only, while the project runs DuckDB 2: so this runs in ``.venv-duckdb14``
(``make duckdb14``, from ``devtools/duckdb14-requirements.txt``), started by
``tests/test_view_duckdb14.py`` as a child process. It loads the extensions from the wheels
(no download), points S3 at an endpoint over plain HTTP and copies
``iceberg_scan(metadata)`` to a local Parquet file for the caller to compare::

    .venv-duckdb14/bin/python devtools/duckdb14_view.py METADATA_URI ENDPOINT OUT.parquet
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

import duckdb


def extension_dir() -> Path:
    """Where the ``duckdb-ext-*`` wheels put their ``*.duckdb_extension`` files."""
    for p in sys.path:
        d = Path(p) / "duckdb_ext" / "extensions"
        if d.is_dir():
            return d
    raise SystemExit("duckdb-ext-iceberg is not installed here: run `make duckdb14`")


def read_view(metadata_uri: str, endpoint: str, out: str) -> int:
    """Copy the view's rows to ``out`` (Parquet); the row count."""
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET extension_directory = ?", [str(extension_dir())])
    for ext in ("httpfs", "avro", "iceberg"):
        con.execute(f"LOAD {ext}")
    host = urlsplit(endpoint).netloc
    con.execute(
        "CREATE SECRET moto (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
        f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
    )
    q = f"SELECT * FROM iceberg_scan('{metadata_uri}')"
    con.execute(f"COPY ({q}) TO '{out}' (FORMAT parquet)")
    row = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()
    return int(row[0]) if row else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    print(read_view(*sys.argv[1:]))
