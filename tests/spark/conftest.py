"""One local SparkSession for every Spark test of the process (master local[2], UI off).

It starts after moto's server (fixture ``aws``), so the JVM and its Python workers inherit
``AWS_ENDPOINT_URL`` and the test credentials; ``build_session`` passes them to executors too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from devtools.local.server import LocalAws

# every Spark test module: pytestmark = SPARK_MARKS
SPARK_MARKS = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.xdist_group("spark"),  # one worker runs every Spark test: one JVM
    # pyspark 4.0's _load_from_socket (behind collect() and toArrow()) never closes its local
    # socket to the JVM; the ResourceWarning fires when the socket is collected
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <socket.socket.*raddr=\('127.0.0.1':"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


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


# Without __init__.py files pytest imports this file as module "conftest", which then shadows
# tests/conftest.py for every test module imported afterwards (``from conftest import EVENTS``).
# Forward the names this file does not define to tests/conftest.py.
_root: ModuleType | None = None


def __getattr__(name: str) -> Any:
    global _root
    if name.startswith("__"):
        raise AttributeError(name)
    if _root is None:
        path = Path(__file__).resolve().parent.parent / "conftest.py"
        spec = importlib.util.spec_from_file_location("_lethe_tests_root_conftest", path)
        assert spec is not None and spec.loader is not None
        _root = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_root)
    return getattr(_root, name)
