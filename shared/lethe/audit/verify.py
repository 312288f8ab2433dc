"""``lethe verify``: every reference of a snapshot resolves and every DV matches its file;
a format-2 snapshot's segments exist and agree with their summaries; its index pieces exist
and (``deep``) their entries are exactly the covered files' rows (:mod:`lethe.index.verify`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lethe import errors
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.manifest import DataFile, SegmentSummary
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import summarize
from lethe.dv import store as dvstore
from lethe.index.verify import check_indexes
from lethe.reading.reader import FileHandle
from lethe.reading.scan import Projections

__all__ = ["VerifyReport", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    version: int
    files_checked: int
    dvs_checked: int
    problems: tuple[str, ...] = field(default_factory=tuple)
    segments_checked: int = 0
    index_pieces_checked: int = 0
    index_entries_checked: int = 0  # deep only

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(table: TableContext | HasContext, *, deep: bool = False) -> VerifyReport:
    """Check the snapshot: data files exist with the recorded size and ETag, their footers
    agree with the manifest (rows, row groups), DV blobs decode with the recorded checksum
    and cardinality, and every deleted position is inside its file; index pieces exist with
    their ETag and runs are well-formed; ``deep`` also decodes every piece and checks its
    entries against the covered files' rows (reads the indexed columns of those files).

    Example:
        >>> verify(lethe.Table.open("s3://bucket/events"), deep=True).ok  # doctest: +SKIP
        True
    """
    ctx = context_of(table)
    problems: list[str] = []
    dvs = 0
    m = ctx.snapshot
    seg_problems, files = _check_segments(m)
    problems.extend(seg_problems)
    for f in files:
        key = ctx.key_of(f.path)
        try:
            info = ctx.store.head(key)
        except errors.NotFound:
            problems.append(f"{f.path}: missing")
            continue
        if info.etag != f.etag or info.size != f.size:
            problems.append(
                f"{f.path}: ETag/size {info.etag}/{info.size} != manifest {f.etag}/{f.size}"
            )
            continue
        try:
            md = FileHandle(ctx.store, key, f).tail().arrow
        except errors.LetheError as e:
            problems.append(f"{f.path}: footer unreadable: {e}")
            continue
        if md.num_rows != f.rows or md.num_row_groups != len(f.row_groups):
            problems.append(
                f"{f.path}: footer has {md.num_rows} rows / {md.num_row_groups} groups, "
                f"manifest {f.rows} / {len(f.row_groups)}"
            )
        for i, rg in enumerate(f.row_groups):
            if i < md.num_row_groups and md.row_group(i).num_rows != rg.rows:
                problems.append(f"{f.path}: row group {i} rows differ from the manifest")
        if f.dv is not None:
            dvs += 1
            try:  # the blob's CRC and cardinality are checked against the manifest
                bm = dvstore.load(ctx.store, ctx.prefix, f.dv)
            except errors.LetheError as e:
                problems.append(f"{f.path}: DV unreadable: {e}")
                continue
            if len(bm) and bm.max() >= f.rows:
                problems.append(f"{f.path}: DV position {bm.max()} beyond the file's {f.rows} rows")
    ix = check_indexes(ctx.store, ctx.prefix, m, files, deep=deep)
    problems.extend(ix.problems)
    return VerifyReport(
        m.version, len(files), dvs, tuple(problems), len(m.segments), ix.pieces, ix.entries
    )


def _check_segments(m: Snapshot) -> tuple[list[str], list[DataFile]]:
    """Every segment loads, holds its summary's files, and its summary is what the files
    (with the DV overlay) say; no file is listed twice; the overlay names live files.
    Returns the problems and the files of the segments that could be read."""
    if not m.segmented:
        return [], list(m.files)
    problems: list[str] = []
    out: list[DataFile] = []
    schema = m.arrow_schema()
    # a summary's column stats are checked where pruning reads them: on the columns whose
    # id, name and type every schema shares (a summary written before a rename or a drop
    # keeps its old names, which pruning ignores)
    stable = Projections(m).stable

    def pruned(x: SegmentSummary) -> SegmentSummary:
        return x.model_copy(update={"columns": {c: v for c, v in x.columns.items() if c in stable}})

    seen: set[str] = set()
    for s in m.segments:
        try:
            files = m.segment_files(s)
        except errors.LetheError as e:
            problems.append(f"segment {s.path}: unreadable: {e}")
            continue
        want = summarize(s.id, s.path, files, schema, s.created_version)
        if pruned(want) != pruned(s):
            problems.append(f"segment {s.path}: summary differs from its files")
        dup = seen & {f.path for f in files}
        if dup:
            problems.append(f"segment {s.path}: {len(dup)} file(s) listed in another segment too")
        seen |= {f.path for f in files}
        out.extend(files)
    ids = {s.id for s in m.segments}
    if len(ids) != len(m.segments):
        problems.append("two segments share an id")
    stray = [o.path for o in m.dv_overlay if o.segment not in ids or o.path not in seen]
    if stray:
        problems.append(f"{len(stray)} DV overlay entries name no live file of their segment")
    return problems, out
