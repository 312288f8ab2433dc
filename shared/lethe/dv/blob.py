"""Deletion vectors: the Iceberg v3 / Delta DV blob, Puffin containers, and position helpers.

A deletion vector (DV) is the set of deleted row positions of one data file, held as a
:class:`pyroaring.BitMap64`. This module is pure (no I/O): it turns DVs into bytes and back,
packs several DV blobs into one Puffin container, and offers the vectorized helpers that readers
(:func:`positions_in_range`, :func:`keep_mask`) and row-group splices (:func:`rebase_positions`,
:func:`map_positions`) need.

**DV blob** (Iceberg ``deletion-vector-v1``, byte for byte the blob Delta stores)::

    u32 BE  length of (magic + vector)
    4 B     magic D1 D3 39 64
    ...     vector: portable 64-bit Roaring serialization
            (u64 LE bucket count, then per bucket in ascending key order:
             u32 LE key = high 32 bits, 32-bit portable Roaring bitmap of the low 32 bits)
    u32 BE  CRC-32 of (magic + vector)

Positions must be below ``2**63`` (the spec reserves the most significant bit).

**Puffin container** (Iceberg Puffin v1)::

    "PFA1"  blob_1 ... blob_n  "PFA1" footer-json  u32 LE json-size  4 flag bytes  "PFA1"

The footer JSON is uncompressed; DV blobs carry ``snapshot-id = sequence-number = -1`` and the
properties ``referenced-data-file`` and ``cardinality``, as the Iceberg spec requires. A
manifest references one DV by ``(container, offset, length, cardinality, crc)``.

Example:
    >>> from pyroaring import BitMap64
    >>> blob = encode_dv(BitMap64([1, 5, 2**33]))
    >>> blob[4:8].hex()
    'd1d33964'
    >>> sorted(decode_dv(blob))
    [1, 5, 8589934592]
    >>> body, [loc] = write_puffin([deletion_vector_blob(BitMap64([3]), data_file="s3://b/f")])
    >>> decode_dv(read_puffin_blob(body, loc.offset, loc.length)) == BitMap64([3])
    True
"""

from __future__ import annotations

import array
import base64
import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from lethe import errors

__all__ = [
    "DELETION_VECTOR_V1",
    "DV_MAGIC",
    "MAX_POSITION",
    "PUFFIN_MAGIC",
    "BlobLocation",
    "BlobMetadata",
    "PuffinBlob",
    "b64_of",
    "bitmap_from_positions",
    "bitmap_of",
    "decode_dv",
    "deletion_vector_blob",
    "dv_crc",
    "encode_dv",
    "keep_mask",
    "map_positions",
    "positions_in_range",
    "puffin_footer_size",
    "read_puffin_blob",
    "read_puffin_footer",
    "rebase_positions",
    "write_puffin",
]

DV_MAGIC = b"\xd1\xd3\x39\x64"
PUFFIN_MAGIC = b"PFA1"
DELETION_VECTOR_V1 = "deletion-vector-v1"
MAX_POSITION = 2**63 - 1
"""Largest position a DV may hold: the spec keeps the most significant bit 0."""

_PROP_DATA_FILE = "referenced-data-file"
_PROP_CARDINALITY = "cardinality"
_MAX_KEY = MAX_POSITION >> 32
_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX_CARDINALITY = 4096
_BITSET_BYTES = 8192
_FRAME_BYTES = 12  # length + magic + crc
_PUFFIN_TRAILER = 12  # footer payload size + flags + magic
_FLAG_COMPRESSED = 0x01
_U32_MAX = 2**32 - 1
_I32_MAX = 2**31 - 1


# --- the DV blob ---------------------------------------------------------------------------
def encode_dv(bm: BitMap64) -> bytes:
    """Serialize a DV as an Iceberg ``deletion-vector-v1`` (= Delta) blob.

    The bitmap is run-optimized on a copy (the caller's bitmap is not touched) and written in the
    portable 64-bit Roaring format, which is what ``BitMap64.serialize`` produces.

    Args:
        bm: Deleted row positions, each in ``[0, MAX_POSITION]``.

    Returns:
        ``length (u32 BE) | D1 D3 39 64 | vector | CRC-32 (u32 BE) of magic + vector``.

    Raises:
        InvalidRequest: A position is above :data:`MAX_POSITION`, or the blob would not fit the
            32-bit length field.

    Example:
        >>> from pyroaring import BitMap64
        >>> encode_dv(BitMap64()).hex()
        '0000000cd1d339640000000000000000bf18480c'
    """
    if bm and bm.max() > MAX_POSITION:
        raise errors.InvalidRequest(
            f"deletion vector position {bm.max()} is above the spec's maximum {MAX_POSITION}"
        )
    optimized = bm.copy()
    optimized.run_optimize()
    body = DV_MAGIC + optimized.serialize()
    if len(body) > _U32_MAX:
        raise errors.InvalidRequest(f"deletion vector of {len(body)} bytes exceeds 4 GiB")
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def dv_crc(blob: bytes) -> int:
    """The CRC-32 stored in a DV blob (its last four bytes, big-endian), not recomputed.

    Raises:
        CorruptDeletionVector: The blob is too short to hold a CRC.
    """
    if len(blob) < _FRAME_BYTES:
        raise errors.CorruptDeletionVector(
            f"deletion vector blob of {len(blob)} bytes is shorter than its {_FRAME_BYTES}-byte frame"
        )
    return int.from_bytes(blob[-4:], "big")


