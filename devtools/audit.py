"""The byte audit: does any object of a bucket (every version, every Parquet page
decompressed, index pieces and Avro manifests decoded) still hold a value? The demo ends
with it, and the erasure tests assert with it that an erased value is gone from storage.

The whole bucket is read, whatever the object: data files of every table, adopted originals
wherever they live (``raw/...``, outside any table prefix), index pieces, manifest segments,
erasure lists, manifests, the Iceberg view's metadata, GC workspaces and the lake's registry
and values objects (``_lethe/requests/``). :attr:`Audit.kinds` counts what was read per kind
(counts only, never a value), so a report can show that every kind was searched."""

from __future__ import annotations

import gzip
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors

__all__ = [
    "Audit",
    "Needle",
    "audit_bucket",
    "audit_forgotten",
    "object_kind",
    "parquet_pages",
]
_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}


def parquet_pages(body: bytes) -> Iterator[bytes]:
    """Every page of every column chunk of a Parquet file, decompressed (the bytes a
    reader decodes values from: dictionary pages hold the distinct values, PLAIN data pages
    the values themselves)."""
    from lethe.parquet.enums import DPH2, PH, PageType
    from lethe.parquet.footer import chunk_range, parse_tail, walk_pages
    from lethe.parquet.thrift import Struct

    footer = parse_tail(body, len(body))
    for rg in footer.metadata.row_groups:
        for chunk in rg.columns:
            codec = chunk.meta_data.codec
            for page in walk_pages(body, 0, chunk_range(chunk)):
                data = body[page.data_offset : page.end]
                size = page.header.uncompressed_page_size
                raw = b""
                if page.header.type == PageType.DATA_PAGE_V2:
                    v2 = page.header.struct.get(PH.DATA_PAGE_HEADER_V2)
                    levels = 0
                    compressed = True
                    if isinstance(v2, Struct):
                        for fid in (
                            DPH2.DEFINITION_LEVELS_BYTE_LENGTH,
                            DPH2.REPETITION_LEVELS_BYTE_LENGTH,
                        ):
                            n = v2.get(fid)
                            levels += n if isinstance(n, int) else 0
                        compressed = v2.get(DPH2.IS_COMPRESSED) is not False
                    raw, data, size = data[:levels], data[levels:], size - levels
                    if not compressed:
                        yield raw + data
                        continue
                if codec == 0:
                    yield raw + data
                elif codec in _CODECS:
                    out = pa.Codec(_CODECS[codec]).decompress(data, decompressed_size=size)
                    yield raw + out.to_pybytes()
                else:  # LZO, Hadoop-framed LZ4: pyarrow cannot decompress them standalone
                    raise errors.UnsupportedFile(f"codec {codec} in an audited file")


@dataclass(frozen=True, slots=True)
class Needle:
    """What to look for: exact byte strings (searched in raw objects and in decompressed
    Parquet pages) and decimal numbers (searched as whole JSON/CSV number tokens in objects
    that are not Parquet: manifests, DV container footers, uploads, GC workspace files)."""

    binary: tuple[bytes, ...]
    numbers: tuple[int, ...] = ()
    #: ``(column, value)``: values searched in decoded Parquet columns, the column of that
    #: name in data files and the ``value`` column of the pieces of an index on it (an
    #: integer is no byte string in DELTA_BINARY_PACKED or dictionary-encoded pages)
    values: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def row(cls, key: int, payload: str) -> Needle:
        """A row of the demo table: its int64 key as stored (little-endian) and in text,
        and its unique payload."""
        return cls((struct.pack("<q", key), payload.encode()), (key,))

    @classmethod
    def column(cls, column: str, value: Any) -> Needle:
        """A value of one column, wherever it is decoded: data files and index pieces."""
        return cls((), (), ((column, value),))


