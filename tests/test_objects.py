"""The one pinned-object reader against moto's server: ranged, tail and many-range reads,
each GET pinned to the ETag; a replaced or removed object is the caller's StaleSnapshot."""

from __future__ import annotations

from typing import Any

import pytest

from lethe import errors
from lethe.storage.objects import PinnedObject
from lethe.storage.store import S3Store

BODY = bytes(range(256)) * 40  # 10,240 bytes


@pytest.fixture
def store(bucket: str, s3: Any) -> S3Store:
    return S3Store(bucket, client=s3)


def test_ranged_tail_and_many_ranges(store: S3Store) -> None:
    obj = PinnedObject(store, "o", store.put("o", BODY), len(BODY))
    assert obj.read(10, 20) == BODY[10:20]
    assert obj.read(5, 5) == b""
    assert obj.tail(100) == BODY[-100:] and obj.tail(1 << 20) == BODY
    before = store.stats.snapshot()
    got = obj.read_ranges([(3000, 3100), (0, 10), (20, 30), (9000, 9100)], gap=100)
    assert got == [(0, BODY[0:30]), (3000, BODY[3000:3100]), (9000, BODY[9000:9100])]
    assert (store.stats.snapshot() - before).count("get") == 3  # (0, 10) and (20, 30) merged
    # what the caller holds (the tail from 9000 on) is not fetched again
    assert obj.read_ranges([(0, 10), (9000, 9100)], gap=100, held_from=9000) == [(0, BODY[:10])]


def test_a_replaced_object_is_the_callers_stale_snapshot(store: S3Store) -> None:
    obj = PinnedObject(
        store, "o", store.put("o", BODY), len(BODY), changed="{key} moved under me ({etag})"
    )
    store.put("o", BODY[::-1])
    with pytest.raises(errors.StaleSnapshot, match=f"^o moved under me \\({obj.etag}\\)$"):
        obj.read(0, 10)
    with pytest.raises(errors.StaleSnapshot, match="moved under me"):
        obj.read_ranges([(0, 10), (5000, 5010)], gap=0)  # from the pool's threads too


def test_a_removed_object_is_not_found_unless_gone_says_otherwise(store: S3Store) -> None:
    etag = store.put("o", BODY)
    store.delete_many(["o"])
    with pytest.raises(errors.NotFound):
        PinnedObject(store, "o", etag, len(BODY)).read(0, 10)
    gone = PinnedObject(store, "o", etag, len(BODY), gone="{uri} vanished")
    with pytest.raises(errors.StaleSnapshot, match=f"^s3://{store.bucket}/o vanished$"):
        gone.tail(8)
