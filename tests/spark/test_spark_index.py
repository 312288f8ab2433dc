"""spark_jobs/index.py: a backfill spread over Spark tasks gives the same answers."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
from spark_jobs.index import run_index

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.xdist_group("spark"),
    # pyspark 4.0's _load_from_socket (behind collect()) never closes its local socket
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <socket.socket.*raddr=\('127.0.0.1':"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


def test_spark_backfill_writes_one_run_per_task(table_uri: str, spark: Any) -> None:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=8_000, row_group_bytes=2_000
    )
    t.append(events(0, 900))
    plain = sorted(t.scan(["id"], [("customer_id", "in", [4, 5])])["id"].to_pylist())
    res = run_index(table_uri, "customer_id", tasks=3, spark=spark)
    t = lethe.Table.open(table_uri)
    assert t.indexes == ("customer_id",)
    (ix,) = t.manifest.indexes
    assert len(ix.runs) == min(3, len(t.manifest.files)) and res.version == t.version
    assert all(ix.covers(f) for f in t.manifest.files)
    assert sorted(t.scan(["id"], [("customer_id", "in", [4, 5])])["id"].to_pylist()) == plain
    assert t.delete([("customer_id", "=", 4)]).rows_deleted == 9