@dataclass(frozen=True, slots=True)
class Audit:
    """Where each needle was found: label -> sorted ``(object key, how)`` hits."""

    objects: int
    bytes: int
    parquet_files: int
    pages: int
    hits: Mapping[str, tuple[tuple[str, str], ...]]
    #: object versions read per kind (:func:`object_kind`): what the audit searched
    kinds: Mapping[str, int] = field(default_factory=dict)

    def found(self, label: str) -> tuple[str, ...]:
        return tuple(sorted({k for k, _ in self.hits.get(label, ())}))

    @property
    def clean(self) -> bool:
        """No needle found anywhere."""
        return not any(self.hits.values())

    def describe(self) -> str:
        """What was searched, by kind (counts only)."""
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items()))
        return (
            f"{self.objects} object version(s), {self.bytes:,} bytes, {self.parquet_files} "
            f"Parquet file(s), {self.pages} page(s) decompressed ({kinds})"
        )


def object_kind(key: str) -> str:
    """What an object of the bucket is, by its key (Lethe's layout, docs/format.md)."""
    parts = key.split("/")
    if "_lethe" in parts[:-1]:
        at = parts.index("_lethe")
        return "lake values" if parts[at + 1 : at + 2] == ["requests"] else "lake registry"
    marks = [
        ("index", "index pieces"),
        ("segments", "manifest segments"),
        ("erasures", "erasure lists"),
        ("tombstone", "deletion vectors"),
        ("metadata", "iceberg metadata"),
        ("_gc", "gc workspace"),
        ("_staging", "staging"),
        ("data", "data files"),
    ]
    for mark, kind in marks:
        if mark in parts[:-1]:
            return kind
    if "manifest" in parts[:-1] or parts[-1] == "_latest_manifest":
        return "manifests"
    if key.endswith(".parquet"):
        return "parquet outside a table (adopted originals, uploads)"
    return "other"


def audit_bucket(
    s3: Any,
    bucket: str,
    needles: Mapping[str, Needle],
    *,
    cache: dict[tuple[str, str | None, str], bytes] | None = None,
    versions: bool = True,
) -> Audit:
    """Read every object (and every old version, if any) of ``bucket`` and report where each
    needle occurs: raw bytes, decompressed Parquet pages, decimal text, or (for a needle's
    ``values``) decoded Parquet columns and index pieces.

    ``cache``: bodies already read, by (key, version id, ETag), reused and filled (a test that
    audits after every step reads each object version once). ``versions=False`` reads only
    the current objects (what a reader of an unversioned view sees)."""
    by_value = any(n.values for n in needles.values())
    # a number as JSON or CSV write it: not part of a word, a decimal or a quoted string
    # (the demo's payloads such as "view:865807" are strings)
    tokens = {
        label: [
            re.compile(rb"(?<![0-9A-Za-z_.\-])" + str(n).encode() + rb"(?![0-9A-Za-z_.\"])")
            for n in needle.numbers
        ]
        for label, needle in needles.items()
    }
    hits: dict[str, set[tuple[str, str]]] = {label: set() for label in needles}
    objects = total = files = pages = 0
    kinds: dict[str, int] = {}
    for key, version, etag in _all_versions(s3, bucket, versions=versions):
        body = cache.get((key, version, etag)) if cache is not None else None
        if body is None:
            kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
            if version and version != "null":
                kw["VersionId"] = version
            body = s3.get_object(**kw)["Body"].read()
            if cache is not None:
                cache[(key, version, etag)] = body
        name = key if not version or version == "null" else f"{key}?versionId={version}"
        objects += 1
        kinds[object_kind(key)] = kinds.get(object_kind(key), 0) + 1
        total += len(body)
        decoded: list[bytes] = []
        parquet = len(body) >= 12 and body[:4] == b"PAR1" and body[-4:] == b"PAR1"
        if parquet:
            decoded = list(parquet_pages(body))
            files += 1
            pages += len(decoded)
        texts = [body, *_unpacked(body)]  # gzip segments, Avro blocks of the Iceberg view
        columns = _Columns(key, body) if parquet and by_value else None
        for label, needle in needles.items():
            for column, value in needle.values:
                how = columns.holds(column, value) if columns is not None else None
                if how is not None:
                    hits[label].add((name, how))
            for b in needle.binary:
                if b in body:
                    hits[label].add((name, "raw bytes"))
                if any(b in page for page in decoded):
                    hits[label].add((name, "decoded Parquet page"))
                if any(b in t for t in texts[1:]):
                    hits[label].add((name, "decompressed bytes"))
            if not decoded and any(t.search(x) for t in tokens[label] for x in texts):
                hits[label].add((name, "decimal text"))
    found = {k: tuple(sorted(v)) for k, v in hits.items()}
    return Audit(objects, total, files, pages, found, kinds)


