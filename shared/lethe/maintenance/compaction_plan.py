"""Compaction's plan (pure: no I/O): which files to rewrite, in which groups, and which
untouched files' DVs to coalesce (DESIGN §5, step 1 of :mod:`lethe.maintenance.compaction`).

Files whose deleted fraction reaches ``min_deleted_fraction`` and files smaller than
``small_file_fraction`` of the target size are ordered by key and binned into groups of about
``target_file_bytes`` of live data; a table with ``cluster_by`` is grouped by time window
instead (:func:`lethe.maintenance.clustering.window_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lethe import errors
from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import from_json
from lethe.maintenance.clustering import ClusterSpec, window_groups

__all__ = ["CompactionGroup", "CompactionOptions", "CompactionPlan", "plan_compaction"]


@dataclass(frozen=True, slots=True)
class CompactionOptions:
    """What compaction rewrites.

    Attributes:
        min_deleted_fraction: A file whose deleted rows / rows reaches this is rewritten.
        small_file_fraction: A file smaller than this fraction of the target size is "small";
            small files are binned together (a lone small file without deletes is left alone).
        target_file_bytes: Output size; default the table's ``target_file_bytes``.
        coalesce_dv_containers: Coalesce the DVs of untouched files into one container when
            they are spread over at least this many containers (None: never).
        cluster: Lay the table out for forgetting (:mod:`lethe.maintenance.clustering`): every time
            window holding a file no clustering wrote is rewritten sorted by the subject.
            None (default): when the table has ``cluster_by``; False: bin by key as without.
        cluster_group_bytes: A clustering group (a run of windows rewritten in one task,
            held in memory) is closed at a window boundary once its files reach this size.
    """

    min_deleted_fraction: float = 0.2
    small_file_fraction: float = 0.5
    target_file_bytes: int | None = None
    coalesce_dv_containers: int | None = 8
    cluster: bool | None = None
    cluster_group_bytes: int = 512 << 20

    def __post_init__(self) -> None:
        if not 0.0 < self.min_deleted_fraction <= 1.0:
            raise errors.InvalidRequest("min_deleted_fraction must be in (0, 1]")
        if not 0.0 <= self.small_file_fraction <= 1.0:
            raise errors.InvalidRequest("small_file_fraction must be in [0, 1]")
        if self.target_file_bytes is not None and self.target_file_bytes <= 0:
            raise errors.InvalidRequest("target_file_bytes must be positive")
        if self.coalesce_dv_containers is not None and self.coalesce_dv_containers < 2:
            raise errors.InvalidRequest("coalesce_dv_containers must be at least 2 (or None)")


def _deleted_fraction(f: DataFile) -> float:
    return f.deleted_rows / f.rows if f.rows else 1.0


def _live_bytes(f: DataFile) -> float:
    return f.size * (f.live_rows / f.rows) if f.rows else 0.0


class _Total:
    """A read-only attribute: the sum of one attribute (by default its own name) of ``files``."""

    def __init__(self, attr: str = "") -> None:
        self.attr = attr

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = self.attr or name

    def __get__(self, obj: Any, owner: type | None = None) -> int:
        if obj is None:
            raise AttributeError(self.attr)  # on the class: no value
        return sum(getattr(f, self.attr) for f in obj.files)


@dataclass(frozen=True, slots=True)
class CompactionGroup:
    """Source files rewritten together, in this order, into one run of output files."""

    index: int
    files: tuple[DataFile, ...]
    reasons: tuple[str, ...]
    #: rewritten in the cluster order (window, subject) instead of file and row order
    cluster: bool = False

    rows = _Total()
    live_rows = _Total()
    deleted_rows = _Total()
    input_bytes = _Total("size")

    @property
    def estimated_bytes(self) -> int:
        return int(sum(_live_bytes(f) for f in self.files))


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction run will do, made from one snapshot (``base_version``)."""

    table_uri: str
    base_version: int
    target_file_bytes: int
    options: CompactionOptions
    groups: tuple[CompactionGroup, ...]
    coalesce: tuple[DataFile, ...] = ()
    dv_containers: int = 0
    cluster: ClusterSpec | None = None

    @property
    def empty(self) -> bool:
        return not self.groups and not self.coalesce

    @property
    def files(self) -> int:
        return sum(len(g.files) for g in self.groups)

    def describe(self) -> str:
        """A human-readable plan (what ``--dry-run`` prints)."""
        o = self.options
        lines = [
            f"compaction plan for {self.table_uri} at version {self.base_version} "
            f"(min deleted fraction {o.min_deleted_fraction:g}, small files < "
            f"{int(o.small_file_fraction * self.target_file_bytes):,} B, target "
            f"{self.target_file_bytes:,} B)"
        ]
        if not self.groups:
            lines.append("  no files to rewrite")
        if self.cluster is not None:
            c = self.cluster
            window = f" in windows of {c.window} of {c.time_column}"
            lines.append(
                f"  clustering by {', '.join(c.columns)}{window if c.window_seconds else ''}"
            )
        for g in self.groups:
            lines.append(
                f"  group {g.index}{' (cluster)' if g.cluster else ''}: {len(g.files)} files, {g.input_bytes:,} B, "
                f"{g.rows:,} rows of which {g.deleted_rows:,} deleted -> ~{g.estimated_bytes:,} B"
            )
            for f, why in zip(g.files, g.reasons, strict=True):
                lines.append(f"    {f.path}  {f.size:,} B  {f.rows:,} rows  {why}")
        if self.coalesce:
            lines.append(
                f"  coalesce the DVs of {len(self.coalesce)} untouched files from "
                f"{self.dv_containers} containers into 1"
            )
        elif self.dv_containers:
            lines.append(f"  DV containers of untouched files: {self.dv_containers} (left as is)")
        return "\n".join(lines)


