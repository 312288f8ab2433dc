"""A source's history and metadata are adopted with it (issue 35 item 8): an Iceberg table's
earlier snapshots' files, metadata JSON, manifest lists and manifests (column bounds), and a
Delta table's removed files, ``_delta_log`` commits and checkpoints (statistics) hold everyone's
values. The plan (dry run too) lists them; adoption takes them as owned and superseded, so GC
deletes them after the grace and the source's folders end up holding only the live files.

Sources are written by the real writers: PyIceberg 0.12 (through its Glue catalog on moto) and
deltalake (delta-rs)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.glue import GlueCatalog

import lethe
from lethe.erasure.ownership import superseded_external
from lethe.gc import collect
from tests import engines
from tests.engines import delta_options

catalog = engines.catalog  # the Glue catalog fixture


def _data(start: int, n: int) -> pa.Table:
    return engines.dated_rows(start, n, customer_id=lambda ids: (ids % 20).astype(np.int32))


def _keys(s3: Any, bucket: str, prefix: str) -> set[str]:
    out = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.update(f"s3://{bucket}/{o['Key']}" for o in page.get("Contents", []))
    return out


def _external(t: lethe.Table) -> set[str]:
    return {f.path for f in t.manifest.files if f.path.startswith("s3://")}


def test_seam08_iceberg_history_is_planned_taken_and_retired(
    aws: Any, s3: Any, bucket: str, catalog: GlueCatalog
) -> None:
    """issue 35 item 8 (Iceberg): PyIceberg's copy-on-write delete keeps the pre-delete file in
    an earlier snapshot; it, the metadata JSONs, manifest lists and manifests are listed by
    the dry run, taken by the adoption and deleted by GC after the grace."""
    ice = catalog.create_table(f"db.h{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    ice.append(_data(0, 300))
    ice.append(_data(300, 60))
    ice.delete("id = 5")  # rewrites the file that held row 5: the old one stays in history
    loc = ice.location().removeprefix(f"s3://{bucket}/")
    before = _keys(s3, bucket, loc + "/")
    uri = f"s3://{bucket}/tables/ice"
    plan = lethe.Table.adopt(uri, ice.metadata_location, key="id", dry_run=True)
    assert isinstance(plan, lethe.AdoptPlan)
    live = {f.uri for f in plan.files}
    assert {h.uri for h in plan.history} == before - live  # everything else is history
    kinds = {h.what for h in plan.history}
    assert {
        "iceberg metadata json",
        "iceberg manifest list",
        "iceberg manifest",
        "earlier snapshot's data or delete file",
    } <= kinds, kinds
    assert "history and metadata" in plan.describe()
    t = lethe.Table.adopt(uri, ice.metadata_location, key="id")
    assert isinstance(t, lethe.Table) and t.scan().num_rows == 359
    taken = {a.uri for a in superseded_external(t.catalog) if a.kind == "history"}
    assert taken == {h.uri for h in plan.history}
    res = t.erase([("customer_id", "=", 7)], request_id="r7")
    assert res.rows_deleted == 18
    collect(t, now=datetime.now(UTC) + timedelta(days=40))
    t = lethe.Table.open(uri)
    # the source's folders hold only what the table still reads in place: no history left
    assert _keys(s3, bucket, loc + "/") == _external(t)
    assert t.scan().num_rows == 341
    assert t.scan(filters=[("customer_id", "=", 7)]).num_rows == 0


def test_seam08_delta_log_and_removed_files_are_planned_taken_and_retired(
    aws: Any, s3: Any, bucket: str
) -> None:
    """issue 35 item 8 (Delta): the ``_delta_log`` commits (add statistics), the checkpoint
    and the files a delete replaced are listed by the dry run, taken by the adoption and
    deleted by GC after the grace."""
    src = f"s3://{bucket}/delta/t{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    write_deltalake(src, _data(0, 100), storage_options=so)
    write_deltalake(src, _data(100, 50), storage_options=so, mode="append")
    d = DeltaTable(src, storage_options=so)
    d.delete("id < 10")
    d.create_checkpoint()
    root = src.removeprefix(f"s3://{bucket}/")
    before = _keys(s3, bucket, root + "/")
    uri = f"s3://{bucket}/tables/delta"
    plan = lethe.Table.adopt(uri, src, key="id", dry_run=True)
    assert isinstance(plan, lethe.AdoptPlan)
    assert {h.uri for h in plan.history} == before - {f.uri for f in plan.files}
    kinds = {h.what for h in plan.history}
    assert {"delta log commit", "delta checkpoint"} <= kinds, kinds
    assert "earlier snapshot's data or delete file" in kinds  # the file the delete replaced
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table) and t.scan().num_rows == 140
    # the grace counts from the adoption: a GC within it keeps the history
    collect(t, now=datetime.now(UTC) + timedelta(hours=1))
    assert _keys(s3, bucket, root + "/") == before
    collect(t, now=datetime.now(UTC) + timedelta(days=40))
    t = lethe.Table.open(uri)
    assert _keys(s3, bucket, root + "/") == _external(t)
    assert t.scan().num_rows == 140


def test_seam08_a_history_added_later_is_taken_by_the_next_adopt(
    aws: Any, s3: Any, bucket: str
) -> None:
    """issue 35 item 8: re-adopting a Delta table that went on (new commits) takes the new log
    objects too, and never the ones it took before."""
    src = f"s3://{bucket}/delta/t{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    write_deltalake(src, _data(0, 50), storage_options=so)
    uri = f"s3://{bucket}/tables/d2"
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table)
    first = {a.uri for a in superseded_external(t.catalog)}
    write_deltalake(src, _data(50, 10), storage_options=so, mode="append")
    plan = lethe.Table.adopt(uri, src, dry_run=True)
    assert isinstance(plan, lethe.AdoptPlan)
    assert len(plan.files) == 1 and plan.history and not {h.uri for h in plan.history} & first
    t2 = lethe.Table.adopt(uri, src)
    assert isinstance(t2, lethe.Table) and t2.scan().num_rows == 60
    assert first < {a.uri for a in superseded_external(t2.catalog)}