def _check_frame(blob: bytes, *, expected_crc: int | None) -> memoryview:
    """Validate length, magic and CRC of a DV blob; return a view of its vector."""
    if len(blob) < _FRAME_BYTES:
        raise errors.CorruptDeletionVector(
            f"deletion vector blob of {len(blob)} bytes is shorter than its {_FRAME_BYTES}-byte frame"
        )
    declared = int.from_bytes(blob[:4], "big")
    if declared != len(blob) - 8:
        raise errors.CorruptDeletionVector(
            f"deletion vector length field says {declared} bytes of magic + vector, "
            f"the blob holds {len(blob) - 8} (truncated or padded blob)"
        )
    if blob[4:8] != DV_MAGIC:
        raise errors.CorruptDeletionVector(
            f"deletion vector magic is {bytes(blob[4:8]).hex()}, expected {DV_MAGIC.hex()}"
        )
    view = memoryview(blob)
    stored = int.from_bytes(blob[-4:], "big")
    actual = zlib.crc32(view[4:-4])
    if actual != stored:
        raise errors.CorruptDeletionVector(
            f"deletion vector CRC-32 mismatch: blob stores {stored:#010x}, content has {actual:#010x}"
        )
    if expected_crc is not None and stored != expected_crc:
        raise errors.CorruptDeletionVector(
            f"deletion vector CRC-32 {stored:#010x} differs from the expected {expected_crc:#010x}"
        )
    return view[8:-4]


def decode_dv(
    blob: bytes, *, expected_crc: int | None = None, expected_cardinality: int | None = None
) -> BitMap64:
    """Parse and validate a ``deletion-vector-v1`` blob.

    Args:
        blob: The exact blob bytes (e.g. the ranged GET ``[offset, offset+length)`` of a
            container).
        expected_crc: If given, the CRC recorded by the manifest; the blob's must equal it.
        expected_cardinality: If given, the number of positions the manifest recorded.

    Returns:
        The deleted positions.

    Raises:
        CorruptDeletionVector: Wrong length, magic, CRC, cardinality, a malformed vector, or a
            position above :data:`MAX_POSITION`.
    """
    vector = _check_frame(blob, expected_crc=expected_crc)
    end = _portable64_end(vector)
    if end != len(vector):
        raise errors.CorruptDeletionVector(
            f"deletion vector has {len(vector) - end} unexpected bytes after its Roaring bitmap"
        )
    try:
        bm = BitMap64.deserialize(bytes(vector))
    except ValueError as e:
        raise errors.CorruptDeletionVector(f"deletion vector Roaring bitmap is invalid: {e}") from e
    if expected_cardinality is not None and len(bm) != expected_cardinality:
        raise errors.CorruptDeletionVector(
            f"deletion vector holds {len(bm)} positions, expected {expected_cardinality}"
        )
    return bm


def _portable64_end(buf: memoryview) -> int:
    """Walk a portable 64-bit Roaring serialization; return where it ends.

    Checks the structure (sizes, ascending keys below ``2**31``) that the CRC cannot: a blob
    written by a buggy encoder carries a valid CRC.
    """
    if len(buf) < 8:
        raise errors.CorruptDeletionVector("deletion vector is too short for its bucket count")
    (buckets,) = struct.unpack_from("<Q", buf, 0)
    pos = 8
    if buckets > (len(buf) - 8) // 12:  # every bucket needs a key and an 8-byte empty bitmap
        raise errors.CorruptDeletionVector(
            f"deletion vector claims {buckets} buckets in {len(buf)} bytes"
        )
    last_key = -1
    for _ in range(buckets):
        if pos + 4 > len(buf):
            raise errors.CorruptDeletionVector("deletion vector is truncated inside a bucket key")
        (key,) = struct.unpack_from("<I", buf, pos)
        if key <= last_key:
            raise errors.CorruptDeletionVector("deletion vector bucket keys are not ascending")
        if key > _MAX_KEY:
            raise errors.CorruptDeletionVector(
                f"deletion vector bucket key {key:#x} sets the reserved most significant bit"
            )
        last_key = key
        pos = _portable32_end(buf, pos + 4)
    return pos


