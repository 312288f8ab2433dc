"""A layout for forgetting: time windows, each sorted by the subject (``cluster_by``).

An event table written in time order spreads one person's rows over most of its files, so
erasing them costs about a copy-on-write of most of the table. A table created with
``cluster_by=("customer_id",)`` and ``cluster_window="1d"`` (from a time column) is laid out
by compaction (:mod:`lethe.maintenance.compaction`) as **time windows, each sorted by the subject**: the
rows of one window are sorted by the ``cluster_by`` columns (stable, so ties keep their
order) and written as the window's own files. One person's rows then sit in one file per
window (in a run of pages of that file), time-range scans and row TTL still prune by window,
and an erasure splices a few pages of one file per window.

This module is the pure part: the spec (:class:`ClusterSpec`, from the table's properties),
the window of a timestamp, the order a clustering rewrite writes rows in
(:func:`cluster_order`, recomputed at commit time to map concurrent deletes through the
permutation), and which files a compaction must re-cluster (:func:`window_groups`). A file a
clustering compaction wrote carries ``sort_order_id`` :data:`SORT_ORDER_ID`; the Iceberg view
publishes that sort order.

Example:
    >>> import pyarrow as pa
    >>> spec = ClusterSpec(columns=("c",), time_column="t", window_seconds=86400)
    >>> t = pa.table({"t": pa.array([86400_000_000, 0, 1], pa.timestamp("us")),
    ...               "c": [1, 2, 1]})
    >>> cluster_order(t, spec).tolist()   # window 0 (c=1, c=2), then window 1
    [2, 1, 0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lethe import errors
from lethe.catalog.grace import format_duration, parse_duration
from lethe.catalog.manifest import DataFile, TableProperties

__all__ = [
    "NO_WINDOW",
    "SORT_ORDER_ID",
    "ClusterSpec",
    "cluster_order",
    "cluster_properties",
    "file_windows",
    "is_clustered",
    "subject_cuts",
    "window_groups",
    "window_ids",
]

SORT_ORDER_ID = 1
"""The sort order a clustering compaction writes (Iceberg ``sort_order_id``; 0 is unsorted)."""
NO_WINDOW = np.iinfo(np.int64).max
"""The window of a row whose time is null (sorted last)."""

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """How a table clusters: ``columns`` (the subjects) within windows of ``window_seconds``
    of ``time_column`` (both None: one window, the whole table sorted by subject)."""

    columns: tuple[str, ...]
    time_column: str | None = None
    window_seconds: int | None = None
    file_subjects: int | None = None

    @classmethod
    def of(cls, props: TableProperties) -> ClusterSpec | None:
        """The table's clustering (None: the table does not cluster)."""
        if not props.cluster_by:
            return None
        return cls(
            tuple(props.cluster_by),
            props.cluster_time_column,
            props.cluster_window_seconds,
            props.cluster_file_subjects,
        )

    @property
    def window(self) -> str:
        """The window as written (``1d``; ``""`` without one)."""
        return format_duration(self.window_seconds) if self.window_seconds else ""

    @property
    def sort_columns(self) -> tuple[str, ...]:
        """Every column the order reads (the time column first)."""
        return ((self.time_column,) if self.time_column else ()) + self.columns


