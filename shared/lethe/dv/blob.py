"""Deletion vectors: the Iceberg v3 / Delta DV blob and position helpers.

A deletion vector (DV) is the set of deleted row positions of one data file, held as a
:class:`pyroaring.BitMap64`. This module is pure (no I/O): it turns DVs into bytes and back
(:mod:`lethe.dv.puffin` packs several blobs into one container), and offers the vectorized helpers that readers
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

Example:
    >>> from pyroaring import BitMap64
    >>> blob = encode_dv(BitMap64([1, 5, 2**33]))
    >>> blob[4:8].hex()
    'd1d33964'
    >>> sorted(decode_dv(blob))
    [1, 5, 8589934592]
"""

from __future__ import annotations

import array
import base64
import struct
import zlib

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from lethe import errors

__all__ = [
    "DV_MAGIC",
    "MAX_POSITION",
    "b64_of",
    "bitmap_from_positions",
    "bitmap_of",
    "check_frame",
    "decode_dv",
    "dv_crc",
    "encode_dv",
    "keep_mask",
    "map_positions",
    "positions_in_range",
    "rebase_positions",
]

DV_MAGIC = b"\xd1\xd3\x39\x64"
MAX_POSITION = 2**63 - 1
"""Largest position a DV may hold: the spec keeps the most significant bit 0."""

_MAX_KEY = MAX_POSITION >> 32
_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX_CARDINALITY = 4096
_BITSET_BYTES = 8192
_FRAME_BYTES = 12  # length + magic + crc
_U32_MAX = 2**32 - 1


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
    _framed(blob)
    return int.from_bytes(blob[-4:], "big")


def _framed(blob: bytes) -> None:
    if len(blob) < _FRAME_BYTES:
        raise errors.CorruptDeletionVector(
            f"deletion vector blob of {len(blob)} bytes is shorter than its {_FRAME_BYTES}-byte frame"
        )


def check_frame(blob: bytes, *, expected_crc: int | None) -> memoryview:
    """Validate length, magic and CRC of a DV blob; return a view of its vector."""
    _framed(blob)
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
    vector = check_frame(blob, expected_crc=expected_crc)
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
