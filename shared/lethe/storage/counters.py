"""Request and byte counters: every request a store makes, and every byte it moves, is
recorded in an :class:`IOStats`; an :class:`IOCounters` is an immutable snapshot of one
(subtract two for what an operation cost)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["IOCounters", "IOStats"]


@dataclass(frozen=True, slots=True)
class IOCounters:
    """Immutable snapshot of request and byte counters; subtract two to get a delta."""

    requests: Mapping[str, int] = field(default_factory=dict)
    bytes_downloaded: int = 0
    bytes_uploaded: int = 0
    bytes_copied: int = 0

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def count(self, op: str) -> int:
        return self.requests.get(op, 0)

    @property
    def puts(self) -> int:
        """PUT-class writes: PutObject plus multipart part uploads and copies and completes."""
        return sum(
            self.requests.get(op, 0)
            for op in ("put", "upload_part", "upload_part_copy", "complete_multipart", "copy")
        )

    def _combine(self, other: IOCounters, sign: int) -> IOCounters:
        ops = sorted(set(self.requests) | set(other.requests))
        counts = {op: self.count(op) + sign * other.count(op) for op in ops}
        return IOCounters(
            # a difference names only the requests that differ
            requests={op: n for op, n in counts.items() if n or sign > 0},
            bytes_downloaded=self.bytes_downloaded + sign * other.bytes_downloaded,
            bytes_uploaded=self.bytes_uploaded + sign * other.bytes_uploaded,
            bytes_copied=self.bytes_copied + sign * other.bytes_copied,
        )

    def __sub__(self, other: IOCounters) -> IOCounters:
        return self._combine(other, -1)

    def __add__(self, other: IOCounters) -> IOCounters:
        return self._combine(other, 1)

    def describe(self) -> str:
        ops = ", ".join(f"{k}={v}" for k, v in sorted(self.requests.items()))
        return (
            f"{self.total_requests} requests ({ops}); "
            f"down {self.bytes_downloaded:,} B, up {self.bytes_uploaded:,} B, "
            f"copied server-side {self.bytes_copied:,} B"
        )


class IOStats:
    """Thread-safe request and byte counters shared by everything using one store."""

    def __init__(self, parent: IOStats | None = None) -> None:
        self.parent = parent
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()
        self._down = 0
        self._up = 0
        self._copied = 0

    def record(self, op: str, *, down: int = 0, up: int = 0, copied: int = 0) -> None:
        with self._lock:
            self._requests[op] += 1
            self._down += down
            self._up += up
            self._copied += copied
        if self.parent is not None:
            self.parent.record(op, down=down, up=up, copied=copied)

    def snapshot(self) -> IOCounters:
        with self._lock:
            return IOCounters(dict(self._requests), self._down, self._up, self._copied)
