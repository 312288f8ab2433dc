"""``lethe verify``: every reference of a snapshot resolves and every DV matches its file."""

from __future__ import annotations

from dataclasses import dataclass, field

from lethe import errors
from lethe.table import Table

__all__ = ["VerifyReport", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    version: int
    files_checked: int
    dvs_checked: int
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(table: Table) -> VerifyReport:
    """Check the snapshot: data files exist with the recorded size and ETag, their footers
    agree with the manifest (rows, row groups), DV blobs decode with the recorded checksum
    and cardinality, and every deleted position is inside its file."""
    from lethe.deletes import load_dv

    problems: list[str] = []
    dvs = 0
    m = table.manifest
    for f in m.files:
        key = table.key_of(f.path)
        try:
            info = table.store.head(key)
        except errors.NotFound:
            problems.append(f"{f.path}: missing")
            continue
        if info.etag != f.etag or info.size != f.size:
            problems.append(
                f"{f.path}: ETag/size {info.etag}/{info.size} != manifest {f.etag}/{f.size}"
            )
            continue
        try:
            md = table._handle(f).tail().arrow
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
            try:
                bm = load_dv(table, f.dv)
            except errors.LetheError as e:
                problems.append(f"{f.path}: DV unreadable: {e}")
                continue
            if len(bm) != f.dv.cardinality:
                problems.append(
                    f"{f.path}: DV has {len(bm)} positions, manifest says {f.dv.cardinality}"
                )
            if len(bm) and bm.max() >= f.rows:
                problems.append(f"{f.path}: DV position {bm.max()} beyond the file's {f.rows} rows")
    return VerifyReport(m.version, len(m.files), dvs, tuple(problems))
