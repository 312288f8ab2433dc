"""Puffin containers (Iceberg Puffin v1) of deletion vectors: several DV blobs
(:mod:`lethe.dv.blob`) in one object. Pure (no I/O).

**Puffin container** (Iceberg Puffin v1)::

    "PFA1"  blob_1 ... blob_n  "PFA1" footer-json  u32 LE json-size  4 flag bytes  "PFA1"

The footer JSON is uncompressed; DV blobs carry ``snapshot-id = sequence-number = -1`` and the
properties ``referenced-data-file`` and ``cardinality``, as the Iceberg spec requires. A
manifest references one DV by ``(container, offset, length, cardinality, crc)``.

Example:
    >>> from pyroaring import BitMap64
    >>> from lethe.dv.blob import decode_dv
    >>> body, [loc] = write_puffin([deletion_vector_blob(BitMap64([3]), data_file="s3://b/f")])
    >>> decode_dv(read_puffin_blob(body, loc.offset, loc.length)) == BitMap64([3])
    True
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from lethe import errors
from lethe.dv.blob import check_frame, encode_dv

__all__ = [
    "DELETION_VECTOR_V1",
    "PUFFIN_MAGIC",
    "BlobLocation",
    "BlobMetadata",
    "PuffinBlob",
    "deletion_vector_blob",
    "puffin_footer_size",
    "read_puffin_blob",
    "read_puffin_footer",
    "write_puffin",
]

PUFFIN_MAGIC = b"PFA1"
DELETION_VECTOR_V1 = "deletion-vector-v1"
_PROP_DATA_FILE = "referenced-data-file"
_PROP_CARDINALITY = "cardinality"
_PUFFIN_TRAILER = 12  # footer payload size + flags + magic
_FLAG_COMPRESSED = 0x01
_I32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PuffinBlob:
    """A blob to write into a Puffin container, with its footer metadata.

    Attributes:
        data: The blob bytes (for a DV, the output of :func:`encode_dv`).
        type: Puffin blob type.
        fields: Field ids the blob was computed for (empty for DVs).
        snapshot_id: Snapshot id; ``-1`` for DVs (unknown when the container is written).
        sequence_number: Sequence number; ``-1`` for DVs.
        properties: Blob properties; DVs need ``referenced-data-file`` and ``cardinality``.
    """

    data: bytes
    type: str = DELETION_VECTOR_V1
    fields: tuple[int, ...] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BlobLocation:
    """Where a written blob lies in its container: bytes ``[offset, offset + length)``."""

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """One entry of a Puffin footer (``BlobMetadata`` of the Puffin spec)."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


def deletion_vector_blob(bm: BitMap64, *, data_file: str) -> PuffinBlob:
    """A ready ``deletion-vector-v1`` Puffin blob for the DV of one data file.

    Args:
        bm: The deleted positions.
        data_file: The data file's location, as Iceberg would record it (``referenced-data-file``).
    """
    return PuffinBlob(
        data=encode_dv(bm),
        properties={_PROP_DATA_FILE: data_file, _PROP_CARDINALITY: str(len(bm))},
    )


def _validate_dv_blob(i: int, blob: PuffinBlob) -> None:
    props = blob.properties
    if _PROP_DATA_FILE not in props:
        raise errors.InvalidRequest(f"DV blob {i} lacks the {_PROP_DATA_FILE!r} property")
    card = props.get(_PROP_CARDINALITY)
    if card is None or not card.isascii() or not card.isdigit():
        raise errors.InvalidRequest(
            f"DV blob {i} needs a non-negative decimal {_PROP_CARDINALITY!r} property, got {card!r}"
        )
    if blob.snapshot_id != -1 or blob.sequence_number != -1:
        raise errors.InvalidRequest(
            f"DV blob {i}: snapshot-id and sequence-number must be -1 (Puffin v1 DV rule)"
        )
    try:
        check_frame(blob.data, expected_crc=None)
    except errors.CorruptDeletionVector as e:
        raise errors.InvalidRequest(f"DV blob {i} is not a valid DV blob: {e}") from e


