"""What a commit through the façade did (``Table.append``, ``commit_files``, a transaction,
a schema or properties change): :class:`CommitResult`, re-exported as ``lethe.CommitResult``."""

from __future__ import annotations

from dataclasses import dataclass, field

from lethe.storage.counters import IOCounters

__all__ = ["CommitResult"]


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What an append (or another file-adding commit) did."""

    version: int
    files_added: int
    rows_added: int
    attempts: int
    io: IOCounters = field(default_factory=IOCounters)
    committed: bool = True  # False: nothing to do (or another process had done it)
