"""Adopted files whose column names differ from the table's (issue 28): a Delta table
delta-rs wrote with column mapping (files name columns ``col-<uuid>``, with field ids) and
an Iceberg table PyIceberg wrote, then renamed a column of (files keep the old name, with
field ids), each adopted in place, read back exactly (filters and lookups included), a
person erased, GC run, the whole bucket audited, read again; and the Iceberg view of the
mapped table read by PyIceberg."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import bucket_objects
from deltalake import write_deltalake

import lethe
from lethe.audit.verify import verify
from lethe.catalog.schemas import ALIASES
from lethe.gc import collect
from lethe.iceberg import publish
from lethe.maintenance.compaction import CompactionOptions
from tests.engines import delta_options, glue_catalog, iceberg_view


def _data(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "customer_id": pa.array((ids % 17).astype(np.int32)),
            "note": pa.array([f"note-{i:06d}" for i in ids.tolist()]),
        }
    )


def _rows(t: pa.Table, names: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    n = names or {}
    cols = [n.get(c, c) for c in ("id", "customer_id", "note")]
    return sorted(zip(*(t[c].to_pylist() for c in cols), strict=True))


def _holders(s3: Any, bucket: str, payloads: list[str]) -> list[str]:
    """Every object of the bucket holding one of ``payloads``: Parquet objects decoded
    (any string column, whatever the files name it: they may be compressed), every object
    searched for the bytes."""
    out = []
    for key, body, t in bucket_objects(s3, bucket):
        cols = [c for c in t.columns if pa.types.is_string(c.type)] if t is not None else []
        if any(pc.any(pc.is_in(c, pa.array(payloads))).as_py() for c in cols) or any(
            p.encode() in body for p in payloads
        ):
            out.append(key)
    return out


def _erase_and_audit(s3: Any, bucket: str, uri: str, written: pa.Table, **names: str) -> None:
    """Erase customer 5 from the adopted table at ``uri``, GC, audit every object of the
    bucket for their notes, read the rest back exactly."""
    t = lethe.Table.open(uri)
    cid, note = names.get("customer_id", "customer_id"), names.get("note", "note")
    gone = pc.equal(written["customer_id"], 5)
    payloads = written.filter(gone)["note"].to_pylist()
    assert _holders(s3, bucket, payloads)  # the audit sees them before
    got = t.scan(filters=[(cid, "=", 5)])
    assert got.num_rows == len(payloads) > 0
    assert sorted(got[note].to_pylist()) == sorted(payloads)
    one = t.lookup(int(written["id"][7].as_py()))  # pruned by the key's stats, pages
    assert one[note].to_pylist() == [written["note"][7].as_py()]
    report = verify(t, deep=True)
    assert report.ok, report.problems
    res = t.erase([(cid, "=", 5)], request_id="ticket-5")
    assert res.rows_deleted == len(payloads) and res.complete
    collect(t, now=datetime.now(UTC) + timedelta(days=30))
    assert _holders(s3, bucket, payloads) == []
    t = lethe.Table.open(uri)
    want = {"id": "id", "customer_id": cid, "note": note}
    assert _rows(t.scan(), want) == _rows(written.filter(pc.invert(gone)))
    assert t.scan(filters=[(cid, "=", 5)]).num_rows == 0
    assert verify(t, deep=True).ok


def test_a_delta_table_with_column_mapping_is_adopted_read_and_erased(
    aws: Any, s3: Any, bucket: str
) -> None:
    src = f"s3://{bucket}/delta/mapped{uuid.uuid4().hex[:6]}"
    written = pa.concat_tables([_data(0, 60), _data(60, 60)])
    write_deltalake(
        src, _data(0, 60), storage_options=delta_options(aws),
        configuration={"delta.columnMapping.mode": "name"},
    )  # fmt: skip
    write_deltalake(src, _data(60, 60), storage_options=delta_options(aws), mode="append")
    # the files name their columns physically (delta-rs 1.6 reads them back as nulls)
    key = next(
        o["Key"]
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=src.split("/", 3)[3])["Contents"]
        if o["Key"].endswith(".parquet")
    )
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert all(n.startswith("col-") for n in pq.read_schema(pa.BufferReader(body)).names)
    uri = f"s3://{bucket}/tables/mapped"
    t = lethe.Table.adopt(uri, src + "/", key="id", indexes=("customer_id",))
    assert isinstance(t, lethe.Table)
    assert t.schema.names == ["id", "customer_id", "note"]
    assert all(ALIASES in (f.metadata or {}) for f in t.schema)  # the physical names
    assert _rows(t.scan()) == _rows(written)
    assert all(t.manifest.files[0].columns[c].min is not None for c in ("id", "note"))
    r = publish(t.catalog, t.manifest, format_version=3)
    st = iceberg_view(aws, r.uri)
    assert _rows(st.scan().to_arrow()) == _rows(written)
    # the view's name mapping carries the physical names (for engines reading files by name)
    mapping = {
        e["field-id"]: e["names"]
        for e in json.loads(st.metadata.properties["schema.name-mapping.default"])
    }
    assert all(len(ns) == 2 and ns[1].startswith("col-") for ns in mapping.values())
    _erase_and_audit(s3, bucket, uri, written)
    # the spliced files keep the physical names: backfill an index, compact, read again
    t = lethe.Table.open(uri)
    assert any(f.mapped for f in t.manifest.files)
    t.create_index("note")
    left = written.filter(pc.not_equal(written["customer_id"], 5))
    assert verify(t, deep=True).ok
    t.delete([("note", "=", left["note"][3].as_py())])
    t.compact(CompactionOptions(min_deleted_fraction=0.001, small_file_fraction=1.0))
    t = lethe.Table.open(uri)
    assert not any(f.mapped for f in t.manifest.files)  # rewritten under the table's names
    want = pa.concat_tables([left.slice(0, 3), left.slice(4)])
    assert _rows(t.scan()) == _rows(want)
    assert t.scan(filters=[("note", "=", left["note"][9].as_py())]).num_rows == 1
    assert verify(t, deep=True).ok
    r = publish(t.catalog, t.manifest, format_version=3)
    st = iceberg_view(aws, r.uri)
    assert _rows(st.scan().to_arrow()) == _rows(want)


def test_an_iceberg_table_with_a_renamed_column_is_adopted_read_and_erased(
    aws: Any, s3: Any, bucket: str
) -> None:
    cat = glue_catalog(aws, bucket)
    ice = cat.create_table(f"db.r{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    ice.append(_data(0, 80))
    with ice.update_schema() as u:
        u.rename_column("customer_id", "client")
        u.rename_column("note", "remark")
    ice = cat.load_table(ice.name())
    ice.append(_data(80, 40).rename_columns(["id", "client", "remark"]))
    written = pa.concat_tables([_data(0, 80), _data(80, 40)])
    uri = f"s3://{bucket}/tables/renamed"
    t = lethe.Table.adopt(uri, ice.metadata_location, key="id", indexes=("client",))
    assert isinstance(t, lethe.Table)
    assert t.schema.names == ["id", "client", "remark"]
    names = {"customer_id": "client", "note": "remark"}
    assert _rows(t.scan(), names) == _rows(written)
    assert _rows(ice.scan().to_arrow(), names) == _rows(written)  # as PyIceberg reads it
    _erase_and_audit(s3, bucket, uri, written, customer_id="client", note="remark")


@pytest.mark.parametrize("ids", [True, False])
def test_a_file_is_read_by_id_or_by_alias(ids: bool) -> None:
    """The projection of an adopted file: by field id when its ids are the table's, else by
    the table's aliases (a file without ids)."""
    from lethe.catalog.schemas import FIELD_ID, Projection

    target = pa.schema(
        [pa.field("a", pa.int64(), metadata={FIELD_ID: b"1", ALIASES: b'["col-a"]'}),
         pa.field("b", pa.string(), metadata={FIELD_ID: b"2"})]
    )  # fmt: skip
    meta = (lambda i: {FIELD_ID: str(i).encode()}) if ids else (lambda i: None)
    file = pa.schema([pa.field("old_b", pa.string(), metadata=meta(2)),
                      pa.field("col-a", pa.int64(), metadata=meta(1))])  # fmt: skip
    p = Projection(target, {f.name: f for f in target}).within(file)
    assert p.file_column("a") == "col-a"
    assert p.file_column("b") == ("old_b" if ids else None)  # no alias: missing without ids
    got = p.apply(pa.table({"old_b": ["x"], "col-a": [7]}))
    assert got.to_pylist() == [{"a": 7, "b": "x" if ids else None}]