def write_puffin(
    blobs: Sequence[PuffinBlob], *, properties: Mapping[str, str] | None = None
) -> tuple[bytes, list[BlobLocation]]:
    """Assemble a Puffin container (uncompressed footer) holding ``blobs`` in order.

    Args:
        blobs: The blobs; those of type ``deletion-vector-v1`` are checked against the Iceberg
            rules (properties, ``-1`` ids, a well-framed blob).
        properties: File-level footer properties; defaults to ``{"created-by": "Lethe"}``.

    Returns:
        The container bytes and, per blob, its location within them.

    Raises:
        InvalidRequest: A DV blob breaks the Iceberg rules.

    Example:
        >>> body, locs = write_puffin([PuffinBlob(b"xy", type="t", properties={})])
        >>> body[:4], locs, body[-4:]
        (b'PFA1', [BlobLocation(offset=4, length=2)], b'PFA1')
    """
    parts: list[bytes] = [PUFFIN_MAGIC]
    locations: list[BlobLocation] = []
    entries: list[dict[str, Any]] = []
    offset = len(PUFFIN_MAGIC)
    for i, blob in enumerate(blobs):
        if blob.type == DELETION_VECTOR_V1:
            _validate_dv_blob(i, blob)
        entry: dict[str, Any] = {
            "type": blob.type,
            "fields": list(blob.fields),
            "snapshot-id": blob.snapshot_id,
            "sequence-number": blob.sequence_number,
            "offset": offset,
            "length": len(blob.data),
        }
        if blob.properties:
            entry["properties"] = dict(blob.properties)
        entries.append(entry)
        locations.append(BlobLocation(offset=offset, length=len(blob.data)))
        parts.append(bytes(blob.data))
        offset += len(blob.data)
    footer: dict[str, Any] = {"blobs": entries}
    file_props = {"created-by": "Lethe"} if properties is None else dict(properties)
    if file_props:
        footer["properties"] = file_props
    payload = json.dumps(footer, ensure_ascii=False, separators=(",", ":")).encode()
    if len(payload) > _I32_MAX:
        raise errors.InvalidRequest("Puffin footer exceeds 2 GiB")
    parts += [PUFFIN_MAGIC, payload, struct.pack("<i", len(payload)), bytes(4), PUFFIN_MAGIC]
    return b"".join(parts), locations


