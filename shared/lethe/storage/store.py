"""Object store layer: the only module that talks to S3 (boto3).

It offers exactly the primitives the table format needs: create-only PUT (``If-None-Match:
*``), compare-and-swap PUT (``If-Match``), ETag-pinned ranged GET, head, list, batch delete
and the multipart primitives used by the row-group splice. botocore errors are translated
here into :mod:`lethe.errors`; every request and every byte is counted (:mod:`lethe.storage.counters`).

Example:
    >>> store = S3Store.from_env()            # doctest: +SKIP
    >>> etag = store.put("t/x", b"1", if_none_match=True)  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from lethe import errors
from lethe.storage.counters import IOCounters, IOStats
from lethe.storage.fileobj import FileObject
from lethe.storage.parts import PartBody
from lethe.storage.wire import GetResult, MultipartUpload, ObjectInfo, crc32_b64, translate_error

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_s3 import S3Client
else:
    S3Client = Any

MIN_PART_BYTES = 5 << 20
MAX_PART_BYTES = 5 << 30
MAX_PARTS = 10_000

__all__ = [
    "MIN_PART_BYTES",
    "GetResult",  # re-exported (with the two below): lethe.storage.wire
    "IOCounters",  # re-exported: lethe.storage.counters
    "IOStats",
    "MultipartUpload",
    "ObjectInfo",
    "S3Store",
    "make_s3_client",
    "parse_s3_uri",
]


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/prefix`` into ``(bucket, prefix)`` (prefix without slashes at ends).

    >>> parse_s3_uri("s3://b/tables/events/")
    ('b', 'tables/events')
    """
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise errors.InvalidRequest(f"table URI must look like s3://bucket/prefix, got {uri!r}")
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise errors.InvalidRequest(f"table URI has no bucket: {uri!r}")
    return bucket, prefix.strip("/")


def make_s3_client(*, max_pool_connections: int = 64) -> S3Client:
    """A boto3 S3 client; the endpoint comes from ``AWS_ENDPOINT_URL`` as boto3 reads it."""
    import boto3
    import botocore.exceptions
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    path_style = bool(os.environ.get("AWS_ENDPOINT_URL"))
    cfg = Config(
        max_pool_connections=max_pool_connections,
        retries={"max_attempts": 5, "mode": "standard"},
        s3={"addressing_style": "path", "payload_signing_enabled": False}
        if path_style
        else {"payload_signing_enabled": False},
    )
    try:
        return boto3.client("s3", region_name=region, config=cfg)
    except botocore.exceptions.ProfileNotFound as e:
        raise errors.InvalidRequest(
            f"{e} (AWS_PROFILE / --profile); `aws configure list-profiles` lists them"
        ) from e


def _etag(value: Any) -> str:
    return str(value)


_T = TypeVar("_T")
_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


