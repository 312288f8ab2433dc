"""The GC grace rule, shared by writers and the garbage collector (docs/format.md §9).

An object that no manifest references yet may belong to a writer that has not committed.
GC keeps such objects for the table's grace (``properties.gc_grace_seconds``) after their
``LastModified``, rounded *up* to the next whole second (S3 truncates it). A writer notes
its own clock *before* its first upload for a commit and refuses to PUT the manifest once
``grace - margin`` has passed (:func:`check_fresh`): the margin covers clock skew between
the writer, S3 and GC, and the time the manifest PUT itself takes. Then no commit can land
a manifest that references an object GC may already have deleted: GC takes its clock before
it reads the head, so an object it finds older than the grace was uploaded before a commit
that could still reference it had to give up.

>>> margin(3.0), commit_deadline(3.0)
(1.0, 2.0)
>>> commit_deadline(7 * 86400) == 7 * 86400 - 900
True
>>> from datetime import UTC
>>> round_up(datetime(2026, 1, 1, 0, 0, 5, 1, tzinfo=UTC))
datetime.datetime(2026, 1, 1, 0, 0, 6, tzinfo=datetime.timezone.utc)
>>> parse_duration("7d")
datetime.timedelta(days=7)
>>> parse_duration("0")
datetime.timedelta(0)
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

from lethe import errors

__all__ = [
    "DEFAULT_DEADLINE_DAYS",
    "DEFAULT_ERASURE_GRACE",
    "DEFAULT_GC_GRACE_SECONDS",
    "DEFAULT_RETENTION",
    "check_fresh",
    "commit_deadline",
    "format_duration",
    "margin",
    "parse_duration",
    "round_up",
]

DEFAULT_GC_GRACE_SECONDS = 7 * 86400.0
DEFAULT_RETENTION = "30d"  # GC's time-travel retention
DEFAULT_ERASURE_GRACE = "1h"  # GC: objects an erasure superseded go this long after it
DEFAULT_DEADLINE_DAYS = 30.0  # reports: an erasure older than this is overdue (GDPR art. 12(3))
MAX_MARGIN_SECONDS = 900.0  # 15 minutes: far more than clock skew or one manifest PUT

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(value: str | timedelta | float) -> timedelta:
    """A duration from ``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"``, seconds, or a
    timedelta."""
    if isinstance(value, timedelta):
        td = value
    elif isinstance(value, bool):
        raise errors.InvalidRequest(f"not a duration: {value!r}")
    elif isinstance(value, int | float):
        td = timedelta(seconds=value)
    else:
        m = _DURATION_RE.match(str(value))
        if not m:
            raise errors.InvalidRequest(
                f"not a duration: {value!r}; use a number with s, m, h, d or w (e.g. 7d)"
            )
        td = timedelta(seconds=float(m.group(1)) * UNITS[m.group(2)])
    if td < timedelta(0):
        raise errors.InvalidRequest(f"duration must not be negative: {value!r}")
    return td


def format_duration(value: timedelta | float) -> str:
    """A duration as :func:`parse_duration` reads it, in its largest whole unit (what the
    command line prints: ``1d``, not ``1 day, 0:00:00``).

    >>> [format_duration(x) for x in (timedelta(days=1), 6 * 3600, 90, 0, 1.5, 86400 + 3600)]
    ['1d', '6h', '90s', '0s', '1.5s', '25h']
    """
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    for unit in ("d", "h", "m"):
        if s and s % UNITS[unit] == 0:
            return f"{int(s // UNITS[unit])}{unit}"
    return f"{s:g}s"


def margin(grace_seconds: float) -> float:
    """The part of the grace a writer leaves to GC: a third of it, at most 15 minutes."""
    return min(grace_seconds / 3, MAX_MARGIN_SECONDS)


def commit_deadline(grace_seconds: float) -> float:
    """Seconds after its first upload by which a writer must have PUT its manifest."""
    return grace_seconds - margin(grace_seconds)


def round_up(last_modified: datetime) -> datetime:
    """``LastModified`` as GC reads it: the next whole second (S3 truncates to seconds, so
    the object may have been written up to a second later than it says)."""
    return last_modified.replace(microsecond=0) + timedelta(seconds=1)


def check_fresh(
    written_at: float | None, grace_seconds: float, *, now: float | None = None
) -> None:
    """Raise :class:`~lethe.errors.GraceExpired` when objects written at ``written_at``
    (the writer's ``time.time()`` before its first upload) may no longer be committed."""
    if written_at is None:
        return
    age = (time.time() if now is None else now) - written_at
    deadline = commit_deadline(grace_seconds)
    if age >= deadline:
        raise errors.GraceExpired(
            f"this commit's objects were written {age:.1f}s ago; the table's GC grace is "
            f"{grace_seconds:g}s and a commit must land within {deadline:g}s of its first "
            "upload (GC may remove older unreferenced objects): the commit was not made"
        )
