"""Progress of long operations: the library reports, whoever called it shows.

A long operation (:meth:`Table.append <lethe.Table.append>` of a large input,
:meth:`~lethe.Table.erase` and :meth:`~lethe.Table.purge` over many files,
:func:`lethe.gc.collect`, :func:`lethe.iceberg.publish`, the backfill of
:meth:`~lethe.Table.create_index`) takes a keyword-only ``progress=`` callback and calls it
with a :class:`ProgressEvent` when a task starts, after each unit of work, and when the task
is done. The library draws nothing and imports no terminal library: the ``lethe`` command
line turns the events into bars (:mod:`lethe.cli.bars`); a Lambda passes nothing.

Events of one task carry counts that never decrease; the last one has ``finished`` set. A
task whose size is known up front has a ``total`` (a run bounded by ``max_bytes`` may
finish below it: the rest is pending); others count up with ``total`` None until the end.
Callbacks may be called from worker threads, one call at a time.

Example:
    >>> events = []
    >>> with track(events.append, "erase", total=2, unit="files") as t:
    ...     t.advance()
    ...     t.advance()
    >>> [(e.completed, e.total, e.finished) for e in events]
    [(0, 2, False), (1, 2, False), (2, 2, False), (2, 2, True)]
    >>> events[-1].describe()
    'erase: 2/2 files (100%)'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

__all__ = ["Progress", "ProgressEvent", "Tracker", "no_progress", "track"]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """Where one task stands.

    Attributes:
        task: what runs, e.g. ``"append"``, ``"erase"``, ``"gc sweep"`` (never a key or value).
        completed: units done so far (never decreases within a task).
        total: units the task will do, or None when not known up front.
        unit: what is counted: ``"rows"``, ``"files"``, ``"objects"``, ``"manifests"``.
        finished: the task is over (the last event of the task).
    """

    task: str
    completed: int
    total: int | None
    unit: str
    finished: bool = False

    @property
    def fraction(self) -> float | None:
        """``completed / total`` (1.0 for an empty task), or None without a total."""
        if self.total is None:
            return None
        return 1.0 if self.total == 0 else min(1.0, self.completed / self.total)

    def describe(self) -> str:
        """One line: ``"erase: 3/12 files (25%)"``; without a total ``"append: 4096 rows"``
        (``"append: started"`` at 0)."""
        if self.total is None:
            return f"{self.task}: " + (
                f"{self.completed} {self.unit}" if self.completed else "started"
            )
        pct = int(100 * (self.fraction or 0.0))
        return f"{self.task}: {self.completed}/{self.total} {self.unit} ({pct}%)"


Progress = Callable[[ProgressEvent], None]
"""A progress callback: called with each :class:`ProgressEvent` of the tasks it watches."""


def no_progress(event: ProgressEvent) -> None:
    """The default callback: ignores every event."""


class Tracker:
    """One task's counter: sends a :class:`ProgressEvent` to ``progress`` on start, on every
    :meth:`advance` and on :meth:`finish` (thread-safe; counts never decrease).

    As a context manager it finishes the task when the block ends without an exception;
    a task left by an exception sends no finishing event.
    """

    def __init__(self, progress: Progress | None, task: str, total: int | None, unit: str) -> None:
        self._progress = progress or no_progress
        self._task, self._unit = task, unit
        self._total = total
        self._completed = 0
        self._finished = False
        self._lock = threading.Lock()
        self._emit()

    @property
    def completed(self) -> int:
        return self._completed

    def _emit(self) -> None:
        self._progress(
            ProgressEvent(self._task, self._completed, self._total, self._unit, self._finished)
        )

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units done (a total that turns out too small grows with them)."""
        if n <= 0:
            return
        with self._lock:
            if self._finished:
                return
            self._completed += n
            if self._total is not None and self._completed > self._total:
                self._total = self._completed
            self._emit()

    def each(self, fn: Callable[[_T], _R]) -> Callable[[_T], _R]:
        """``fn``, counting one unit done after each call returns (for ``pool.map``)."""

        def counted(x: _T) -> _R:
            out = fn(x)
            self.advance()
            return out

        return counted

    def finish(self) -> None:
        """End the task (a task without a total gets its count as the total); idempotent."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if self._total is None:
                self._total = self._completed
            self._emit()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()


def track(progress: Progress | None, task: str, *, total: int | None, unit: str) -> Tracker:
    """Start a task: a :class:`Tracker` that has sent its first event (``completed`` 0)."""
    return Tracker(progress, task, total, unit)