def _sort_key(f: DataFile, key: str, key_type: Any) -> tuple[int, Any, str]:
    st = f.columns.get(key)
    if st is None or st.min is None:
        return (1, 0, f.path)
    try:
        return (0, from_json(st.min, key_type), f.path)
    except (TypeError, ValueError):
        return (1, 0, f.path)


def plan_compaction(
    manifest: Snapshot, options: CompactionOptions | None = None, *, table_uri: str = ""
) -> CompactionPlan:
    """Choose what to rewrite (pure: no I/O).

    Candidates are files with ``deleted/rows >= min_deleted_fraction`` (fully deleted files
    included: they are dropped without output) and small files. Candidates are ordered by
    their minimum key and binned greedily into groups of about ``target_file_bytes`` of live
    data. A group made of a single file that has nothing deleted is not worth rewriting and is
    dropped.

    Example:
        >>> from lethe.catalog.manifest import initial_manifest, TableProperties, DataFile, RowGroupInfo
        >>> import pyarrow as pa
        >>> m = initial_manifest(table_uuid="u", schema=pa.schema([("id", pa.int64())]),
        ...                      properties=TableProperties(key="id", target_file_bytes=100))
        >>> plan_compaction(Snapshot(m)).empty
        True
    """
    opts = options or CompactionOptions()
    target = opts.target_file_bytes or manifest.properties.target_file_bytes
    key_type = manifest.arrow_schema().field(manifest.key).type
    reasons = _candidates(manifest.files, opts, small_limit=opts.small_file_fraction * target)
    spec = ClusterSpec.of(manifest.properties) if opts.cluster is not False else None
    if opts.cluster and spec is None:
        raise errors.InvalidRequest("cluster=True needs a table with cluster_by")
    if spec is not None:
        dirty = {p: r for p, r in reasons.items() if not r.startswith("small")}
        found = window_groups(
            manifest.files,
            spec,
            manifest.arrow_schema(),
            dirty,
            max_group_bytes=opts.cluster_group_bytes,
        )
        groups = tuple(
            CompactionGroup(index=i, files=tuple(fs), reasons=tuple(why), cluster=True)
            for i, (fs, why) in enumerate(found)
        )
    else:
        candidates = sorted(
            (f for f in manifest.files if f.path in reasons),
            key=lambda f: _sort_key(f, manifest.key, key_type),
        )
        groups = _groups(_bins(candidates, target), reasons, opts)
    coalesce, containers = _dvs_to_coalesce(manifest.files, groups, opts)
    return CompactionPlan(
        table_uri, manifest.version, target, opts, groups, coalesce, containers, spec
    )


def _candidates(
    files: Sequence[DataFile], opts: CompactionOptions, *, small_limit: float
) -> dict[str, str]:
    """Why each candidate file would be rewritten (path -> reason); other files are absent."""
    reasons: dict[str, str] = {}
    for f in files:
        if f.owned is not None:  # adopted in place: never rewritten here (lethe.adopt)
            continue
        frac = _deleted_fraction(f)
        if f.live_rows == 0:
            reasons[f.path] = "all rows deleted"
        elif frac >= opts.min_deleted_fraction:
            reasons[f.path] = f"{frac:.0%} deleted"
        elif f.size < small_limit:
            reasons[f.path] = "small" + (f", {frac:.0%} deleted" if f.deleted_rows else "")
    return reasons


def _bins(candidates: Sequence[DataFile], target: int) -> list[list[DataFile]]:
    """Consecutive candidates binned greedily into about ``target`` bytes of live data."""
    bins: list[list[DataFile]] = []
    current: list[DataFile] = []
    size = 0.0
    for f in candidates:
        b = _live_bytes(f)
        if current and size + b > target * 1.1:
            bins.append(current)
            current, size = [], 0.0
        current.append(f)
        size += b
    if current:
        bins.append(current)
    return bins


def _groups(
    bins: Sequence[Sequence[DataFile]], reasons: Mapping[str, str], opts: CompactionOptions
) -> tuple[CompactionGroup, ...]:
    """The bins worth rewriting, numbered."""
    groups: list[CompactionGroup] = []
    for files in bins:
        if len(files) == 1 and files[0].deleted_rows == 0:
            continue  # a lone small file: rewriting it gains nothing
        if len(files) == 1 and _deleted_fraction(files[0]) < opts.min_deleted_fraction:
            continue
        groups.append(
            CompactionGroup(
                index=len(groups),
                files=tuple(files),
                reasons=tuple(reasons[f.path] for f in files),
            )
        )
    return tuple(groups)


def _dvs_to_coalesce(
    files: Sequence[DataFile], groups: Sequence[CompactionGroup], opts: CompactionOptions
) -> tuple[tuple[DataFile, ...], int]:
    """The untouched files whose DVs to coalesce (none unless they are spread over enough
    containers), and the number of containers they are spread over."""
    touched = {f.path for g in groups for f in g.files}
    untouched_dv = [
        f
        for f in files
        if f.path not in touched and f.dv is not None and f.dv.container is not None
    ]
    containers = len({f.dv.container for f in untouched_dv if f.dv is not None})
    coalesce: tuple[DataFile, ...] = ()
    if opts.coalesce_dv_containers is not None and containers >= opts.coalesce_dv_containers:
        coalesce = tuple(untouched_dv)
    return coalesce, containers
