"""What crosses the wire to S3, as the store gives it to the library: what S3 answers
(object infos, GET results, multipart uploads), botocore's errors as :mod:`lethe.errors`, and
the checksum every upload carries."""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from datetime import datetime

from lethe import errors

__all__ = ["GetResult", "MultipartUpload", "ObjectInfo", "crc32_b64", "translate_error"]


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What HEAD or LIST says of one object."""

    key: str
    size: int
    etag: str
    last_modified: datetime | None = None


@dataclass(frozen=True, slots=True)
class GetResult:
    body: bytes
    etag: str
    size: int  # size of the whole object (from Content-Range when ranged)


@dataclass(frozen=True, slots=True)
class MultipartUpload:
    key: str
    upload_id: str
    initiated: datetime | None = None


_NOT_FOUND = {"NoSuchKey", "NotFound", "NoSuchBucket", "NoSuchUpload", "404"}
_PRECONDITION = {"PreconditionFailed", "412"}
_CONFLICT = {"ConditionalRequestConflict", "OperationAborted", "409"}
_THROTTLE = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "503"}


def translate_error(e: Exception, what: str) -> errors.StoreError:
    """Map a botocore error onto the typed store errors (callers ``raise ... from e``)."""
    from botocore.exceptions import ClientError

    if isinstance(e, ClientError):
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        msg = f"{what}: {code or status} {e.response.get('Error', {}).get('Message', '')}".strip()
        if code in _PRECONDITION or status == 412:
            return errors.PreconditionFailed(msg)
        if code in _CONFLICT or status == 409:
            return errors.ConditionalRequestConflict(msg)
        if code in _NOT_FOUND or status == 404:
            return errors.NotFound(msg)
        if code in {"AccessDenied", "403"} or status == 403:
            return errors.AccessDenied(msg)
        if code in _THROTTLE or status == 503:
            return errors.Throttled(msg)
        return errors.StoreError(msg)
    return errors.StoreError(f"{what}: {type(e).__name__}: {e}")


def crc32_b64(body: bytes) -> str:
    """The ``x-amz-checksum-crc32`` of ``body``: its CRC-32, big-endian, base64.

    Every upload carries it (S3 refuses a body that does not match). Computed here with
    zlib, which reads ``body`` in place and releases the GIL, rather than by botocore, which
    copies the body through a file object first (and cannot see a :class:`PartBody`'s
    buffers).

    >>> crc32_b64(b"hello")
    'NhCmhg=='
    """
    return base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode("ascii")
