"""What a splice did to a file's row groups, and how often each fallback occurred
(issue 37 item 2: page splices should not fall back on files Lethe wrote; the counts say
how far from that a run is, never a value)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lethe.parquet.splice import GroupFate

__all__ = ["FileGranularity", "granularity", "merged"]


@dataclass(frozen=True, slots=True)
class FileGranularity:
    """How a spliced file's edited row groups were rewritten.

    ``level`` is ``"page"`` when every edited group that keeps rows was rewritten page by
    page (unchanged pages copied), ``"row_group"`` when each was re-encoded whole (or
    every row of the edited groups went), ``"mixed"`` otherwise; ``reasons`` are the
    distinct reasons for falling back (and for chunks re-encoded whole), never a value;
    ``fallbacks`` counts them: each group fallen back to the row-group splice, and each
    chunk of a page-level group re-encoded whole, by reason.
    """

    path: str
    level: str
    reasons: tuple[str, ...]
    fallbacks: tuple[tuple[str, int], ...] = ()


def granularity(path: str, fates: Sequence[GroupFate]) -> FileGranularity:
    """How the edited groups of the file at ``path`` were rewritten, and why any fell back.

    >>> g = granularity("f", [GroupFate(0, 0, 9, 8, True, "page", "1 of 2 ...", ("x",))])
    >>> g.level, g.fallbacks
    ('page', (('x', 1),))
    """
    kept = [g for g in fates if g.edited and g.level is not None]
    levels = {g.level for g in kept}
    level = "page" if levels == {"page"} else "row_group" if levels <= {"row_group"} else "mixed"
    reasons = tuple(dict.fromkeys(g.reason for g in kept if g.reason is not None))
    counts = Counter(why for g in kept for why in g.fallbacks)
    return FileGranularity(path, level, reasons, tuple(sorted(counts.items())))


def merged(files: Iterable[FileGranularity]) -> dict[str, int]:
    """How often each fallback reason occurred over ``files``."""
    out: Counter[str] = Counter()
    for f in files:
        out.update(dict(f.fallbacks))
    return dict(out)
