"""How ``lethe`` shows the progress of long commands, on stderr (stdout stays for data).

* on a terminal: rich's progress bars (one per task: what, bar, ``done/total unit``,
  elapsed and remaining time), drawn only while a task runs, so that what a command prints
  afterwards lands below them;
* elsewhere (a pipe, a log file, CI): :class:`PlainLines`, a line when a task starts, at
  every tenth of it (or every :attr:`PlainLines.interval` seconds without a total), and when
  it ends: ``erase: 3/12 files (25%)``, ``erase: 12/12 files (100%) in 4.1s``;
* with ``--quiet``: nothing.

The library's side is :mod:`lethe.progress`: commands pass the callback :func:`reporter`
yields as ``progress=`` to the operations they run.

Example:
    >>> import io
    >>> from lethe.progress import track
    >>> out = io.StringIO()
    >>> lines = PlainLines(out, clock=lambda: 0.0)
    >>> with track(lines, "erase", total=20, unit="files") as t:
    ...     for _ in range(20):
    ...         t.advance()
    >>> print(out.getvalue(), end="")  # doctest: +ELLIPSIS
    erase: 0/20 files (0%)
    erase: 2/20 files (10%)
    ...
    erase: 18/20 files (90%)
    erase: 20/20 files (100%) in 0.0s
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from lethe.progress import Progress, ProgressEvent, no_progress

if TYPE_CHECKING:  # pragma: no cover
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = ["PlainLines", "RichBars", "reporter"]


class PlainLines:
    """Progress as plain lines on ``stream``, never more than about a dozen per task."""

    interval: float = 10.0
    """Seconds after which a task without a new tenth (or without a total) prints anyway."""

    def __init__(self, stream: TextIO, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream, self._clock = stream, clock
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._last: dict[str, tuple[float, int]] = {}  # task -> (time, tenth) of its last line

    def __call__(self, e: ProgressEvent) -> None:
        with self._lock:
            now = self._clock()
            if e.task not in self._started or (e.completed == 0 and not e.finished):
                self._started[e.task] = now
                self._last[e.task] = (now, 0)
                if e.total != 0:  # an empty task gets its last line only
                    self._print(e.describe())
                return
            if e.finished:
                took = now - self._started.pop(e.task)
                self._last.pop(e.task, None)
                self._print(f"{e.describe()} in {took:.1f}s")
                return
            at, tenth = self._last[e.task]
            # the tenths up to 9: the finishing event prints the last line
            new = min(9, int(10 * e.fraction)) if e.fraction is not None else tenth
            if new > tenth or now - at >= self.interval:
                self._last[e.task] = (now, new)
                self._print(e.describe())

    def _print(self, line: str) -> None:
        print(line, file=self._stream, flush=True)


class RichBars:
    """Progress as rich bars on a terminal ``stream``: a live display while any task runs,
    stopped (its bars left in place) when the last running task ends."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._live: RichProgress | None = None
        self._tasks: dict[str, TaskID] = {}

    def _display(self) -> RichProgress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        live = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=self._stream),
            redirect_stdout=False,  # stdout is the command's data: never through the bars
            redirect_stderr=False,
        )
        live.start()
        return live

    def __call__(self, e: ProgressEvent) -> None:
        with self._lock:
            if self._live is None:
                self._live = self._display()
            live = self._live
            tid = self._tasks.get(e.task)
            if tid is None:
                tid = live.add_task(e.task, total=e.total, unit=e.unit)
                self._tasks[e.task] = tid
            live.update(tid, completed=e.completed, total=e.total)
            if e.finished:
                live.stop_task(tid)
                del self._tasks[e.task]
                if not self._tasks:
                    self.close()

    def close(self) -> None:
        """Stop the live display (if any): the bars stay as last drawn."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            self._tasks.clear()


@contextmanager
def reporter(*, quiet: bool = False, stream: TextIO | None = None) -> Iterator[Progress]:
    """The progress callback for one command: bars on a terminal, lines elsewhere,
    nothing when ``quiet``; the display is closed when the block ends (even by an error)."""
    out: Any = stream if stream is not None else sys.stderr
    if quiet:
        yield no_progress
        return
    if not out.isatty():
        yield PlainLines(out)
        return
    bars = RichBars(out)
    try:
        yield bars
    finally:
        bars.close()
