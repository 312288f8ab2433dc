"""Raw uploads: what they are (format by name), which objects an input URI names, and the
request ids that make ingesting them idempotent."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lethe import errors
from lethe.storage.store import S3Store, parse_s3_uri

Format = Literal["csv", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "json", "parquet")

_EXTENSIONS: dict[str, Format] = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


# --- inputs ------------------------------------------------------------------------------------
def detect_format(key: str) -> Format | None:
    """The format an object name implies (``.csv``, ``.json``/``.jsonl``/``.ndjson``,
    ``.parquet``; CSV and JSON may end in ``.gz``), or None.

    >>> detect_format("incoming/2024/a.jsonl.gz"), detect_format("x.txt")
    ('json', None)
    """
    name = key.rsplit("/", 1)[-1].lower()
    if name.endswith(".gz"):
        name = name[:-3]
        fmt = _EXTENSIONS.get("." + name.rsplit(".", 1)[-1]) if "." in name else None
        return fmt if fmt in ("csv", "json") else None
    return _EXTENSIONS.get("." + name.rsplit(".", 1)[-1]) if "." in name else None


@dataclass(frozen=True, slots=True)
class InputObject:
    """One raw object to ingest, pinned to the ETag seen when it was listed."""

    bucket: str
    key: str
    size: int
    etag: str
    format: Format

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def compressed(self) -> bool:
        return self.key.lower().endswith(".gz")

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "etag": self.etag,
            "format": self.format,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> InputObject:
        return cls(d["bucket"], d["key"], int(d["size"]), d["etag"], d["format"])


def _ignored(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return not name or name.startswith(("_", "."))


def list_inputs(
    input_uri: str, *, fmt: Format | None = None, store: S3Store | None = None
) -> list[InputObject]:
    """The objects named by ``input_uri``: one object, or every object under a prefix.

    Zero-byte objects, "directory" markers and names starting with ``_`` or ``.`` (such as
    ``_SUCCESS``) are skipped. Without ``fmt`` the format comes from each name's extension.

    Raises:
        InvalidRequest: a bad URI, an unknown format, or an object whose format cannot be told
            from its name (pass ``fmt``).
    """
    if fmt is not None and fmt not in FORMATS:
        raise errors.InvalidRequest(f"format must be one of {FORMATS}, not {fmt!r}")
    bucket, prefix = parse_s3_uri(input_uri)
    store = store if store is not None and store.bucket == bucket else S3Store(bucket)
    found: list[tuple[str, int, str]] = []
    if prefix and not input_uri.endswith("/"):
        try:
            info = store.head(prefix)
            found.append((info.key, info.size, info.etag))
        except errors.NotFound:
            pass
    if not found:
        listing = prefix + "/" if prefix else ""
        found = [(o.key, o.size, o.etag) for o in store.list(listing)]
    out: list[InputObject] = []
    for key, size, etag in sorted(found):
        if size == 0 or key.endswith("/") or _ignored(key):
            continue
        f = fmt or detect_format(key)
        if f is None:
            raise errors.InvalidRequest(
                f"cannot tell the format of s3://{bucket}/{key} from its name; "
                "pass --format csv|json|parquet"
            )
        out.append(InputObject(bucket, key, size, etag, f))
    return out


def upload_request_id(bucket: str, key: str, etag: str) -> str:
    """The idempotency id of one uploaded object version: ``s3://bucket/key#etag``."""
    tag = etag.strip('"')
    return f"s3://{bucket}/{key}#{tag}"


def ingest_request_id(objects: Sequence[InputObject]) -> str:
    """A request id naming exactly this set of object versions (a re-run is a no-op).

    One object gives the same id as :func:`upload_request_id`, so an upload registered by the
    trigger and the same upload ingested by a job cannot both land.
    """
    if len(objects) == 1:
        o = objects[0]
        return upload_request_id(o.bucket, o.key, o.etag)
    h = hashlib.sha256()
    for o in sorted(objects, key=lambda o: (o.bucket, o.key)):
        h.update(upload_request_id(o.bucket, o.key, o.etag).encode() + b"\n")
    return f"ingest:{len(objects)}:{h.hexdigest()}"
