"""One local SparkSession for every Spark test of the process (master local[2], UI off).

It starts after moto's server (fixture ``aws``), so the JVM and its Python workers inherit
``AWS_ENDPOINT_URL`` and the test credentials; ``build_session`` passes them to executors too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lethe.local.server import LocalAws


@pytest.fixture(scope="session")
def spark(aws: LocalAws) -> Iterator[Any]:
    from spark_jobs._session import build_session

    session = build_session(
        "lethe-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
        },
    )
    try:
        yield session
    finally:
        session.stop()