def cluster_properties(
    schema: pa.Schema,
    cluster_by: Sequence[str] | str | None,
    cluster_window: str | tuple[str, str] | None,
    file_subjects: int | None = None,
) -> dict[str, object]:
    """Validated :class:`~lethe.catalog.manifest.TableProperties` fields for ``Table.create``.

    ``cluster_window`` is a duration (``"1d"``) of the schema's only timestamp or date
    column, or ``(column, duration)``; ``file_subjects`` bounds the subjects of a file.

    Raises:
        InvalidRequest: an unknown or unorderable column, a window without ``cluster_by``, a
            window on a column that is not a timestamp or date, or an ambiguous time column.

    Example:
        >>> s = pa.schema([("t", pa.timestamp("us")), ("c", pa.int64())])
        >>> cluster_properties(s, ["c"], "1d")
        {'cluster_by': ('c',), 'cluster_time_column': 't', 'cluster_window_seconds': 86400}
    """
    if cluster_by is None or (not isinstance(cluster_by, str) and not cluster_by):
        if cluster_window is not None or file_subjects is not None:
            raise errors.InvalidRequest("cluster_window needs cluster_by (the subject columns)")
        return {}
    cols = (cluster_by,) if isinstance(cluster_by, str) else tuple(cluster_by)
    for c in cols:
        if schema.get_field_index(c) < 0:
            raise errors.InvalidRequest(f"cluster_by column {c!r} is not in the schema")
        t = schema.field(c).type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):
            raise errors.InvalidRequest(f"cluster_by column {c!r} ({t}) cannot be sorted")
    if len(set(cols)) != len(cols):
        raise errors.InvalidRequest("cluster_by names a column twice")
    out: dict[str, object] = {"cluster_by": cols}
    if file_subjects is not None:
        if file_subjects <= 0:
            raise errors.InvalidRequest("cluster_file_subjects must be positive")
        out["cluster_file_subjects"] = file_subjects
    if cluster_window is None:
        return out
    column, duration = _window_column(schema, cluster_window)
    seconds = int(parse_duration(duration).total_seconds())
    if seconds <= 0:
        raise errors.InvalidRequest("cluster_window must be at least one second")
    out["cluster_time_column"] = column
    out["cluster_window_seconds"] = seconds
    return out


def _window_column(schema: pa.Schema, window: str | tuple[str, str]) -> tuple[str, str]:
    """The time column and duration of a ``cluster_window`` argument."""
    if isinstance(window, tuple):
        column, duration = window
        if schema.get_field_index(column) < 0:
            raise errors.InvalidRequest(f"cluster_window column {column!r} is not in the schema")
        if not _is_time(schema.field(column).type):
            raise errors.InvalidRequest(
                f"cluster_window column {column!r} is {schema.field(column).type}, "
                "not a timestamp or date"
            )
        return column, duration
    times = [f.name for f in schema if _is_time(f.type)]
    if len(times) != 1:
        raise errors.InvalidRequest(
            f"cluster_window={window!r} needs the time column: the schema has "
            f"{len(times)} timestamp/date columns {times}; pass (column, {window!r})"
        )
    return times[0], window


def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t))


def _window_of_raw(raw: int, t: pa.DataType, seconds: int) -> int:
    """The window of a raw temporal value (the manifest's JSON form: the type's integer)."""
    if pa.types.is_date32(t):
        return (raw * 86_400) // seconds
    per = 1_000 if pa.types.is_date64(t) else _PER_SECOND[t.unit]
    return raw // (seconds * per)


def window_ids(table: pa.Table, spec: ClusterSpec) -> npt.NDArray[np.int64]:
    """Each row's window (:data:`NO_WINDOW` for a null time; all 0 without windows)."""
    if spec.time_column is None or spec.window_seconds is None:
        return np.zeros(table.num_rows, np.int64)
    col = table.column(spec.time_column).combine_chunks()
    t = col.type
    raw = col.cast(pa.int32() if pa.types.is_date32(t) else pa.int64()).cast(pa.int64())
    values = raw.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    ids: npt.NDArray[np.int64]
    if pa.types.is_date32(t):
        ids = (values * 86_400) // spec.window_seconds
    else:
        per = 1_000 if pa.types.is_date64(t) else _PER_SECOND[t.unit]
        ids = values // (spec.window_seconds * per)
    if col.null_count:
        ids[np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)] = NO_WINDOW
    return ids


def cluster_order(table: pa.Table, spec: ClusterSpec) -> npt.NDArray[np.int64]:
    """The row order of a clustering rewrite: by window, then by the subject columns
    (ascending, nulls last), ties in their input order (a stable sort: the same input always
    gives the same order, which the commit relies on to map concurrent deletes)."""
    keys = pa.table(
        {
            "__window": pa.array(window_ids(table, spec)),
            **{f"__c{i}": table.column(c) for i, c in enumerate(spec.columns)},
        }
    )
    order = pc.sort_indices(keys, sort_keys=[(n, "ascending", "at_end") for n in keys.column_names])
    return np.asarray(order.to_numpy(zero_copy_only=False), np.int64)


