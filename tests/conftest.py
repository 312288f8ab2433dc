"""Shared fixtures: moto's server on 127.0.0.1 over HTTP (one per test process)."""

from __future__ import annotations

import doctest
import importlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine

from devtools.local.server import LocalAws, start_moto

# No wall-clock limits in tests (CI machines are shared): hypothesis' per-example deadline and
# its too-slow health check are off; benchmarks measure time instead.
settings.register_profile("lethe", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lethe")


def assert_doctests(module: str) -> None:
    """The examples in the docstrings of ``module`` (there are some) all pass."""
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def bucket_objects(s3: Any, bucket: str) -> Iterator[tuple[str, bytes, pa.Table | None]]:
    """Every object of ``bucket``: its key, its body and, for a Parquet file, its rows."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            parquet = body[:4] == b"PAR1" and body[-4:] == b"PAR1"
            yield o["Key"], body, pq.read_table(pa.BufferReader(body)) if parquet else None


def run_in_threads(*calls: Callable[[], object]) -> list[BaseException]:
    """Start each call in its own thread, wait for all of them; what they raised."""
    raised: list[BaseException] = []

    def guarded(call: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                call()
            except BaseException as e:
                raised.append(e)

        return run

    threads = [threading.Thread(target=guarded(call)) for call in calls]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return raised


def run_state_machine(
    machine: type[RuleBasedStateMachine],
    *,
    examples: int,
    steps: int,
    random: bool,
    shrink: bool = True,
) -> None:
    """Run a Hypothesis state machine: ``examples`` runs of up to ``steps`` steps each,
    derandomized unless ``random``, every health check off, no shrinking unless ``shrink``."""
    run = machine.TestCase
    run.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=not random,
        suppress_health_check=list(HealthCheck),
        phases=[p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)],
    )
    run().runTest()


@pytest.fixture(scope="session")
def aws() -> Iterator[LocalAws]:
    local = start_moto()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session")
def s3(aws: LocalAws) -> Any:
    return aws.client("s3")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def table_uri(bucket: str) -> str:
    return f"s3://{bucket}/tables/t{uuid.uuid4().hex[:6]}"


EVENTS = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)


def events(start: int, n: int, *, customers: int = 100) -> pa.Table:
    import numpy as np

    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(
                1_700_000_000_000_000 + ids * 1_000_000, pa.timestamp("us", tz="UTC")
            ),
            "customer_id": pa.array((ids % customers).astype(np.int32)),
            "payload": pa.array([f"payload-{i}" for i in ids.tolist()]),
        },
        schema=EVENTS,
    )