class S3Store:
    """Conditional, counted S3 primitives over one bucket.

    Every request goes through :meth:`_call` (listings through :meth:`_pages`, boto3's
    paginators): it is counted in :attr:`stats` whether it succeeds or fails, and its botocore
    error is translated into :mod:`lethe.errors` there and nowhere else.

    Args:
        bucket: the bucket every key of this store lives in.
        client: a boto3 S3 client; by default one built from the environment
            (``AWS_ENDPOINT_URL`` points it at moto, MinIO or a VPC endpoint).
        stats: counters to record into (shared between stores if given).
    """

    def __init__(
        self, bucket: str, *, client: S3Client | None = None, stats: IOStats | None = None
    ):
        self.bucket = bucket
        self.client: S3Client = client if client is not None else make_s3_client()
        self.stats = stats if stats is not None else IOStats()

    def __repr__(self) -> str:
        return f"S3Store(bucket={self.bucket!r})"

    def child(self) -> S3Store:
        """Same client and bucket, with counters of its own that also feed this store's."""
        return S3Store(self.bucket, client=self.client, stats=IOStats(parent=self.stats))

    # --- the one request helper -------------------------------------------------------------
    def _call(
        self,
        op: str,
        what: str,
        fn: Callable[[], _T],
        *,
        counted: Callable[[_T], Mapping[str, int]] | None = None,
    ) -> _T:
        """Run one S3 request ``fn``: count it as ``op`` (with the byte counts ``counted``
        gives for its result), and translate a failure, described by ``what``."""
        try:
            result = fn()
        except Exception as e:
            self.stats.record(op)
            raise translate_error(e, what) from e
        self.stats.record(op, **(counted(result) if counted is not None else {}))
        return result

    def _pages(self, op: str, what: str, operation: str, **kw: Any) -> Iterator[Any]:
        """The pages of a listing of this bucket through boto3's paginator, one counted
        request a page."""
        pages = iter(self.client.get_paginator(operation).paginate(Bucket=self.bucket, **kw))  # type: ignore[call-overload]
        while True:
            try:
                page = next(pages)  # the paginator sends the request for the next page
            except StopIteration:
                return
            except Exception as e:
                self.stats.record(op)
                raise translate_error(e, what) from e
            self.stats.record(op)
            yield page

    def _url(self, key: str) -> str:
        return key if key.startswith("s3://") else f"s3://{self.bucket}/{key}"

    def _at(self, key: str) -> tuple[str, str]:
        """``(bucket, key)`` of a key of this bucket or an absolute ``s3://bucket/key``
        (an adopted file in place, in any bucket the client reaches)."""
        if key.startswith("s3://"):
            bucket, _, rest = key[5:].partition("/")
            return bucket, rest
        return self.bucket, key

    # --- single objects ---------------------------------------------------------------------
    def get(
        self,
        key: str,
        *,
        etag: str | None = None,
        start: int | None = None,
        end: int | None = None,
        suffix: int | None = None,
        version_id: str | None = None,
    ) -> GetResult:
        """GET an object or a byte range of it, pinned to ``etag`` when given.

        ``start``/``end`` select ``[start, end)``; ``suffix=n`` the last ``n`` bytes;
        ``version_id``: that version of the key (a versioned bucket's noncurrent one).
        A pinned GET of a replaced object raises :class:`~lethe.errors.PreconditionFailed`.
        """
        b, k = self._at(key)
        kw: dict[str, Any] = {"Bucket": b, "Key": k}
        if version_id is not None:
            kw["VersionId"] = version_id
        if etag is not None:
            kw["IfMatch"] = etag
        if suffix is not None:
            kw["Range"] = f"bytes=-{suffix}"
        elif start is not None:
            if end is not None:
                if end <= start:
                    return GetResult(b"", etag or "", -1)
                kw["Range"] = f"bytes={start}-{end - 1}"
            else:
                kw["Range"] = f"bytes={start}-"

        def request() -> tuple[Any, bytes]:
            r = self.client.get_object(**kw)
            return r, r["Body"].read()

        r, body = self._call(
            "get", f"GET {self._url(key)}", request, counted=lambda rb: {"down": len(rb[1])}
        )
        size = len(body)
        cr = r.get("ContentRange")
        if cr and "/" in cr:
            total = cr.rsplit("/", 1)[1]
            if total.isdigit():
                size = int(total)
        return GetResult(body, _etag(r["ETag"]), size)

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str | None = None,
    ) -> str:
        """PUT an object; create-only with ``if_none_match``, compare-and-swap with ``if_match``.

        Returns the new ETag. A lost race raises ``PreconditionFailed`` (412) or
        ``ConditionalRequestConflict`` (409).
        """
        if if_none_match and if_match is not None:
            raise errors.InvalidRequest("put: if_none_match and if_match are exclusive")
        b, k = self._at(key)
        kw: dict[str, Any] = {"Bucket": b, "Key": k, "Body": body, "ChecksumCRC32": crc32_b64(body)}
        if if_none_match:
            kw["IfNoneMatch"] = "*"
        if if_match is not None:
            kw["IfMatch"] = if_match
        if content_type:
            kw["ContentType"] = content_type
        r = self._call(
            "put",
            f"PUT {self._url(key)}",
            lambda: self.client.put_object(**kw),
            counted=lambda _: {"up": len(body)},
        )
        return _etag(r["ETag"])

    def head(self, key: str) -> ObjectInfo:
        r = self._call(
            "head",
            f"HEAD {self._url(key)}",
            lambda: self.client.head_object(Bucket=self._at(key)[0], Key=self._at(key)[1]),
        )
        return ObjectInfo(key, int(r["ContentLength"]), _etag(r["ETag"]), r.get("LastModified"))

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
        except errors.NotFound:
            return False
        return True

    def copy(self, src_key: str, dst_key: str, *, src_etag: str | None = None) -> str:
        """Server-side copy of a whole object (<= 5 GiB) to a new key, create-only."""
        (db, dk), (sb, sk) = self._at(dst_key), self._at(src_key)
        kw: dict[str, Any] = {"Bucket": db, "Key": dk, "CopySource": {"Bucket": sb, "Key": sk}}
        if src_etag is not None:
            kw["CopySourceIfMatch"] = src_etag
        what = f"COPY {self._url(src_key)} -> {dst_key}"
        try:
            r = self.client.copy_object(**kw)
        except Exception as e:
            self.stats.record("copy")
            raise translate_error(e, what) from e
        size = self.head(dst_key).size  # the copy is counted with its size, after the HEAD
        self.stats.record("copy", copied=size)
        return _etag(r["CopyObjectResult"]["ETag"])

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (paginated, one LIST request per 1,000 keys)."""
        for page in self._pages(
            "list", f"LIST {self._url(prefix)}", "list_objects_v2", Prefix=prefix
        ):
            for o in page.get("Contents", []):
                yield ObjectInfo(o["Key"], int(o["Size"]), _etag(o["ETag"]), o.get("LastModified"))

    def _delete_batches(
        self, op: str, objects: Iterable[dict[str, str]]
    ) -> builtins.list[dict[str, Any]]:
        """DeleteObjects in batches of 1,000 (quiet mode); the ``Errors`` entries of all."""
        failed: list[dict[str, Any]] = []
        batch: list[dict[str, str]] = []

        def flush() -> None:
            if not batch:
                return
            todo = {"Objects": list(batch), "Quiet": True}
            r = self._call(
                op,
                f"DELETE {len(batch)} objects in s3://{self.bucket}",
                lambda: self.client.delete_objects(Bucket=self.bucket, Delete=todo),  # type: ignore[arg-type]
            )
            failed.extend(dict(e) for e in r.get("Errors", []))
            batch.clear()

        for o in objects:
            batch.append(o)
            if len(batch) == _BATCH:
                flush()
        flush()
        return failed

    def delete_many(self, keys: Iterable[str]) -> builtins.list[str]:
        """Delete keys in batches of 1,000 (DeleteObjects; absolute ``s3://`` keys grouped
        by their bucket). Returns the keys that failed (as given)."""
        by_bucket: dict[str, builtins.list[str]] = {}
        for k in keys:
            b, rest = self._at(k)
            by_bucket.setdefault(b, []).append(rest)
        failed: builtins.list[str] = []
        for b, ks in by_bucket.items():
            store = self if b == self.bucket else S3Store(b, client=self.client, stats=self.stats)
            errs = store._delete_batches("delete", ({"Key": k} for k in ks))
            failed += [str(e["Key"]) if b == self.bucket else f"s3://{b}/{e['Key']}" for e in errs]
        return failed

    # --- multipart --------------------------------------------------------------------------
    def create_multipart(self, key: str) -> str:
        r = self._call(
            "create_multipart",
            f"CreateMultipartUpload {self._url(key)}",
            lambda: self.client.create_multipart_upload(Bucket=self.bucket, Key=key),
        )
        return str(r["UploadId"])

    def _on_upload(
        self,
        op: str,
        what: str,
        request: Callable[..., _T],
        key: str,
        upload_id: str,
        counted: Callable[[_T], Mapping[str, int]] | None = None,
        **kw: Any,
    ) -> _T:
        """One request ``op`` on multipart upload ``upload_id`` of ``key`` (:meth:`_call`)."""
        return self._call(
            op,
            f"{what} {self._url(key)}",
            lambda: request(Bucket=self.bucket, Key=key, UploadId=upload_id, **kw),
            counted=counted,
        )

    def upload_part(
        self, key: str, upload_id: str, part_number: int, body: bytes | PartBody
    ) -> str:
        r = self._on_upload(
            "upload_part",
            f"UploadPart {part_number}",
            self.client.upload_part,
            key,
            upload_id,
            lambda _: {"up": len(body)},
            PartNumber=part_number,
            Body=body,  # PartBody: a file object botocore reads
            ChecksumCRC32=body.crc32_b64() if isinstance(body, PartBody) else crc32_b64(body),
        )
        return _etag(r["ETag"])

    def upload_part_copy(
        self,
        key: str,
        upload_id: str,
        part_number: int,
        src_key: str,
        start: int,
        end: int,
        *,
        src_etag: str,
    ) -> str:
        """Copy ``[start, end)`` of ``src_key`` (pinned to ``src_etag``) as one part."""
        r = self._on_upload(
            "upload_part_copy",
            f"UploadPartCopy {part_number}",
            self.client.upload_part_copy,
            key,
            upload_id,
            lambda _: {"copied": end - start},
            PartNumber=part_number,
            CopySource=dict(zip(("Bucket", "Key"), self._at(src_key), strict=True)),
            CopySourceRange=f"bytes={start}-{end - 1}",
            CopySourceIfMatch=src_etag,
        )
        return _etag(r["CopyPartResult"]["ETag"])

    def complete_multipart(
        self,
        key: str,
        upload_id: str,
        parts: builtins.list[tuple[int, str]],
        *,
        if_none_match: bool = True,
    ) -> str:
        kw: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        r = self._on_upload(
            "complete_multipart",
            "CompleteMultipartUpload",
            self.client.complete_multipart_upload,
            key,
            upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": t} for n, t in parts]},
            **kw,
        )
        return _etag(r["ETag"])

    def abort_multipart(self, key: str, upload_id: str) -> None:
        """Abort an upload; an upload already gone (aborted or completed) is not an error."""
        with contextlib.suppress(errors.NotFound):
            self._on_upload(
                "abort_multipart",
                "AbortMultipartUpload",
                self.client.abort_multipart_upload,
                key,
                upload_id,
            )

    def list_multipart(self, prefix: str) -> builtins.list[MultipartUpload]:
        return [
            MultipartUpload(u["Key"], u["UploadId"], u.get("Initiated"))
            for page in self._pages(
                "list_multipart",
                f"ListMultipartUploads {self._url(prefix)}",
                "list_multipart_uploads",
                Prefix=prefix,
            )
            for u in page.get("Uploads", [])
        ]

    def open_writer(
        self, key: str, *, part_bytes: int = 8 << 20, in_flight: int = 2
    ) -> MultipartWriter:
        """A write-once streaming writer: parts upload as they fill, at most ``in_flight`` at
        a time behind the writes (create-only)."""
        return MultipartWriter(self, key, part_bytes=part_bytes, in_flight=in_flight)

    # --- versioned buckets and upload parts (garbage collection) -----------------------------
    @dataclass(frozen=True, slots=True)
    class ObjectVersion:
        """One entry of ListObjectVersions: a version of a key, or a delete marker."""

        key: str
        version_id: str
        is_latest: bool
        is_delete_marker: bool
        size: int = 0
        last_modified: datetime | None = None

    def versioning(self) -> str:
        """The bucket's versioning status: ``"Enabled"``, ``"Suspended"`` or ``""`` (never on)."""
        r = self._call(
            "get_versioning",
            f"GetBucketVersioning s3://{self.bucket}",
            lambda: self.client.get_bucket_versioning(Bucket=self.bucket),
        )
        return str(r.get("Status", ""))

    def list_object_versions(self, prefix: str) -> Iterator[S3Store.ObjectVersion]:
        """Every version and delete marker under ``prefix`` (paginated, 1,000 per request)."""
        for page in self._pages(
            "list_versions",
            f"ListObjectVersions {self._url(prefix)}",
            "list_object_versions",
            Prefix=prefix,
        ):
            for marker, entries in ((False, "Versions"), (True, "DeleteMarkers")):
                for v in page.get(entries, []):
                    yield S3Store.ObjectVersion(
                        v["Key"],
                        str(v.get("VersionId", "null")),
                        bool(v.get("IsLatest")),
                        marker,
                        0 if marker else int(v.get("Size", 0)),
                        v.get("LastModified"),
                    )

    def delete_versions(self, items: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """Permanently delete ``(key, version_id)`` pairs (versions or delete markers) in
        batches of 1,000 (DeleteObjects). Returns the pairs that failed."""
        errs = self._delete_batches(
            "delete_versions", ({"Key": k, "VersionId": v} for k, v in items)
        )
        return tuple((str(e["Key"]), str(e.get("VersionId", ""))) for e in errs)

    def list_parts(self, key: str, upload_id: str) -> tuple[tuple[int, int, datetime | None], ...]:
        """``(part number, size, last modified)`` of the parts of a multipart upload."""
        return tuple(
            (int(part["PartNumber"]), int(part.get("Size", 0)), part.get("LastModified"))
            for page in self._pages(
                "list_parts",
                f"ListParts {self._url(key)}",
                "list_parts",
                Key=key,
                UploadId=upload_id,
            )
            for part in page.get("Parts", [])
        )


class MultipartWriter(FileObject):
    """A binary file-like sink that streams to S3 with a multipart upload.

    Writes are kept as they come (not copied, see :class:`PartBody`) until they make a part
    of ``part_bytes``, which uploads on a background thread while the caller writes on (at
    most ``in_flight`` parts at a time; a failed part surfaces at the next write or close).
    Under one part, a single create-only PUT; a multipart upload completes create-only. On
    any failure, or :meth:`abort`, the upload is aborted so that no orphaned parts remain.
    """

    WRITABLE = True

    def __init__(
        self, store: S3Store, key: str, *, part_bytes: int = 8 << 20, in_flight: int = 2
    ) -> None:
        if part_bytes < MIN_PART_BYTES:
            raise errors.InvalidRequest("part_bytes must be at least 5 MiB")
        self.store = store
        self.key = key
        self.part_bytes = part_bytes
        self.in_flight = max(1, in_flight)
        self._chunks: builtins.list[bytes] = []
        self._buffered = 0
        self._upload_id: str | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._running: deque[tuple[int, Future[str]]] = deque()
        self._parts: builtins.list[tuple[int, str]] = []
        self._pos = 0
        self.closed = False
        self.etag: str | None = None

    def flush(self) -> None:
        return None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:
            raise ValueError("write to a closed MultipartWriter")
        chunk = data if isinstance(data, bytes) else bytes(data)  # the caller may reuse its buffer
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        self._pos += len(chunk)
        if self._buffered >= self.part_bytes:
            try:
                self._submit(self._take())
            except BaseException:
                self.abort()
                raise
        return len(chunk)

    def _take(self) -> PartBody:
        part, self._chunks, self._buffered = PartBody(self._chunks), [], 0
        return part

    def _submit(self, body: PartBody) -> None:
        """Start uploading ``body`` as the next part, once fewer than ``in_flight`` run."""
        if self._upload_id is None:
            self._upload_id = self.store.create_multipart(self.key)
            self._pool = ThreadPoolExecutor(self.in_flight, thread_name_prefix="lethe-upload")
        assert self._pool is not None
        while len(self._running) >= self.in_flight:
            self._collect_oldest()
        n = len(self._parts) + len(self._running) + 1
        fut = self._pool.submit(self.store.upload_part, self.key, self._upload_id, n, body)
        self._running.append((n, fut))

    def _collect_oldest(self) -> None:
        n, fut = self._running.popleft()
        self._parts.append((n, fut.result()))

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._upload_id is None:
                self.etag = self.store.put(self.key, b"".join(self._chunks), if_none_match=True)
            else:
                if self._buffered:
                    self._submit(self._take())
                while self._running:
                    self._collect_oldest()
                self.etag = self.store.complete_multipart(self.key, self._upload_id, self._parts)
                self._upload_id = None
        except BaseException:
            self.abort()
            raise
        finally:
            self._shutdown()
            self.closed = True

    def abort(self) -> None:
        self._shutdown()
        if self._upload_id is not None:
            self.store.abort_multipart(self.key, self._upload_id)
            self._upload_id = None
        self.closed = True

    def _shutdown(self) -> None:
        """Wait for the running parts (their outcome no longer matters), stop the pool."""
        for _, fut in self._running:
            fut.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._running.clear()
        self._chunks, self._buffered = [], 0

    def __enter__(self) -> MultipartWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
