"""The index upkeep of an erasure, metered (issue 37 item 3): the client CPU spent in the
library's index work (probes that plan a delete from the index, the scrub that rewrites
pieces, and the values a splice reads for it), summed per thread with ``time.thread_time``
around those functions while a bench operation runs. Its bytes are the bench's meter of
keys under ``index/`` (piece GETs and PUTs).

The functions are looked up by name in the modules that call them, whichever exist: the same
bench measures the library before and after the scrub moved into the splice's commit.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# (module, name) of each index step as its caller binds it; absent ones are skipped
STEPS = (
    ("lethe.erasure.deletes", "index_plans"),  # a delete planned from the index (probe)
    ("lethe.erasure.deletes", "scrub_rows"),  # a delete's scrub (an erase's pinned values)
    # the splices' commit scrubbing the pieces (before issue 37 item 3: the purge's record)
    ("lethe.erasure.erase", "scrub_rows"),
    ("lethe.erasure.erase", "removed_values"),  # a splice reading the removed rows' values
)


class IndexCpu:
    """Seconds of client CPU inside the index steps (every thread)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.lock = threading.Lock()
        self.depth = threading.local()

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*a: Any, **kw: Any) -> Any:
            outer = getattr(self.depth, "n", 0) == 0
            self.depth.n = getattr(self.depth, "n", 0) + 1
            t0 = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                self.depth.n -= 1
                if outer:
                    with self.lock:
                        self.seconds += time.thread_time() - t0

        return timed


@contextmanager
def index_cpu() -> Iterator[IndexCpu]:
    """Meter the index steps' CPU inside the block."""
    meter = IndexCpu()
    saved: list[tuple[Any, str, Any]] = []
    for mod_name, name in STEPS:
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, name, None)
        if fn is not None:
            saved.append((mod, name, fn))
            setattr(mod, name, meter.wrap(fn))
    try:
        yield meter
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
