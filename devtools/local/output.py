"""Where the output of in-process functions and job runs goes: the local CloudWatch.

While a runtime runs, ``sys.stdout`` is a :class:`Router`: what a function or job run prints
goes to its :class:`Sink` (a log file; EMF metrics summed by name, warning and error records
kept), output of other threads (moto's Step Functions interpreter invoking the GC functions)
to a background sink, and the rest to the console.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ROUTER", "Router", "Sink", "SinkStream", "fd_redirect"]


class Sink:
    """One destination of routed output (a function's log): a file, appended to per write,
    plus the output's EMF metrics summed by name and its warning/error log records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = ""
        self._lock = threading.Lock()
        self.metrics: dict[str, float] = {}
        self.problems: list[str] = []

    def write(self, s: str) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(s)
            self._partial += s
            *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            d = json.loads(line)
        except ValueError:
            return
        if not isinstance(d, dict):
            return
        aws = d.get("_aws")
        if isinstance(aws, dict):  # CloudWatch embedded metric format
            for directive in aws.get("CloudWatchMetrics", []):
                for m in directive.get("Metrics", []):
                    v = d.get(m.get("Name"))
                    values = v if isinstance(v, list) else [v]
                    total = sum(float(x) for x in values if isinstance(x, int | float))
                    self.metrics[m["Name"]] = self.metrics.get(m["Name"], 0.0) + total
        elif d.get("level") in ("WARNING", "ERROR", "CRITICAL"):
            reason = d.get("reason") or d.get("exception_name") or ""
            self.problems.append(f"{d.get('message')}{': ' + str(reason) if reason else ''}")

    def flush(self) -> None:
        """Writes are not buffered."""


class Router(io.TextIOBase):
    """``sys.stdout`` while a runtime runs. A write goes to the sink its thread captures
    (a function or a job run executing), else, from any thread but the main one (moto's Step
    Functions interpreter invoking the GC functions), to the background sink (the workflow
    log), else to the stdout the router replaced. Powertools' Logger binds its stream at a
    function's cold start, always under this router, so its later lines are routed too."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()
        self.fallback: Any = None
        self.background: Sink | None = None
        self._installs = 0
        self._lock = threading.Lock()
        self._captures = 0  # threads capturing now (their sys.stdout is this router)
        self._saved: Any = None  # what sys.stdout was before the first of them

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def _sink(self) -> Sink | None:
        sink: Sink | None = getattr(self._local, "sink", None)
        if sink is None and threading.current_thread() is not threading.main_thread():
            return self.background
        return sink

    def write(self, s: str) -> int:
        sink = self._sink()
        if sink is not None:
            sink.write(s)
        else:
            out = self.fallback if self.fallback is not None else sys.__stdout__
            if out is not None and out is not self:
                out.write(s)
        return len(s)

    def flush(self) -> None:
        if self._sink() is None and self.fallback is not None and self.fallback is not self:
            self.fallback.flush()

    def install(self, background: Sink) -> None:
        if self._installs == 0 and sys.stdout is not self:
            self.fallback = sys.stdout
            sys.stdout = self
        self._installs += 1
        self.background = background

    def uninstall(self) -> None:
        self._installs = max(0, self._installs - 1)
        if self._installs == 0:
            if sys.stdout is self:
                sys.stdout = self.fallback
            self.background = None

    @contextlib.contextmanager
    def capture(self, sink: Sink) -> Iterator[None]:
        """Route this thread's output to ``sink`` meanwhile. ``sys.stdout`` is the router
        from the first capture (of any thread) to the end of the last one: a thread ending
        its capture must not hand ``sys.stdout`` back while another still prints."""
        prev = getattr(self._local, "sink", None)
        self._local.sink = sink
        with self._lock:
            if self._captures == 0:
                self._saved = sys.stdout
                sys.stdout = self
            self._captures += 1
        try:
            yield
        finally:
            with self._lock:
                self._captures -= 1
                if self._captures == 0:
                    sys.stdout = self._saved
            self._local.sink = prev


ROUTER = Router()


class SinkStream(io.TextIOBase):
    """A text stream writing into a :class:`Sink` (a job's ``sys.stderr``)."""

    def __init__(self, sink: Sink) -> None:
        super().__init__()
        self.sink = sink

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.sink.write(s)
        return len(s)


@contextlib.contextmanager
def fd_redirect(path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` (what a JVM started meanwhile inherits)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