def test_a_second_mapped_delta_table_adopted_into_the_table_reads_by_field_id(
    aws: Any, s3: Any, bucket: str
) -> None:
    """Another Delta table (other physical names, the same field ids) adopted into an existing
    table: its files are read by their ids; the first table's names are the aliases."""
    cfg = {"delta.columnMapping.mode": "name"}
    one, two = (f"s3://{bucket}/delta/{n}{uuid.uuid4().hex[:6]}" for n in ("a", "b"))
    write_deltalake(one, _data(0, 30), storage_options=delta_options(aws), configuration=cfg)
    write_deltalake(two, _data(30, 30), storage_options=delta_options(aws), configuration=cfg)
    uri = f"s3://{bucket}/tables/two"
    lethe.Table.adopt(uri, one + "/", key="id")
    t = lethe.Table.adopt(uri, two + "/", key="id")
    assert isinstance(t, lethe.Table)
    assert len(t.manifest.files) == 2 and all(f.mapped for f in t.manifest.files)
    assert _rows(t.scan()) == _rows(_data(0, 60))
    assert t.scan(filters=[("note", "=", "note-000042")])["id"].to_pylist() == [42]


def test_files_without_field_ids_are_read_by_their_physical_names(
    aws: Any, s3: Any, bucket: str, tmp_path: Any
) -> None:
    """A Delta table with column mapping whose files carry no field ids (delta-rs writes
    ids; here its log is kept and each data file rewritten by pyarrow without them, the
    ``add`` action's size updated: what a writer that omits ids makes): Lethe reads them by
    the physical names the table records, and so does PyIceberg through the view's name
    mapping; an erasure removes a person from them."""
    local = tmp_path / "delta"
    write_deltalake(str(local), _data(0, 90), configuration={"delta.columnMapping.mode": "name"})
    (log,) = (local / "_delta_log").glob("*.json")
    actions = [json.loads(line) for line in log.read_text().splitlines() if line]
    for a in actions:
        if "add" in a:
            path = local / a["add"]["path"]
            t = pq.read_table(path)
            plain = pa.schema([f.remove_metadata() for f in t.schema])
            pq.write_table(t.cast(plain), path, compression="none")
            a["add"]["size"] = path.stat().st_size
            assert all(f.metadata is None for f in pq.read_schema(path))
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    prefix = f"delta/noids{uuid.uuid4().hex[:6]}"
    for p in sorted(local.rglob("*")):
        if p.is_file():
            key = f"{prefix}/{p.relative_to(local).as_posix()}"
            s3.put_object(Bucket=bucket, Key=key, Body=p.read_bytes())
    uri = f"s3://{bucket}/tables/noids"
    t = lethe.Table.adopt(uri, f"s3://{bucket}/{prefix}/", key="id", indexes=("customer_id",))
    assert isinstance(t, lethe.Table)
    assert all(f.mapped for f in t.manifest.files)
    assert _rows(t.scan()) == _rows(_data(0, 90))
    r = publish(t.catalog, t.manifest, format_version=2)
    st = iceberg_view(aws, r.uri)
    assert _rows(st.scan().to_arrow()) == _rows(_data(0, 90))  # by the name mapping
    _erase_and_audit(s3, bucket, uri, _data(0, 90))
