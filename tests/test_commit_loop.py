"""The one commit loop (Catalog.commit_change): what it keeps and what it removes. That no
other module runs a retry/rebase loop of its own is checked in ``test_architecture.py``."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
import lethe.dv.store as dvstore
from lethe import errors
from lethe.catalog.commit import RetryPolicy
from lethe.storage.layout import manifest_key
from lethe.storage.store import parse_s3_uri


def keys_under(s3: Any, uri: str, prefix: str) -> set[str]:
    bucket, root = parse_s3_uri(uri)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{prefix}")
    return {o["Key"][len(root) + 1 :] for p in pages for o in p.get("Contents", [])}


def manifests(s3: Any, uri: str) -> set[str]:
    return {k for k in keys_under(s3, uri, "manifest/") if k.endswith(".json")}


def test_a_delete_raced_twice_keeps_only_its_last_container(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer changes the DV our delete unions with, twice: each stale container is
    removed when the loop prepares anew, and the last one is what the head references."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 200))
    other = lethe.Table.open(table_uri)
    real = dvstore.write_dvs
    ours: list[str] = []

    def racing(store: Any, prefix: str, dvs: Any) -> Any:
        refs = real(store, prefix, dvs)
        if store is t.store:
            ours.append(next(iter(refs.values())).container)
            if len(ours) <= 2:  # the base moves under our preparation
                other.delete([("id", "=", 100 + len(ours))])
        return refs

    monkeypatch.setattr(dvstore, "write_dvs", racing)
    r = t.delete([("id", "=", 5)])
    assert r.rows_deleted == 1 and r.attempts >= 3 and len(ours) == 3
    tombs = keys_under(s3, table_uri, "tombstone/")
    assert ours[0] not in tombs and ours[1] not in tombs and ours[2] in tombs
    head = lethe.Table.open(table_uri)
    assert head.manifest.files[0].dv.container == ours[2]  # type: ignore[union-attr]
    ids = set(head.scan(["id"])["id"].to_pylist())
    assert len(ids) == 197 and not ids & {5, 101, 102}


def test_a_lost_response_on_our_manifest_put_counts_as_landed(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK retried a manifest PUT whose first response was lost: the retry answers 412
    although the version is ours. The loop sees that and does not commit twice."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    real = t.store.put
    lost: list[str] = []

    def put(key: str, body: bytes, **kw: Any) -> str:
        etag = real(key, body, **kw)
        if key.endswith(manifest_key(1)) and not lost:
            lost.append(key)
            raise errors.PreconditionFailed("412 on the SDK's retry")
        return etag

    monkeypatch.setattr(t.store, "put", put)
    r = t.append(events(0, 50))
    assert lost and r.version == 1 and r.attempts == 1
    assert manifests(s3, table_uri) == {manifest_key(0), manifest_key(1)}
    head = lethe.Table.open(table_uri)
    assert head.version == 1 and head.scan(["id"]).num_rows == 50


def test_a_put_whose_outcome_is_unknown_removes_nothing(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest PUT that fails without a 412/409 may have landed: the appended files must
    stay (removing them could break a committed version; GC sweeps them if unreferenced)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    real = t.store.put

    def put(key: str, body: bytes, **kw: Any) -> str:
        if "/manifest/v" in key:
            raise errors.StoreError("connection reset by peer")
        return real(key, body, **kw)

    monkeypatch.setattr(t.store, "put", put)
    with pytest.raises(errors.StoreError):
        t.append(events(0, 50))
    assert len(keys_under(s3, table_uri, "data/")) == 1


def test_a_commit_that_provably_failed_removes_what_it_owned(
    table_uri: str, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every manifest PUT answered 412 by versions that are not ours: after the bound, a
    CommitConflict, and the appended files are gone."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", retry=RetryPolicy(max_attempts=3, base_delay=0.001)
    )
    real = t.store.put
    puts: list[str] = []

    def put(key: str, body: bytes, **kw: Any) -> str:
        if "/manifest/v" in key:
            puts.append(key)
            raise errors.PreconditionFailed("412")
        return real(key, body, **kw)

    monkeypatch.setattr(t.store, "put", put)
    with pytest.raises(errors.CommitConflict, match=r"append on .* gave up after 3 attempts"):
        t.append(events(0, 50))
    assert len(puts) == 3
    assert keys_under(s3, table_uri, "data/") == set()
    assert lethe.Table.open(table_uri).version == 0


def test_a_twin_append_removes_its_files(table_uri: str, s3: Any) -> None:
    """A no-op (a redelivered request committed first) leaves none of its own files."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    a = t.write_data_files(events(0, 10))
    b = t.write_data_files(events(0, 10))
    assert t.commit_files(a, request_id="upload-1", own=True).files_added == 1
    assert t.commit_files(b, request_id="upload-1", own=True).files_added == 0
    assert keys_under(s3, table_uri, "data/") == {f.path for f in a}