def audit_forgotten(
    s3: Any, wanted: Mapping[str, Mapping[str, Needle]]
) -> tuple[dict[str, Audit], dict[str, tuple[str, ...]]]:
    """The whole-bucket audit of forgotten values: per bucket of ``wanted``, every object
    version searched for its needles. Returns the audits by bucket and what was found, by
    ``"<bucket>: forgotten subject #<n>"`` (the needles' labels may name a value: never
    in the result) -> object keys; an empty dict when nothing was found."""
    audits: dict[str, Audit] = {}
    found: dict[str, tuple[str, ...]] = {}
    for bucket, needles in wanted.items():
        a = audits[bucket] = audit_bucket(s3, bucket, needles)
        for i, label in enumerate(needles):
            if a.found(label):
                found[f"{bucket}: forgotten subject #{i + 1}"] = a.found(label)
    return audits, found


class _Columns:
    """The decoded columns of one Parquet object, read on first need: an index piece's
    ``value`` stands for the column its key's directory names (``index/<column hash>/``)."""

    PIECE: ClassVar[list[str]] = ["value", "file", "pos"]

    def __init__(self, key: str, body: bytes) -> None:
        self.key = f"/{key}"
        self.file = pq.ParquetFile(pa.BufferReader(body))
        self.names = self.file.schema_arrow.names
        self.read: dict[str, pa.ChunkedArray] = {}

    def holds(self, column: str, value: Any) -> str | None:
        """How ``value`` of ``column`` is found here, or None."""
        from lethe.index.pieces import index_dir

        if f"/{index_dir(column)}" in self.key and self.names == self.PIECE:
            name, how = "value", "decoded index piece"
        elif column in self.names:
            name, how = column, "decoded Parquet column"
        else:
            return None
        if name not in self.read:
            self.read[name] = self.file.read(columns=[name]).column(0)
        col = self.read[name]
        try:
            wanted = pa.array([value]).cast(col.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        return how if pc.any(pc.is_in(col, value_set=wanted)).as_py() else None


def _unpacked(body: bytes) -> list[bytes]:
    """The decompressed content of a gzip object (manifest segments) or of the data blocks
    of an Avro object container (the Iceberg view's manifests, deflate or uncompressed)."""
    if body[:2] == b"\x1f\x8b":
        try:
            return [gzip.decompress(body)]
        except (OSError, EOFError):
            return []
    if body[:4] != b"Obj\x01":
        return []
    try:
        return _avro_blocks(body)
    except (ValueError, IndexError, zlib.error):
        return []


def _avro_long(buf: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), i


def _avro_blocks(body: bytes) -> list[bytes]:
    """Avro object container: magic, a metadata map (``avro.codec``), a 16-byte sync marker,
    then blocks of (count, size, bytes, sync)."""
    i, meta = 4, {}
    while True:
        count, i = _avro_long(body, i)
        if count == 0:
            break
        if count < 0:
            _, i = _avro_long(body, i)
            count = -count
        for _ in range(count):
            klen, i = _avro_long(body, i)
            k = body[i : i + klen].decode()
            i += klen
            vlen, i = _avro_long(body, i)
            meta[k] = body[i : i + vlen]
            i += vlen
    i += 16
    codec = meta.get("avro.codec", b"null")
    out: list[bytes] = []
    while i < len(body):
        _, i = _avro_long(body, i)
        size, i = _avro_long(body, i)
        block = body[i : i + size]
        i += size + 16
        out.append(zlib.decompress(block, -15) if codec == b"deflate" else block)
    return out


def _all_versions(
    s3: Any, bucket: str, *, versions: bool = True
) -> Iterator[tuple[str, str | None, str]]:
    """(key, version id, ETag) of every object version (or every current object)."""
    if not versions:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for o in page.get("Contents", []):
                yield str(o["Key"]), None, str(o.get("ETag", ""))
        return
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            yield str(v["Key"]), v.get("VersionId"), str(v.get("ETag", ""))
