"""Manifest format: encode/decode round trip, validation, and the pure commit transforms."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lethe import errors
from lethe.catalog.manifest import (
    DataFile,
    DVRef,
    Operation,
    RowGroupInfo,
    TableProperties,
    decode_head,
    decode_manifest,
    decode_segment,
    encode_manifest,
    encode_segment,
    initial_manifest,
    request_hash,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import apply_append, apply_dv_updates, apply_replace

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
scalars = st.one_of(st.none(), st.integers(-(2**62), 2**62), st.text(max_size=4))


@st.composite
def data_files(draw: st.DrawFn, idx: int | None = None) -> DataFile:
    n_rg = draw(st.integers(0, 3))
    rgs = tuple(
        RowGroupInfo(
            rows=draw(st.integers(0, 10_000)),
            offset=draw(st.integers(4, 10**9)),
            length=draw(st.integers(0, 10**8)),
            key_min=draw(scalars),
            key_max=draw(scalars),
        )
        for _ in range(n_rg)
    )
    rows = sum(r.rows for r in rgs)
    dv = None
    if rows and draw(st.booleans()):
        dv = DVRef(
            container=f"tombstone/x/{draw(st.uuids()).hex}.puffin",
            offset=draw(st.integers(4, 1000)),
            length=draw(st.integers(12, 1000)),
            cardinality=draw(st.integers(1, rows)),
            crc32=draw(st.integers(0, 2**32 - 1)),
        )
    return DataFile(
        path=f"data/{draw(st.uuids()).hex}.parquet",
        size=draw(st.integers(0, 2**40)),
        etag='"' + draw(st.binary(min_size=16, max_size=16)).hex() + '"',
        rows=rows,
        row_groups=rgs,
        dv=dv,
        added_version=draw(st.integers(0, 1000)),
        sorted_by_key=draw(st.booleans()),
    )


def base(**kw: object) -> Snapshot:
    return Snapshot(
        initial_manifest(table_uuid="u1", schema=SCHEMA, properties=TableProperties(key="id"), **kw)  # type: ignore[arg-type]
    )


@given(st.lists(data_files(), max_size=6, unique_by=lambda f: f.path))
def test_encode_decode_roundtrip(files: list[DataFile]) -> None:
    m = apply_append(base(), files, Operation(kind="append", rows_added=sum(f.rows for f in files)))
    again = decode_manifest(encode_manifest(m.manifest))
    assert again == m.manifest
    assert again.arrow_schema() == SCHEMA
    assert again.version == 1 and again.previous == 0
    assert again.layout == "segmented" and again.format_version == 2
    segs = m.pending_segments()
    assert len(segs) == (1 if files else 0) and set(segs) == {s.path for s in m.segments}
    for path, seg in segs.items():
        assert decode_segment(encode_segment(seg), table_uuid="u1") == seg
        assert path.startswith("manifest/segments/v00000001-")
    assert [f.path for f in m.files] == [f.path for f in files]


@pytest.mark.parametrize(
    "raw, needle",
    [
        (b"", "not valid JSON"),
        (b'{"format": "lethe.manifest", "format_versi', "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"format": "delta"}', "not a Lethe manifest"),
        (
            b'{"format": "lethe.manifest", "format_version": 1, "version": -1}',
            "fails validation",
        ),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
    ],
)
def test_corrupt_manifest_is_typed(raw: bytes, needle: str) -> None:
    with pytest.raises(errors.CorruptManifest, match=needle):
        decode_manifest(raw)


def test_a_newer_format_is_unsupported_not_corrupt() -> None:
    """Issue 36: a manifest a newer Lethe wrote is not corrupt: ``UnsupportedFormat``."""
    with pytest.raises(errors.UnsupportedFormat, match="format version 99 is newer"):
        decode_manifest(b'{"format": "lethe.manifest", "format_version": 99}')


def test_the_manifest_format_name_is_the_one_tables_were_written_with() -> None:
    """The re-layering (issue 38, item 1) renamed the on-bucket ``format`` of a manifest to
    ``lethe.catalog.manifest`` with the module: every table written before could no longer
    be opened ("not a Lethe manifest"), and older Lethes refused the new ones. The format is
    ``lethe.manifest`` (docs/format.md §3), whatever module holds the models."""
    written_before = json.dumps(
        {
            "format": "lethe.manifest",
            "format_version": 2,
            "layout": "segmented",
            "table_uuid": "u1",
            "version": 0,
            "previous": None,
            "commit_id": "c0",
            "created_at": "2026-01-01T00:00:00Z",
            "operation": {"kind": "create"},
            "schema_b64": base().schema_b64,
            "properties": {"key": "id"},
        }
    ).encode()
    assert decode_manifest(written_before).table_uuid == "u1"
    assert json.loads(encode_manifest(base().manifest))["format"] == "lethe.manifest"
    # tables written while the name was wrong still open, and their next version is right
    written_since = written_before.replace(b'"lethe.manifest"', b'"lethe.catalog.manifest"')
    read = decode_manifest(written_since)
    assert read.table_uuid == "u1"
    assert json.loads(encode_manifest(read))["format"] == "lethe.manifest"
    with pytest.raises(errors.CorruptManifest, match="not a Lethe manifest"):
        decode_manifest(written_before.replace(b'"lethe.manifest"', b'"lethe.other"'))


def test_truncated_real_manifest_is_corrupt() -> None:
    raw = encode_manifest(base().manifest)
    for cut in (1, len(raw) // 2, len(raw) - 1):
        with pytest.raises(errors.CorruptManifest):
            decode_manifest(raw[:cut])


def test_bad_schema_blob_is_corrupt() -> None:
    obj = json.loads(encode_manifest(base().manifest))
    obj["schema_b64"] = "bm90IGFuIGFycm93IHNjaGVtYQ=="
    with pytest.raises(errors.CorruptManifest, match="Arrow schema"):
        decode_manifest(json.dumps(obj).encode())


def test_head_validation() -> None:
    with pytest.raises(errors.CorruptManifest):
        decode_head(b'{"version": "x"}')
    h = decode_head(b'{"version": 3, "manifest": "manifest/v00000003.json", "table_uuid": "u"}')
    assert h.version == 3


@settings(max_examples=60)
@given(
    st.lists(st.lists(data_files(), min_size=1, max_size=3), min_size=1, max_size=5), st.randoms()
)
def test_concurrent_appends_rebase_in_any_order(batches: list[list[DataFile]], rnd: object) -> None:
    """Appends computed against the same base commute when rebased one after another."""
    seen: set[str] = set()
    uniq = []
    for b in batches:
        b = [f for f in b if f.path not in seen]
        seen.update(f.path for f in b)
        if b:
            uniq.append(b)
    order = list(range(len(uniq)))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    m = base()
    for i in order:
        m = apply_append(m, uniq[i], Operation(kind="append"))
    assert m.version == len(uniq)
    assert sorted(f.path for f in m.files) == sorted(f.path for b in uniq for f in b)
    assert all(f.added_version >= 1 for f in m.files)


def test_append_of_existing_file_conflicts() -> None:
    f = DataFile(path="data/a.parquet", size=1, etag='"e"', rows=0, row_groups=(), added_version=0)
    m = apply_append(base(), [f], Operation(kind="append"))
    with pytest.raises(errors.CommitConflict):
        apply_append(m, [f], Operation(kind="append"))


def test_dv_update_on_replaced_file_conflicts_and_replace_swaps() -> None:
    f = DataFile(path="data/a.parquet", size=1, etag='"e"', rows=10, row_groups=(), added_version=0)
    g = DataFile(path="data/b.parquet", size=1, etag='"e"', rows=9, row_groups=(), added_version=0)
    m1 = apply_append(base(), [f], Operation(kind="append"))
    dv = DVRef(container="tombstone/c.puffin", offset=4, length=20, cardinality=1, crc32=5)
    m2 = apply_dv_updates(m1, {f.path: dv}, Operation(kind="delete", rows_deleted=1))
    assert m2.file(f.path) is not None and m2.file(f.path).dv == dv  # type: ignore[union-attr]
    assert m2.total_rows == 9
    m3 = apply_replace(
        m2, [f.path], [g], Operation(kind="erase", rows_erased=1, files_removed=1, files_added=1)
    )
    assert [x.path for x in m3.files] == [g.path]
    with pytest.raises(errors.CommitConflict, match="no longer"):
        apply_dv_updates(m3, {f.path: dv}, Operation(kind="delete"))
    with pytest.raises(errors.CommitConflict):
        apply_replace(m3, [f.path], [g], Operation(kind="erase"))


def test_request_log_is_bounded_and_records_hash_only() -> None:
    props = TableProperties(key="id", request_log_max=3)
    m = Snapshot(initial_manifest(table_uuid="u", schema=SCHEMA, properties=props))
    for i in range(5):
        op = Operation(kind="delete", request_id_hash=request_hash(f"req-{i}"))
        m = apply_dv_updates(m, {}, op, now=datetime.now(UTC))
    assert [r.id_hash for r in m.requests] == [request_hash(f"req-{i}") for i in (2, 3, 4)]
    assert "req-4" not in encode_manifest(m.manifest).decode()
