"""The I/O of a clustering rewrite (:mod:`lethe.maintenance.clustering`): write a group's live rows in
the cluster order, one window's files after another, and find where each live row went.

A clustering rewrite is a permutation, not an order-preserving copy: live row ``q`` of the
group (its sources' live rows in file and row order, as an order-preserving rewrite reads
them) lands at ``output_positions(...)[q]`` of the group's outputs. The permutation is a
function of the sort columns alone (:func:`~lethe.maintenance.clustering.cluster_order` is a stable
sort), so the commit recomputes it from those columns, read again pinned to each source's
ETag with the plan's DVs, only when a delete reached a source meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lethe.catalog.manifest import DataFile, TableProperties, schema_to_b64
from lethe.catalog.snapshot import Snapshot
from lethe.index.runs import stub_snapshot
from lethe.maintenance.clustering import SORT_ORDER_ID, ClusterSpec, cluster_order, subject_cuts
from lethe.reading.rows import batches
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store
from lethe.writing.writer import WriteOptions, write_files

__all__ = ["output_positions", "rewrite_clustered"]


def rewrite_clustered(
    store: S3Store,
    prefix: str,
    sources: Snapshot,
    schema: pa.Schema,
    opts: WriteOptions,
    spec: ClusterSpec,
) -> list[DataFile]:
    """Write the live rows of ``sources`` sorted by window then subject, each window into
    files of its own, cut after ``spec.file_subjects`` subjects (never inside a subject) or
    at ``opts.target_file_bytes``, whichever comes first; the files carry
    ``sort_order_id``. The group is held in memory (the planner bounds it). On failure the
    files written so far are removed."""
    t = pa.Table.from_batches(list(batches(store, prefix, sources, schema, None)), schema=schema)
    t = t.take(pa.array(cluster_order(t, spec)))
    bounds = subject_cuts(t, spec)
    out: list[DataFile] = []
    try:
        for a, b in pairwise(bounds):
            if b > a:
                out += write_files(store, prefix, t.slice(a, b - a), schema, opts)
    except BaseException:
        store.delete_many([object_key(prefix, f.path) for f in out])
        raise
    return [f.model_copy(update={"sort_order_id": SORT_ORDER_ID}) for f in out]


def output_positions(
    store: S3Store,
    prefix: str,
    files: Sequence[DataFile],
    schema: pa.Schema,
    key: str,
    spec: ClusterSpec,
) -> npt.NDArray[np.int64]:
    """Where each live row of ``files`` (with the DVs they carry, in file and row order)
    landed in a clustering rewrite of them: ``at[q]`` is the group-output position of live
    row ``q``. Reads only the sort columns."""
    cols = pa.schema([schema.field(c) for c in spec.sort_columns])
    snap = stub_snapshot(schema_to_b64(schema), TableProperties(key=key), files, kind="compact")
    t = pa.Table.from_batches(list(batches(store, prefix, snap, cols, None)), schema=cols)
    order = cluster_order(t, spec)
    at = np.empty(order.size, np.int64)
    at[order] = np.arange(order.size, dtype=np.int64)
    return at
