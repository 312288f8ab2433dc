"""Object store layer against moto's server: conditional writes, pinned reads, typed errors."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from conftest import run_in_threads

from lethe import errors
from lethe.storage.store import MIN_PART_BYTES, S3Store, parse_s3_uri


@pytest.fixture
def store(bucket: str, s3: Any) -> S3Store:
    return S3Store(bucket, client=s3)


def test_create_only_put(store: S3Store) -> None:
    store.put("k", b"one", if_none_match=True)
    with pytest.raises(errors.PreconditionFailed):
        store.put("k", b"two", if_none_match=True)
    assert store.get("k").body == b"one"


def test_cas_put(store: S3Store) -> None:
    e1 = store.put("head", b"1")
    e2 = store.put("head", b"2", if_match=e1)
    with pytest.raises(errors.PreconditionFailed):
        store.put("head", b"3", if_match=e1)
    assert store.get("head").body == b"2"
    assert store.head("head").etag == e2


def test_pinned_ranged_get(store: S3Store) -> None:
    e1 = store.put("obj", b"0123456789")
    r = store.get("obj", etag=e1, start=2, end=5)
    assert (r.body, r.size) == (b"234", 10)
    assert store.get("obj", suffix=3).body == b"789"
    store.put("obj", b"replaced!!")
    with pytest.raises(errors.PreconditionFailed):
        store.get("obj", etag=e1, start=0, end=4)


def test_missing_is_not_found(store: S3Store) -> None:
    with pytest.raises(errors.NotFound):
        store.get("nope")
    with pytest.raises(errors.NotFound):
        store.head("nope")
    assert not store.exists("nope")
    with pytest.raises(errors.NotFound):
        S3Store("no-such-bucket-xyz", client=store.client).get("k")


def test_counters(store: S3Store) -> None:
    before = store.stats.snapshot()
    store.put("a", b"x" * 100)
    store.get("a", start=0, end=10)
    d = store.stats.snapshot() - before
    assert d.count("put") == 1 and d.count("get") == 1
    assert d.bytes_uploaded == 100 and d.bytes_downloaded == 10


def test_list_and_delete_many(store: S3Store) -> None:
    for i in range(5):
        store.put(f"p/{i}", b"x")
    assert sorted(o.key for o in store.list("p/")) == [f"p/{i}" for i in range(5)]
    assert store.delete_many([f"p/{i}" for i in range(3)]) == []
    assert sorted(o.key for o in store.list("p/")) == ["p/3", "p/4"]


def test_multipart_writer_streams_and_aborts(store: S3Store) -> None:
    data = bytes(range(256)) * (MIN_PART_BYTES // 256 * 2 + 100)
    with store.open_writer("big", part_bytes=MIN_PART_BYTES) as w:
        w.write(data[: len(data) // 2])
        w.write(data[len(data) // 2 :])
    assert store.get("big").body == data
    with pytest.raises(errors.PreconditionFailed), store.open_writer("big") as w2:
        w2.write(b"tiny")  # create-only: the key exists
    assert store.get("big").body == data
    # a failure mid-way aborts the upload: no multipart upload remains
    with pytest.raises(RuntimeError), store.open_writer("other", part_bytes=MIN_PART_BYTES) as w3:
        w3.write(data)
        raise RuntimeError("boom")
    assert store.list_multipart("other") == []
    assert not store.exists("other")


def test_multipart_writer_uploads_parts_behind_the_writes(store: S3Store) -> None:
    # many small writes of odd sizes, as pyarrow makes them: a part is cut once the writes
    # add up to part_bytes and uploads, from the written buffers, while the writes go on;
    # random bytes show a part sent out of order or from the wrong buffers
    import random

    data = random.Random(7).randbytes(MIN_PART_BYTES * 3 + 12_345)
    before = store.stats.snapshot()
    with store.open_writer("many", part_bytes=MIN_PART_BYTES, in_flight=2) as w:
        for i in range(0, len(data), 100_003):
            w.write(memoryview(data)[i : i + 100_003])
        assert w.tell() == len(data)
    assert store.get("many").body == data
    d = store.stats.snapshot() - before
    assert (d.count("upload_part"), d.count("complete_multipart")) == (3, 1)
    assert d.bytes_uploaded == len(data)
    with pytest.raises(errors.PreconditionFailed), store.open_writer("many") as w2:
        w2.write(data)  # completed create-only: the key exists


def test_part_body_reads_its_buffers_as_they_are() -> None:
    from lethe.storage.parts import PartBody
    from lethe.storage.wire import crc32_b64

    chunks = [b"abc", b"defgh", b"", b"ij"]
    body = PartBody(chunks)
    first = body.read()
    assert first is chunks[0]  # whole buffers are handed on, not copied
    assert (len(body), bytes(body.read(2)), bytes(body.read(100)), body.tell()) == (
        10,
        b"de",
        b"fgh",
        8,
    )
    assert bytes(body.read()) == b"ij" and body.read() == b""  # the empty write is skipped
    body.seek(0)  # a retry sends it again from the start
    assert b"".join(bytes(body.read(4)) for _ in range(6)) == b"abcdefghij"
    assert body.crc32_b64() == crc32_b64(b"abcdefghij") != crc32_b64(b"abcdefghik")
    with pytest.raises(OSError):
        body.seek(3)


class _FailingPart(S3Store):
    """A store whose upload of part ``fail_at`` fails, as a dropped connection would."""

    fail_at = 2

    def upload_part(self, key: str, upload_id: str, part_number: int, body: Any) -> str:
        if part_number == self.fail_at:
            raise errors.StoreError(f"part {part_number} lost")
        return super().upload_part(key, upload_id, part_number, body)


def test_multipart_writer_failed_background_part_aborts(store: S3Store) -> None:
    failing = _FailingPart(store.bucket, client=store.client)
    chunk = b"x" * MIN_PART_BYTES
    with (
        pytest.raises(errors.StoreError, match="part 2 lost"),
        failing.open_writer("broken", part_bytes=MIN_PART_BYTES, in_flight=1) as w,
    ):
        for _ in range(4):
            w.write(chunk)
    assert store.list_multipart("broken") == []
    assert not store.exists("broken")
    assert failing.stats.snapshot().count("abort_multipart") == 1


def test_uploads_carry_a_crc32_instead_of_a_signed_payload(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make_s3_client's choice: every upload carries the CRC-32 of its body (S3 checks it), and
    # the body is not SHA-256-signed (as boto3 does over TLS), even on a plain-HTTP endpoint
    import base64
    import zlib

    from lethe.storage.store import make_s3_client

    client = make_s3_client()
    sent: list[tuple[str, str, str, bytes]] = []

    def capture(request: Any, **_: Any) -> None:
        body = bytes(request.body) if not hasattr(request.body, "read") else request.body.read()
        if hasattr(request.body, "seek"):
            request.body.seek(0)
        h = {
            k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
        }
        sent.append(
            (request.method, h.get("x-amz-checksum-crc32", ""), h["x-amz-content-sha256"], body)
        )

    client.meta.events.register("before-send.s3.PutObject", capture)
    client.meta.events.register("before-send.s3.UploadPart", capture)
    store = S3Store(bucket, client=client)
    store.put("small", b"abc", if_none_match=True)
    with store.open_writer("big", part_bytes=MIN_PART_BYTES) as w:
        w.write(b"y" * (MIN_PART_BYTES + 10))
        w.write(b"z" * 10)
    assert [m for m, *_ in sent] == ["PUT"] * 3
    for _, crc, sha, body in sent:
        assert crc == base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        assert sha == "UNSIGNED-PAYLOAD"
    with pytest.raises(errors.PreconditionFailed):  # conditional writes still hold
        store.put("small", b"abd", if_none_match=True)


@pytest.mark.parametrize("uri", ["b/t", "s3://", "http://b/t", ""])
def test_bad_uris(uri: str) -> None:
    with pytest.raises(errors.InvalidRequest):
        parse_s3_uri(uri)


def test_listings_paginate_and_count_one_request_a_page(store: S3Store, s3: Any) -> None:
    """Over 1,000 keys: every key listed once, one counted LIST per page; batch deletes too."""
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"many/{i:05d}" for i in range(2_345)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: store.put(k, b"x"), keys))
    before = store.stats.snapshot()
    assert [o.key for o in store.list("many/")] == keys
    assert (store.stats.snapshot() - before).count("list") == 3
    s3.put_bucket_versioning(Bucket=store.bucket, VersioningConfiguration={"Status": "Enabled"})
    for k in keys[:5]:
        store.put(k, b"y")  # a second version of five keys
    versions = list(store.list_object_versions("many/"))
    assert len(versions) == len(keys) + 5
    assert sum(v.is_latest for v in versions) == len(keys)
    before = store.stats.snapshot()
    assert store.delete_many(keys) == []
    assert (store.stats.snapshot() - before).count("delete") == 3
    markers = [v for v in store.list_object_versions("many/") if v.is_delete_marker]
    assert len(markers) == len(keys)
    gone = [(v.key, v.version_id) for v in store.list_object_versions("many/")]
    assert store.delete_versions(gone) == ()
    assert list(store.list_object_versions("many/")) == []


def test_listing_errors_are_translated_and_counted(store: S3Store) -> None:
    missing = S3Store("no-such-bucket-xyz", client=store.client)
    with pytest.raises(errors.NotFound, match="LIST s3://no-such-bucket-xyz/p/"):
        list(missing.list("p/"))
    assert missing.stats.snapshot().count("list") == 1
    with pytest.raises(errors.NotFound):
        missing.list_multipart("p/")
    missing.abort_multipart("k", "no-such-upload")  # already gone: not an error
    assert missing.stats.snapshot().count("abort_multipart") == 1


def test_create_only_puts_of_one_key_race_to_exactly_one_winner(store: S3Store) -> None:
    """The commit point's guarantee, on the server the tests use: of many concurrent
    ``If-None-Match: *`` PUTs of one key, exactly one succeeds (moto alone checks, then
    writes; devtools.local.server serializes conditional writes as S3 makes them atomic)."""
    import threading

    body = b"x" * (256 << 10)  # a body big enough to widen moto's check-then-write window
    for round_ in range(6):
        key = f"race/{round_}"
        wins: list[int] = []
        lost: list[int] = []
        go = threading.Barrier(8)

        def put(
            i: int,
            key: str = key,
            wins: list[int] = wins,
            lost: list[int] = lost,
            go: threading.Barrier = go,
        ) -> None:
            go.wait()
            try:
                store.put(key, body + bytes([i]), if_none_match=True)
                wins.append(i)
            except errors.PreconditionFailed:
                lost.append(i)

        assert not run_in_threads(*(partial(put, i) for i in range(8)))
        assert len(wins) == 1 and len(lost) == 7
        assert store.get(key).body[-1] == wins[0]  # and the object is the winner's