def _portable32_end(buf: memoryview, pos: int) -> int:
    """Walk one portable 32-bit Roaring bitmap starting at ``pos``; return where it ends."""

    def need(n: int) -> None:
        if pos + n > len(buf):
            raise errors.CorruptDeletionVector("deletion vector is truncated inside a bitmap")

    need(4)
    (cookie,) = struct.unpack_from("<I", buf, pos)
    run_flags = b""
    if cookie == _SERIAL_COOKIE_NO_RUNCONTAINER:
        need(8)
        (size,) = struct.unpack_from("<I", buf, pos + 4)
        pos += 8
        has_offsets = True
    elif cookie & 0xFFFF == _SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        pos += 4
        need((size + 7) // 8)
        run_flags = bytes(buf[pos : pos + (size + 7) // 8])
        pos += (size + 7) // 8
        has_offsets = size >= _NO_OFFSET_THRESHOLD
    else:
        raise errors.CorruptDeletionVector(f"unknown Roaring cookie {cookie:#010x}")
    if size > 1 << 16:
        raise errors.CorruptDeletionVector(f"Roaring bitmap claims {size} containers")
    need(4 * size)
    header = struct.unpack_from(f"<{2 * size}H", buf, pos)
    pos += 4 * size
    if has_offsets:
        need(4 * size)
        pos += 4 * size
    for i in range(size):
        if run_flags and run_flags[i >> 3] >> (i & 7) & 1:
            need(2)
            (runs,) = struct.unpack_from("<H", buf, pos)
            pos += 2 + 4 * runs
        else:
            card = header[2 * i + 1] + 1
            pos += 2 * card if card <= _ARRAY_MAX_CARDINALITY else _BITSET_BYTES
        need(0)
    return pos


# --- Puffin containers ---------------------------------------------------------------------
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
        _check_frame(blob.data, expected_crc=None)
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
    flags = footer[-8:-4]
    if flags[0] & _FLAG_COMPRESSED:
        raise errors.CorruptDeletionVector("compressed Puffin footers are not supported")
    try:
        doc = json.loads(bytes(footer[4:-_PUFFIN_TRAILER]).decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise errors.CorruptDeletionVector(f"Puffin footer is not UTF-8 JSON: {e}") from e
    _expect(isinstance(doc, dict) and isinstance(doc.get("blobs"), list), "no 'blobs' list")
    blob_region_end = file_size - need
    out: list[BlobMetadata] = []
    for i, b in enumerate(doc["blobs"]):
        _expect(isinstance(b, dict), f"blob {i} is not an object")
        for key in ("snapshot-id", "sequence-number", "offset", "length"):
            _expect(_is_int(b.get(key)), f"blob {i} has no integer {key!r}")
        _expect(isinstance(b.get("type"), str), f"blob {i} has no string 'type'")
        fields = b.get("fields")
        _expect(
            isinstance(fields, list) and all(_is_int(f) for f in fields),
            f"blob {i} has no integer list 'fields'",
        )
        codec = b.get("compression-codec")
        _expect(codec is None or isinstance(codec, str), f"blob {i} has a non-string codec")
        offset, length = b["offset"], b["length"]
        _expect(
            length >= 0 and len(PUFFIN_MAGIC) <= offset and offset + length <= blob_region_end,
            f"blob {i} at [{offset}, {offset + length}) lies outside [4, {blob_region_end})",
        )
        out.append(
            BlobMetadata(
                type=b["type"],
                fields=tuple(fields),
                snapshot_id=b["snapshot-id"],
                sequence_number=b["sequence-number"],
                offset=offset,
                length=length,
                compression_codec=codec,
                properties=_str_map(b.get("properties", {}), f"blob {i} properties"),
            )
        )
    return out


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


# --- positions ------------------------------------------------------------------------------
def bitmap_from_positions(positions: npt.ArrayLike) -> BitMap64:
    """Build a bitmap from an array of non-negative positions (any order, duplicates allowed).

    Much faster than ``BitMap64(ndarray)`` or ``update`` for millions of positions.
    """
    arr = np.ascontiguousarray(positions, dtype=np.uint64)
    if arr.size > 1 and bool(np.any(arr[1:] < arr[:-1])):
        arr = np.sort(arr)  # CRoaring appends sorted input about twice as fast
    return BitMap64(array.array("Q", arr.tobytes()))


def _as_array(bm: BitMap64) -> npt.NDArray[np.uint64]:
    return np.frombuffer(bm.to_array(), dtype=np.uint64)


def _in_range(bm: BitMap64, start: int, stop: int) -> BitMap64:
    """The positions of ``bm`` in ``[start, stop)``, as a bitmap."""
    if not bm:
        return BitMap64()
    start = max(start, bm.min())
    stop = min(stop, bm.max() + 1)
    if stop <= start:
        return BitMap64()
    if stop - start <= 1 << 32:  # a range bitmap of at most two buckets: intersect
        window = BitMap64()
        window.add_range(start, stop)
        return bm & window
    lo = bm.rank(start - 1) if start else 0  # sparse and huge: slice by rank instead
    return bm[lo : bm.rank(stop - 1)]


def positions_in_range(bm: BitMap64, start: int, stop: int) -> npt.NDArray[np.uint64]:
    """Deleted positions in ``[start, stop)``, ascending.

    A bitmap intersection with the range, then one copy out: measured at 0.03 ms for 1M rows
    and 10k deletes, 0.5 ms for 1M rows and 100k (about 8x faster than rank slicing and 20x
    faster than ``iter_equal_or_larger``).

    Example:
        >>> from pyroaring import BitMap64
        >>> positions_in_range(BitMap64([1, 5, 9]), 2, 9).tolist()
        [5]
    """
    return _as_array(_in_range(bm, start, stop))


def keep_mask(bm: BitMap64, start: int, n: int) -> npt.NDArray[np.bool_]:
    """Mask of the ``n`` rows at positions ``start, ..., start + n - 1``: ``True`` = row kept.

    Meant for ``batch.filter(keep_mask(dv, first_row_of_batch, batch.num_rows))``.

    Example:
        >>> from pyroaring import BitMap64
        >>> keep_mask(BitMap64([1, 3, 10]), 1, 4).tolist()
        [False, True, False, True]
    """
    mask = np.ones(n, dtype=np.bool_)
    if n > 0:
        mask[positions_in_range(bm, start, start + n) - np.uint64(start)] = False
    return mask


def rebase_positions(bm: BitMap64, removed: BitMap64) -> BitMap64:
    """The DV of a file after the rows at ``removed`` were physically cut out of it.

    Positions in ``removed`` vanish (those rows no longer exist); every other position ``p``
    moves down by the number of removed positions below it. Vectorized: one ``searchsorted``.

    Args:
        bm: The DV of the old file.
        removed: Row positions of the old file that the new file no longer has.

    Example:
        >>> from pyroaring import BitMap64
        >>> sorted(rebase_positions(BitMap64([0, 2, 5, 9]), BitMap64([2, 3, 7])))
        [0, 3, 6]
    """
    kept = bm - removed
    if not kept or not removed or removed.min() > kept.max():
        return kept
    k = _as_array(kept)
    shift = np.searchsorted(_as_array(removed), k).astype(np.uint64)
    return bitmap_from_positions(k - shift)


def map_positions(bm: BitMap64, mapping: npt.ArrayLike) -> BitMap64:
    """Map DV positions through an old -> new row map (e.g. of a compaction).

    Args:
        bm: The DV of the old file.
        mapping: ``mapping[p]`` is the new position of old row ``p``, or ``-1`` if that row is
            gone (its deletion then vanishes with it). Must cover every position of ``bm``.

    Raises:
        InvalidRequest: ``mapping`` is not a 1-D integer array, is too short, or maps two deleted
            rows to one new row.

    Example:
        >>> from pyroaring import BitMap64
        >>> sorted(map_positions(BitMap64([0, 1, 3]), [10, -1, 11, 12]))
        [10, 12]
    """
    table = np.asarray(mapping)
    if table.ndim != 1 or not (table.size == 0 or np.issubdtype(table.dtype, np.integer)):
        raise errors.InvalidRequest("position mapping must be a 1-D integer array")
    if not bm:
        return BitMap64()
    if bm.max() >= table.size:
        raise errors.InvalidRequest(
            f"position mapping covers {table.size} rows, the DV has position {bm.max()}"
        )
    new = table[_as_array(bm)]
    new = new[new >= 0]
    out = bitmap_from_positions(new)
    if len(out) != new.size:
        raise errors.InvalidRequest("position mapping sends two deleted rows to the same new row")
    return out


def bitmap_of(b64: str) -> BitMap64:
    """A base64 portable Roaring bitmap (empty string: empty)."""
    return BitMap64.deserialize(base64.b64decode(b64)) if b64 else BitMap64()


def b64_of(bm: BitMap64) -> str:
    """The base64 portable Roaring bitmap of ``bm`` (empty: the empty string)."""
    return base64.b64encode(bm.serialize()).decode("ascii") if bm else ""
