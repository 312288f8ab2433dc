"""What a GC run keeps, and for how long (pure): retention, grace periods, the run's options.

Durations are parsed by :func:`lethe.catalog.grace.parse_duration` (``"7d"``, ``"90m"``, seconds).

>>> opts = options("1000v", "1d", DEFAULT_ERASURE_GRACE, dry_run=True)
>>> floor_grace(opts, timedelta(hours=1)).grace
datetime.timedelta(days=1)
>>> floor_grace(opts, timedelta(days=7))
Traceback (most recent call last):
lethe.errors.InvalidRequest: GC grace 1d is shorter than the table's gc_grace 7d, ...
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lethe import errors
from lethe.catalog.grace import (
    DEFAULT_ERASURE_GRACE,
    DEFAULT_RETENTION,
    UNITS,
    parse_duration,
    round_up,
)
from lethe.progress import Progress

__all__ = [
    "BATCH_KEYS",
    "DEFAULT_ERASURE_GRACE",
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "MAX_BATCHES",
    "WORKSPACE_GRACE",
    "Options",
    "Retention",
    "Tuning",
    "as_utc",
    "floor_grace",
    "is_old",
    "options",
]

DEFAULT_GRACE = "7d"
#: A run's workspace files are removed once it finished (report or failure written), or
#: after this long (longer than the workflow's 6 h timeout: a running workflow keeps them).
WORKSPACE_GRACE = timedelta(hours=12)
BATCH_KEYS = 1000  # DeleteObjects takes at most 1,000 keys
#: At most this many batches per workflow run keeps ``$.plan`` far below Step Functions'
#: 256 KiB state limit (a batch URI is ~100 bytes); a larger backlog continues next run.
MAX_BATCHES = 1000


def _fmt_duration(td: timedelta, units: tuple[str, ...] = ("w", "d", "h", "m")) -> str:
    s = td.total_seconds()
    for unit in units:
        if s and s % UNITS[unit] == 0:
            return f"{int(s // UNITS[unit])}{unit}"
    return f"{s:g}s"


@dataclass(frozen=True, slots=True)
class Retention:
    """Which versions stay readable: those younger than ``max_age``, and/or the newest
    ``versions`` (a version is kept if either criterion keeps it; the head always is).

    >>> Retention.parse("30d")
    Retention(max_age=datetime.timedelta(days=30), versions=None)
    >>> str(Retention.parse("1000v,30d"))
    '30d,1000v'
    >>> Retention.parse("1v").versions   # only the head
    1
    """

    max_age: timedelta | None = None
    versions: int | None = None

    def __post_init__(self) -> None:
        if self.max_age is None and self.versions is None:
            raise errors.InvalidRequest("retention needs an age (30d) or a version count (100v)")
        if self.versions is not None and self.versions < 1:
            raise errors.InvalidRequest("retention by count keeps at least 1 version (the head)")

    @classmethod
    def parse(cls, value: str | timedelta | Retention) -> Retention:
        """From ``"30d"``, ``"1000v"``, ``"30d,1000v"``, a timedelta or a Retention."""
        if isinstance(value, Retention):
            return value
        if isinstance(value, timedelta):
            return cls(max_age=parse_duration(value))
        if not isinstance(value, str):
            raise errors.InvalidRequest(f"retention must look like 30d or 1000v, got {value!r}")
        age: timedelta | None = None
        count: int | None = None
        for part in (p.strip() for p in value.replace("+", ",").split(",")):
            if re.fullmatch(r"\d+v", part):
                if count is not None:
                    raise errors.InvalidRequest(f"retention {value!r} gives two version counts")
                count = int(part[:-1])
            else:
                if age is not None:
                    raise errors.InvalidRequest(f"retention {value!r} gives two ages")
                age = parse_duration(part)
        return cls(max_age=age, versions=count)

    def keeps(self, index: int, created_at: datetime, now: datetime) -> bool:
        """Whether the version ``index`` steps behind the head (head = 0) is retained."""
        if index == 0:
            return True
        if self.versions is not None and index < self.versions:
            return True
        return self.max_age is not None and created_at >= now - self.max_age

    def __str__(self) -> str:
        parts = []
        if self.max_age is not None:
            parts.append(_fmt_duration(self.max_age))
        if self.versions is not None:
            parts.append(f"{self.versions}v")
        return ",".join(parts)


@dataclass(frozen=True, slots=True)
class Tuning:
    """How a run goes about its work, not what it keeps: whether the bucket keeps object
    versions (None: ask it), the keys per DeleteObjects batch (at most 1,000), and who hears
    of the plan and the sweep (:mod:`lethe.progress`; a run in one process only)."""

    versioned: bool | None = None
    batch_keys: int = BATCH_KEYS
    progress: Progress | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """One run's parsed options (shared by :func:`lethe.gc.collect` and the workflow)."""

    retention: Retention
    grace: timedelta | None  # None: the table's gc_grace (its floor, see floor_grace)
    erasure_grace: timedelta
    dry_run: bool
    tuning: Tuning = Tuning()

    @property
    def floor(self) -> timedelta:
        """The grace once resolved by :func:`floor_grace` (a plan's options always are)."""
        if self.grace is None:
            raise errors.InvalidRequest("the GC grace is not resolved against the table yet")
        return self.grace


def options(
    retention: str | timedelta | Retention,
    grace: str | timedelta | float | None,
    erasure_grace: str | timedelta | float,
    *,
    dry_run: bool,
    tuning: Tuning | None = None,
) -> Options:
    """Parse a run's options; raises InvalidRequest on an unusable value."""
    return Options(
        Retention.parse(retention),
        None if grace is None else parse_duration(grace),
        parse_duration(erasure_grace),
        bool(dry_run),
        tuning or Tuning(),
    )


def _days(td: timedelta) -> str:
    return _fmt_duration(td, ("d", "h", "m"))


def floor_grace(opts: Options, floor: timedelta) -> Options:
    """``opts`` with its grace resolved against the table's ``gc_grace`` (``floor``): none
    given means the floor; a shorter one is refused (never raised silently): the table's
    writers may take that long to commit what they uploaded, so GC must not delete younger
    unreferenced objects."""
    if opts.grace is None:
        return dataclasses.replace(opts, grace=floor)
    if opts.grace < floor:
        raise errors.InvalidRequest(
            f"GC grace {_days(opts.grace)} is shorter than the table's gc_grace "
            f"{_days(floor)}, the floor: its writers may take that long to commit what "
            f"they uploaded, so GC keeps unreferenced objects at least that long. Ask for "
            f"{_days(floor)} or more, or leave the grace out (files an erasure "
            "superseded go after the erasure grace, whatever this grace)"
        )
    return opts


def as_utc(t: datetime | None) -> datetime | None:
    """``t`` as an aware UTC time (a naive one is taken to be UTC)."""
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def is_old(t: datetime | None, now: datetime, grace: timedelta, *, s3_time: bool = True) -> bool:
    """Whether ``t`` is older than ``grace`` at ``now``. A time S3 reports (LastModified,
    Initiated) is rounded up first: S3 truncates it to seconds (see :mod:`lethe.catalog.grace`); a
    commit time from a manifest is exact."""
    return t is not None and now - (round_up(t) if s3_time else t) >= grace
