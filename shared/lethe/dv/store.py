"""Deletion vectors in storage: the one way a DV is loaded.

A DV reference (:class:`~lethe.catalog.manifest.DVRef`) names its blob inline (base64) or as a byte
range of a Puffin container under ``tombstone/``. :func:`blob_bytes` reads the blob (one
ranged GET), :func:`checked` decodes it and checks it against what the manifest recorded (the
blob's CRC-32 and the number of positions), :func:`load` does both, :func:`load_many` for
many files at once (one GET per container when their blobs lie close). Every reader of DVs
(deletes, scans, erase, compaction, verify, the index check, the Iceberg view) loads them
here. :func:`write_container` writes ready blobs as one write-once Puffin container and
returns each file's reference into it; :func:`write_dvs` does so for bitmaps.

>>> from lethe.dv.blob import encode_dv
>>> from lethe.catalog.manifest import DVRef
>>> import base64, zlib
>>> blob = encode_dv(BitMap64([3, 7]))
>>> ref = DVRef(inline=base64.b64encode(blob).decode(), length=len(blob), cardinality=2,
...             crc32=int.from_bytes(blob[-4:], "big"))
>>> sorted(load(None, "", ref))
[3, 7]
>>> checked(blob, ref.model_copy(update={"cardinality": 3}), what="DV of f")
Traceback (most recent call last):
...
lethe.errors.CorruptDeletionVector: DV of f: 2 positions, the manifest says 3
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.manifest import DVRef
from lethe.dv.blob import PuffinBlob, decode_dv, dv_crc, encode_dv, write_puffin
from lethe.storage.layout import is_external, object_key, tombstone_key

__all__ = ["blob_bytes", "checked", "load", "load_many", "write_container", "write_dvs"]


def blob_bytes(store: Any, prefix: str, ref: DVRef) -> bytes:
    """The blob bytes of a DV reference (inline, or a ranged GET of its container through
    ``store``, a :class:`~lethe.storage.store.S3Store`)."""
    if ref.inline is not None:
        return base64.b64decode(ref.inline)
    if ref.container is None:
        raise errors.CorruptDeletionVector("DV reference has neither container nor inline blob")
    key = object_key(prefix, ref.container)
    body: bytes = store.get(key, start=ref.offset, end=ref.offset + ref.length).body
    return body


def checked(blob: bytes, ref: DVRef, *, what: str = "DV") -> BitMap64:
    """The DV in ``blob``, refused (:class:`~lethe.errors.CorruptDeletionVector`, the message
    starting with ``what``) unless its CRC and cardinality are the ones ``ref`` records."""
    bm = decode_dv(blob, expected_crc=ref.crc32)
    if len(bm) != ref.cardinality:
        raise errors.CorruptDeletionVector(
            f"{what}: {len(bm)} positions, the manifest says {ref.cardinality}"
        )
    return bm


def load(store: Any, prefix: str, ref: DVRef | None, *, what: str = "DV") -> BitMap64:
    """The checked DV of ``ref`` (empty for None: a file without deletes)."""
    if ref is None:
        return BitMap64()
    return checked(blob_bytes(store, prefix, ref), ref, what=what)


#: :func:`load_many` reads a container's blobs with one GET of their span when the span is
#: at most this many bytes and at most :data:`DENSE_SPAN` times the blobs' own bytes
SPAN_MAX_BYTES = 8 << 20
DENSE_SPAN = 4


def load_many(
    store: Any, prefix: str, refs: Mapping[str, DVRef | None], *, what: str = "DV"
) -> dict[str, BitMap64]:
    """The checked DVs of ``refs`` (a name, say a file's path -> its reference), with one GET
    per container when its wanted blobs lie close together (a delete or a window's commit
    writes the DVs of all its files in one container; a splice of 500 files would otherwise
    make 500 ranged GETs of it), else one ranged GET per blob."""
    out = {name: BitMap64() for name, ref in refs.items() if ref is None}
    by_container: dict[str, list[tuple[str, DVRef]]] = {}
    for name, ref in refs.items():
        if ref is None:
            continue
        if ref.inline is not None or ref.container is None:
            out[name] = load(store, prefix, ref, what=f"{what} of {name}")
        else:
            by_container.setdefault(ref.container, []).append((name, ref))
    for container, wanted in by_container.items():
        start = min(r.offset for _, r in wanted)
        end = max(r.offset + r.length for _, r in wanted)
        own = sum(r.length for _, r in wanted)
        if len(wanted) == 1 or end - start > min(SPAN_MAX_BYTES, DENSE_SPAN * own):
            for name, ref in wanted:
                out[name] = load(store, prefix, ref, what=f"{what} of {name}")
            continue
        body = store.get(object_key(prefix, container), start=start, end=end).body
        for name, ref in wanted:
            at = ref.offset - start
            out[name] = checked(body[at : at + ref.length], ref, what=f"{what} of {name}")
    return out


def write_container(
    store: Any, prefix: str, blobs: Sequence[tuple[str, bytes, int]]
) -> dict[str, DVRef]:
    """One write-once Puffin container under ``tombstone/`` holding ready DV blobs ``(data
    file, blob, cardinality)``; returns each file's reference into it."""
    rel = tombstone_key(datetime.now(UTC))

    def key(path: str) -> str:
        return object_key(prefix, path)

    body, locs = write_puffin(
        [
            PuffinBlob(
                data=blob,
                properties={
                    "referenced-data-file": path
                    if is_external(path)
                    else f"s3://{store.bucket}/{key(path)}",
                    "cardinality": str(card),
                },
            )
            for path, blob, card in blobs
        ]
    )
    store.put(key(rel), body, if_none_match=True)
    return {
        path: DVRef(
            container=rel,
            offset=loc.offset,
            length=loc.length,
            cardinality=card,
            crc32=dv_crc(blob),
        )
        for (path, blob, card), loc in zip(blobs, locs, strict=True)
    }


def write_dvs(store: Any, prefix: str, dvs: Mapping[str, BitMap64]) -> dict[str, DVRef]:
    """:func:`write_container` for (already unioned) bitmaps, one per data file."""
    return write_container(
        store, prefix, [(p, encode_dv(dvs[p]), len(dvs[p])) for p in sorted(dvs)]
    )
