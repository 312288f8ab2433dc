"""What the lake's calls return: per table and per request, counts and hashes only (never
a value, never a raw request id)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "LakeRequestResult",
    "LakeResumeResult",
    "LakeTableResult",
    "reasons",
]


@dataclass(frozen=True, slots=True)
class LakeTableResult:
    """One part of a request on one table. ``duplicate``: committed by an earlier run."""

    table: str
    part: int
    id_hash: str | None  # the table-level request hash (its receipts and splice jobs)
    state: Literal["committed", "pending", "failed"]
    version: int | None = None
    rows_deleted: int = 0  # rows this call hid (0 for a duplicate)
    duplicate: bool = False
    rows: int | None = None  # rows the table-level request hid, in this call or an earlier one
    files_spliced: int = 0  # files this call spliced in the table (for all its requests)
    spliced: bool | None = None  # erase: every splice done (None: not spliced in this call)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LakeRequestResult:
    """What :meth:`Lake.forget` did: per table, counts and hashes only."""

    id_hash: str
    kind: str
    mode: str
    values: int
    tables: tuple[LakeTableResult, ...] = ()
    duplicate: bool = False  # every table had committed it before this call
    error: str | None = None

    @property
    def complete(self) -> bool:
        """Every mapped table committed the request (hidden; erase: splices may follow)."""
        return self.error is None and all(t.state == "committed" for t in self.tables)

    @property
    def rows_deleted(self) -> int:
        return sum(t.rows_deleted for t in self.tables)


@dataclass(frozen=True, slots=True)
class LakeResumeResult:
    """What :meth:`Lake.resume_requests` did: how many requests had pending parts, and why
    each one that did not finish failed (id hash prefix and reason: no values)."""

    requests: int
    failed: tuple[str, ...] = ()
    values_deleted: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


def reasons(parts: Iterable[LakeTableResult]) -> str:
    """Why ``parts`` did not commit, each reason once (``"; "``-joined)."""
    return "; ".join(dict.fromkeys(p.error or p.state for p in parts))
