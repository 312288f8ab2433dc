"""Shared benchmark plumbing: moto's server in its own process, timing, CPU accounting."""

from __future__ import annotations

import resource
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from devtools.local.server import LocalAws, start_moto


@contextmanager
def moto_process() -> Iterator[LocalAws]:
    """moto in a separate process, so this process's CPU time is the library's own."""
    aws = start_moto(process=True)
    try:
        yield aws
    finally:
        aws.stop()


def new_bucket(aws: LocalAws) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    aws.client("s3").create_bucket(Bucket=name)
    return name


@dataclass(frozen=True, slots=True)
class Measured:
    result: Any
    wall: float
    cpu: float


def measure(fn: Callable[[], Any]) -> Measured:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return Measured(out, wall, cpu)


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.2f} MiB"