def subject_cuts(table: pa.Table, spec: ClusterSpec) -> list[int]:
    """Where to cut rows sorted in the cluster order into files: at every window change,
    and within a window after every ``spec.file_subjects`` subjects (a subject is a run of
    equal ``columns`` values), so no subject is split across files. Returns the cut
    positions, 0 and ``num_rows`` included.

    Example:
        >>> t = pa.table({"c": [1, 1, 2, 3, 3, 4]})
        >>> subject_cuts(t, ClusterSpec(columns=("c",), file_subjects=2))
        [0, 3, 6]
    """
    n = table.num_rows
    if n == 0:
        return [0]
    win = window_ids(table, spec)
    change = np.zeros(n, bool)
    change[0] = True
    change[1:] |= win[1:] != win[:-1]
    window_starts = change.copy()
    for c in spec.columns:
        col = table.column(c).combine_chunks()
        nulls = np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
        same = pc.equal(col.slice(1), col.slice(0, n - 1)).fill_null(False)
        differs = ~np.asarray(same.to_numpy(zero_copy_only=False), bool)
        differs &= ~(nulls[1:] & nulls[:-1])  # null to null: the same subject
        change[1:] |= differs
    if spec.file_subjects is None:
        return [*np.flatnonzero(window_starts).tolist(), n]
    cuts: list[int] = []
    starts = np.flatnonzero(change)
    ws = np.flatnonzero(window_starts)
    for i, w0 in enumerate(ws.tolist()):
        w1 = int(ws[i + 1]) if i + 1 < ws.size else n
        subjects = starts[(starts >= w0) & (starts < w1)]
        cuts += subjects[:: spec.file_subjects].tolist()
    return [*cuts, n]


def file_windows(f: DataFile, spec: ClusterSpec, schema: pa.Schema) -> tuple[int, int] | None:
    """The first and last window a file's rows fall in, from its statistics (None: unknown,
    e.g. no statistics or null times)."""
    if spec.time_column is None or spec.window_seconds is None:
        return (0, 0)
    st = f.columns.get(spec.time_column)
    if st is None or st.min is None or st.max is None or st.null_count:
        return None
    t = schema.field(spec.time_column).type
    lo, hi = st.min, st.max
    if not isinstance(lo, int) or not isinstance(hi, int):
        return None
    return _window_of_raw(lo, t, spec.window_seconds), _window_of_raw(hi, t, spec.window_seconds)


def is_clustered(f: DataFile) -> bool:
    """Whether a clustering compaction wrote ``f`` (its rows are one window, sorted)."""
    return f.sort_order_id == SORT_ORDER_ID


def window_groups(
    files: Sequence[DataFile],
    spec: ClusterSpec,
    schema: pa.Schema,
    dirty: Mapping[str, str],
    *,
    max_group_bytes: int | None = None,
) -> list[tuple[list[DataFile], list[str]]]:
    """The files a clustering compaction rewrites, as groups with each file's reason.

    A window needs clustering when it holds a file no clustering wrote, or a file in
    ``dirty`` (path -> reason: enough deleted rows). Windows are chained while a file spans
    them (time-ordered files straddle a boundary), and every file of a chained window is
    rewritten with it, so each window ends as sorted files of its own; a chain is cut at a
    file once it holds ``max_group_bytes`` (the rewrite holds a group in memory), so a
    window cut there may keep two runs of sorted files. Files whose window is
    unknown (no statistics, null times) form one last group. Clustered files are never
    rewritten for being small: a window is as large as its rows.
    """
    known: list[tuple[int, int, DataFile]] = []
    unknown: list[DataFile] = []
    for f in files:
        w = file_windows(f, spec, schema)
        if w is None:
            unknown.append(f)
        else:
            known.append((w[0], w[1], f))
    known.sort(key=lambda x: (x[0], x[1], x[2].path))
    groups: list[list[DataFile]] = []
    first = last = size = 0
    for lo, hi, f in known:
        full = max_group_bytes is not None and size >= max_group_bytes and lo > first
        if groups and lo <= last and not full:
            groups[-1].append(f)
            last, size = max(last, hi), size + f.size
        else:
            groups.append([f])
            first, last, size = lo, hi, f.size
    if unknown:
        groups.append(unknown)

    def reason(f: DataFile) -> str | None:
        if f.path in dirty:
            return dirty[f.path]
        return None if is_clustered(f) else "not clustered"

    out: list[tuple[list[DataFile], list[str]]] = []
    for g in groups:
        why = [reason(f) for f in g]
        if any(why):
            out.append((g, [w or "window re-clustered" for w in why]))
    return out
