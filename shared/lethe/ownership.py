"""Ownership of files adopted in place (:mod:`lethe.adopt`): an erasure rewrites a file and
GC deletes the original, so a file Lethe does not own (``take_ownership=False``) refuses
every physical erasure that would touch it (reads and DV deletes still work)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lethe import errors
from lethe.manifest import DataFile
from lethe.snapshot import Snapshot

__all__ = ["check_erasable", "check_owned"]


def check_owned(files: Iterable[DataFile], what: str) -> None:
    """Refuse ``what`` when one of ``files`` is an adopted file Lethe does not own.

    Raises:
        InvalidRequest: naming the files (paths only), why, and how to go on.
    """
    unowned = sorted(f.path for f in files if f.owned is False)
    if unowned:
        raise errors.InvalidRequest(
            f"{what} would rewrite {len(unowned)} adopted file(s) Lethe does not own "
            f"({', '.join(unowned[:3])}{', ...' if len(unowned) > 3 else ''}): they were "
            "adopted with take_ownership=False, so Lethe may not replace or delete them. "
            "Re-adopt the source with ownership (Table.adopt(..., take_ownership=True)) or "
            "rewrite those files (lethe adopt --rewrite-unready) first; reads and delete() "
            "(deletion vectors) still work"
        )


def check_erasable(snap: Snapshot, filters: Any) -> None:
    """Refuse an erase of ``filters`` when a file that may hold matching rows is unowned
    (checked before anything is committed; by the manifest's stats, so conservative; only
    the segments that may match are read, as the erase's own plan reads them)."""
    from lethe.filters import normalize
    from lethe.scan import candidate_files

    dnf = normalize(filters, snap.arrow_schema())
    check_owned(candidate_files(snap, dnf), "erase")
