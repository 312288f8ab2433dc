"""Compaction's rewrite (DESIGN §5, step 2 of :mod:`lethe.maintenance.compaction`): one
group's live rows, DVs applied, read in file and row order (or the cluster order) and written
anew. A :class:`RewriteTask` is self-contained and JSON-serializable: the Spark job ships
it to an executor; :func:`~lethe.maintenance.compaction.compact` runs it in this process.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lethe import errors
from lethe.catalog.manifest import DataFile, SchemaVersion, TableProperties
from lethe.catalog.snapshot import Snapshot
from lethe.index.runs import stub_snapshot
from lethe.maintenance.clustering import ClusterSpec
from lethe.maintenance.clustering_io import rewrite_clustered
from lethe.maintenance.compaction_plan import CompactionPlan
from lethe.reading.rows import batches
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store, parse_s3_uri
from lethe.writing.writer import WriteOptions, write_files

__all__ = ["RewriteTask", "rewrite_tasks", "run_rewrite_task"]


class RewriteTask(BaseModel):
    """One group's rewrite, self-contained and JSON-serializable (shipped to an executor)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table_uri: str
    group: int
    schema_b64: str
    properties: TableProperties
    target_file_bytes: int
    files: tuple[DataFile, ...]
    cluster: bool = False
    schemas: tuple[SchemaVersion, ...] = ()  # the table's schema history (files of any)
    schema_id: int = 0  # the current schema, which the outputs are written under


def rewrite_tasks(plan: CompactionPlan, manifest: Snapshot) -> list[RewriteTask]:
    """The tasks of a plan (groups with live rows; fully deleted groups need no rewrite)."""
    table: dict[str, Any] = {  # what every task of the plan carries
        "table_uri": plan.table_uri,
        "schema_b64": manifest.schema_b64,
        "properties": manifest.properties,
        "target_file_bytes": plan.target_file_bytes,
        "schemas": manifest.manifest.schemas,
        "schema_id": manifest.current_schema_id,
    }
    return [
        RewriteTask(group=g.index, files=g.files, cluster=g.cluster, **table)
        for g in plan.groups
        if g.live_rows > 0
    ]


def run_rewrite_task(task: RewriteTask, *, store: S3Store | None = None) -> list[DataFile]:
    """Rewrite one group: its live rows, in order, into new data files (not committed).

    Reads every source pinned to its ETag with its DV applied (the plan snapshot's DV) and
    streams the rows through :func:`~lethe.writing.writer.write_files`.

    Raises:
        CorruptManifest: the rows written differ from the live rows the plan counted.
    """
    bucket, prefix = parse_s3_uri(task.table_uri)
    store = store if store is not None and store.bucket == bucket else S3Store(bucket)
    stub = stub_snapshot(
        task.schema_b64, task.properties, task.files, task.schemas, task.schema_id, kind="compact"
    )
    schema = stub.arrow_schema()
    p = task.properties
    opts = WriteOptions(
        key=p.key,
        target_file_bytes=task.target_file_bytes,
        row_group_bytes=p.row_group_bytes,
        schema_id=task.schema_id or None,
    )
    spec = ClusterSpec.of(p) if task.cluster else None
    if spec is not None:
        out = rewrite_clustered(store, prefix, stub, schema, opts, spec)
    else:
        out = write_files(store, prefix, batches(store, prefix, stub, schema, None), schema, opts)
    written = sum(f.rows for f in out)
    expected = sum(f.live_rows for f in task.files)
    if written != expected:
        store.delete_many([object_key(prefix, f.path) for f in out])
        raise errors.CorruptManifest(
            f"compaction group {task.group}: wrote {written} rows, the sources have {expected} live"
        )
    return out