def puffin_footer_size(tail: bytes) -> int:
    """Size of a Puffin footer (from its leading magic to the end of file).

    Args:
        tail: At least the last 12 bytes of the container.

    Returns:
        How many bytes at the end of the file :func:`read_puffin_footer` needs.

    Raises:
        CorruptDeletionVector: The tail does not end like a Puffin file.
    """
    if len(tail) < _PUFFIN_TRAILER:
        raise errors.CorruptDeletionVector(f"Puffin tail of {len(tail)} bytes is too short")
    if tail[-4:] != PUFFIN_MAGIC:
        raise errors.CorruptDeletionVector(
            f"Puffin file ends with {bytes(tail[-4:]).hex()}, expected magic {PUFFIN_MAGIC.hex()}"
        )
    size = int.from_bytes(tail[-12:-8], "little", signed=True)
    if size < 0:
        raise errors.CorruptDeletionVector(f"Puffin footer payload size {size} is negative")
    return size + len(PUFFIN_MAGIC) + _PUFFIN_TRAILER


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise errors.CorruptDeletionVector(f"Puffin footer: {what}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str_map(v: object, what: str) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(x, str) for kv in v.items() for x in kv):
        raise errors.CorruptDeletionVector(
            f"Puffin footer: {what} is not a string-to-string object"
        )
    return dict(v)


def read_puffin_footer(data_tail: bytes, file_size: int) -> list[BlobMetadata]:
    """Parse the footer of a Puffin container from the end of the file.

    Args:
        data_tail: The last ``len(data_tail)`` bytes of the file; at least
            :func:`puffin_footer_size` of them (a speculative tail GET usually suffices).
        file_size: The size of the whole file.

    Returns:
        The blob entries, in footer order, each checked to lie between the leading magic and
        the footer.

    Raises:
        InvalidRequest: ``data_tail`` is shorter than the footer (fetch more and retry) or
            longer than ``file_size``.
        CorruptDeletionVector: Bad magic, a compressed footer (unsupported), malformed JSON, or a
            blob outside the file's blob region.
    """
    if len(data_tail) > file_size:
        raise errors.InvalidRequest(f"tail of {len(data_tail)} bytes exceeds file size {file_size}")
    need = puffin_footer_size(data_tail)
    if need + len(PUFFIN_MAGIC) > file_size:
        raise errors.CorruptDeletionVector(
            f"Puffin footer of {need} bytes does not fit a {file_size}-byte file"
        )
    if len(data_tail) < need:
        raise errors.InvalidRequest(
            f"Puffin footer needs the last {need} bytes, only {len(data_tail)} given"
        )
    footer = data_tail[len(data_tail) - need :]
    _expect(footer[:4] == PUFFIN_MAGIC, "missing magic before the payload")
    if len(data_tail) == file_size:
        _expect(data_tail[:4] == PUFFIN_MAGIC, "file does not start with magic")
    if footer[-8] & _FLAG_COMPRESSED:
        raise errors.CorruptDeletionVector("compressed Puffin footers are not supported")
    try:
        doc = json.loads(bytes(footer[4:-_PUFFIN_TRAILER]).decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise errors.CorruptDeletionVector(f"Puffin footer is not UTF-8 JSON: {e}") from e
    _expect(isinstance(doc, dict) and isinstance(doc.get("blobs"), list), "no 'blobs' list")
    return [_blob_entry(i, b, file_size - need) for i, b in enumerate(doc["blobs"])]


def _blob_entry(i: int, b: Any, region_end: int) -> BlobMetadata:
    """Footer entry ``i``, checked to lie in the blob region ``[4, region_end)``."""
    if not isinstance(b, dict):
        raise errors.CorruptDeletionVector(f"Puffin footer: blob {i} is not an object")
    for key in ("snapshot-id", "sequence-number", "offset", "length"):
        _expect(_is_int(b.get(key)), f"blob {i} has no integer {key!r}")
    _expect(isinstance(b.get("type"), str), f"blob {i} has no string 'type'")
    fields: Any = b.get("fields")
    _expect(
        isinstance(fields, list) and all(_is_int(f) for f in fields),
        f"blob {i} has no integer list 'fields'",
    )
    codec = b.get("compression-codec")
    _expect(codec is None or isinstance(codec, str), f"blob {i} has a non-string codec")
    offset, length = b["offset"], b["length"]
    _expect(
        length >= 0 and len(PUFFIN_MAGIC) <= offset and offset + length <= region_end,
        f"blob {i} at [{offset}, {offset + length}) lies outside [4, {region_end})",
    )
    return BlobMetadata(
        type=b["type"],
        fields=tuple(fields),
        snapshot_id=b["snapshot-id"],
        sequence_number=b["sequence-number"],
        offset=offset,
        length=length,
        compression_codec=codec,
        properties=_str_map(b.get("properties", {}), f"blob {i} properties"),
    )


def read_puffin_blob(data: bytes, offset: int, length: int, *, base: int = 0) -> bytes:
    """Cut one blob out of a container, or out of a ranged read of it.

    Args:
        data: Container bytes, starting at file offset ``base``.
        offset: Blob offset within the file.
        length: Blob length.
        base: File offset of ``data[0]`` (0 when ``data`` is the whole container).

    Raises:
        CorruptDeletionVector: ``[offset, offset + length)`` is not inside ``data``.
    """
    start = offset - base
    if offset < 0 or length < 0 or start < 0 or start + length > len(data):
        raise errors.CorruptDeletionVector(
            f"blob [{offset}, {offset + length}) is outside the {len(data)} bytes at {base}"
        )
    return bytes(data[start : start + length])
