"""An erasure's splices fanned out: its pending files cut into groups, one splice job each.

The splice worker gets one job per erasure from the delete handler (or ``lethe purge
--queue-url``). Instead of splicing the erasure as one serial chain, that first job is cut
(:func:`plan_groups`) into groups of files, each within a byte budget that counts everything
a splice moves (:func:`splice_cost`: the edited row groups downloaded and re-uploaded, the
rest of the file copied server-side, the footer and page index read and rewritten); each
group goes back on the queue as its own job, so several invocations splice one erasure at
once. A group's invocation (:func:`splice_group`) splices its files (a few at a time,
:func:`lethe.erasure.splice_file.splice_file`) and commits them together
(:func:`lethe.erasure.erase.commit_splices`: the catalog's one commit loop settles the races between
groups). The erasure record turns ``spliced`` with the commit that removes its last target,
whichever group lands last.

A file whose splice alone exceeds the budget is a group of its own, spliced over several
invocations a prefix of its row groups at a time (the job carries the new file on); a row
group whose splice alone exceeds the budget is spliced alone, and the log says so. A group
whose file another commit replaced (a compaction moves erasure targets onto its new files)
adopts the erasure's pending files added after the groups were planned (``planned``), so no
target is left without a job. Nothing here holds a key or a row value: paths, counts and
the erasure's hash only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.erasure.erase import SpliceResult, commit_splices, splice_all
from lethe.erasure.erased import edited_groups, pending_paths

log = logging.getLogger(__name__)

__all__ = ["GroupResult", "plan_groups", "splice_cost", "splice_group"]

MAX_GROUP_FILES = 256  # files named by one job (a message stays far below SQS's 256 KiB)


def splice_cost(f: DataFile, row_groups: Iterable[int]) -> int:
    """Bytes one splice of ``row_groups`` of ``f`` moves, at most: each edited group
    downloaded and re-uploaded (re-encoded whole, the worst case), the file's other groups
    copied server-side, and the metadata (footer, page index: what is not a row group) read
    and written.

    >>> from lethe.catalog.manifest import RowGroupInfo
    >>> rg = [RowGroupInfo(rows=10, offset=4 + 100 * i, length=100) for i in range(3)]
    >>> f = DataFile(path="data/x.parquet", size=354, etag="e", rows=30, row_groups=rg,
    ...              added_version=1)
    >>> splice_cost(f, [1])  # 2 x 100 edited + 200 copied + 2 x 54 metadata
    508
    """
    edited = sum(f.row_groups[g].length for g in set(row_groups))
    data = sum(rg.length for rg in f.row_groups)
    meta = max(f.size - data, 0)
    return 2 * edited + (data - edited) + 2 * meta


def plan_groups(m: Snapshot, id_hash: str, budget: int) -> list[tuple[str, ...]]:
    """The pending files of erasure ``id_hash`` in ``m``, cut into groups of whole files
    whose :func:`splice_cost` sums to at most ``budget`` (a file over it alone, logged),
    at most :data:`MAX_GROUP_FILES` each, in the record's order."""
    paths = pending_paths(m, id_hash)
    live = m.files_at(paths)
    edited = edited_groups(m, [p for p in paths if p in live])
    out: list[tuple[str, ...]] = []
    cur: list[str] = []
    used = 0
    for p in paths:
        if p not in edited:
            continue
        cost = splice_cost(live[p], edited[p])
        if cur and (used + cost > budget or len(cur) >= MAX_GROUP_FILES):
            out.append(tuple(cur))
            cur, used = [], 0
        if cost > budget:
            log.info(
                "erasure %s: one file's splice moves %d bytes, over the budget of %d: "
                "its job splices it over several invocations",
                id_hash[:12],
                cost,
                budget,
            )
        cur.append(p)
        used += cost
    if cur:
        out.append(tuple(cur))
    return out


@dataclass(frozen=True, slots=True)
class GroupResult:
    """What one group's invocation did: the splices it committed, the files of the group
    still pending (the new file of a file spliced in part), whether the whole erasure is
    spliced now, and how many of the group's files another commit had replaced before it
    got to them (spliced by an earlier delivery of this job, or compacted), and how many
    pending files added since the plan it adopted for them."""

    splices: tuple[SpliceResult, ...]
    remaining: tuple[str, ...]
    erasure_complete: bool
    replaced: int
    adopted: int = 0


def _take(
    m: Snapshot, id_hash: str, todo: Sequence[str], budget: int
) -> list[tuple[DataFile, list[int]]]:
    """The work of one invocation: whole files of ``todo`` within ``budget`` (at least one),
    else a prefix of the first file's row groups (at least one group, logged when it alone
    is over the budget)."""
    live = m.files_at(todo)
    edited = edited_groups(m, todo)
    work: list[tuple[DataFile, list[int]]] = []
    used = 0
    for p in todo:
        f, groups = live[p], edited[p]
        cost = splice_cost(f, groups)
        if used + cost <= budget:
            work.append((f, groups))
            used += cost
            continue
        if work:
            break
        chosen: list[int] = []
        for g in groups:
            if chosen and splice_cost(f, [*chosen, g]) > budget:
                break
            chosen.append(g)
        if splice_cost(f, chosen) > budget:
            log.warning(
                "erasure %s: one row group of %d bytes alone moves %d bytes (with the copies "
                "and metadata of its file), over the splice budget of %d; spliced alone",
                id_hash[:12],
                f.row_groups[chosen[0]].length,
                splice_cost(f, chosen),
                budget,
            )
        work.append((f, chosen))
        break
    return work


def splice_group(
    ctx: TableContext,
    id_hash: str,
    files: Sequence[str],
    budget: int,
    *,
    planned: int | None = None,
) -> GroupResult:
    """Splice the pending row groups of ``files`` (one job's group) of erasure ``id_hash``
    within ``budget`` bytes moved (:func:`splice_cost`), commit them in one commit, and say
    what of the group is left. Files no longer pending (done by an earlier delivery of the
    job, or replaced) are skipped; when one was replaced, the erasure's pending files added
    after version ``planned`` (where the groups were cut) join the group. A failed splice
    raises after the others are committed."""
    m, _ = ctx.catalog.current()
    order = pending_paths(m, id_hash)
    pending = set(order)
    live = m.files_at(list(files))
    replaced = sum(1 for p in files if p not in live)
    adopted: list[str] = []
    if replaced and planned is not None:
        fresh = m.files_at([p for p in order if p not in files])
        adopted = [p for p, f in fresh.items() if f.added_version > planned]
        if adopted:
            log.info(
                "erasure %s: %d file(s) of a splice group were replaced; adopting %d pending "
                "file(s) added since version %d",
                id_hash[:12],
                replaced,
                len(adopted),
                planned,
            )
    files = [*files, *adopted]
    todo = [p for p in files if p in pending and (p in live or p in adopted)]
    splices: tuple[SpliceResult, ...] = ()
    if todo:
        work = _take(m, id_hash, todo, budget)
        spliced, failure = splice_all(TableContext(ctx.catalog, m), work)
        if spliced:
            m, splices = commit_splices(ctx, spliced)
        if failure is not None:  # what did splice is committed; the rest stays pending
            raise failure
    m, _ = ctx.catalog.current()
    pending = set(pending_paths(m, id_hash))
    carried = [s.new.path for s in splices if s.new is not None]
    remaining = tuple(p for p in dict.fromkeys([*files, *carried]) if p in pending)
    return GroupResult(splices, remaining, not pending, replaced, len(adopted))
