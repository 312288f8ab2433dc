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
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.manifest import DVRef
from lethe.dv.blob import decode_dv, dv_crc, encode_dv
from lethe.dv.puffin import PuffinBlob, write_puffin
from lethe.storage.layout import is_external, object_key, tombstone_key

__all__ = [
    "Span",
    "blob_bytes",
    "checked",
    "load",
    "load_many",
    "spans",
    "write_container",
    "write_dvs",
]

K = TypeVar("K", bound=Hashable)


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


#: A container's blobs are read with one GET of their span while the span is at most this
#: many bytes and at most :data:`DENSE_SPAN` times the blobs' own bytes (:func:`spans`)
SPAN_MAX_BYTES = 8 << 20
DENSE_SPAN = 4


@dataclass(frozen=True, slots=True)
class Span(Generic[K]):
    """One ranged GET ``[start, end)`` of a Puffin ``container``, holding the blobs of
    ``names`` (:func:`spans`)."""

    container: str
    start: int
    end: int
    names: tuple[K, ...]

    def read(self, store: Any, prefix: str) -> bytes:
        """The span's bytes (one ranged GET through ``store``)."""
        body: bytes = store.get(
            object_key(prefix, self.container), start=self.start, end=self.end
        ).body
        return body

    def blob(self, body: bytes, ref: DVRef) -> bytes:
        """The bytes of ``ref``'s blob in ``body`` (what :meth:`read` returned)."""
        at = ref.offset - self.start
        return body[at : at + ref.length]


def spans(refs: Mapping[K, DVRef]) -> list[Span[K]]:
    """How the container blobs of ``refs`` are read (inline references are left out): per
    container, blobs in offset order, each joining the span before it while the span stays
    dense (at most :data:`SPAN_MAX_BYTES`, at most :data:`DENSE_SPAN` times the bytes of its
    blobs), else starting a span of its own. A delete or a window's commit writes the DVs of
    all its files in one container: reading them makes one GET, not one per file; a sparse
    pick of a large container is read blob by blob. The one rule of every DV read
    (:func:`load_many`, the scans' :class:`~lethe.reading.scan.DVCache`).

    >>> r = lambda o: DVRef(container="c", offset=o, length=10, cardinality=1, crc32=0)
    >>> [(s.start, s.end, s.names) for s in spans({"a": r(0), "b": r(10), "z": r(500)})]
    [(0, 20, ('a', 'b')), (500, 510, ('z',))]
    """
    by_container: dict[str, list[tuple[int, int, K]]] = {}
    for name, ref in refs.items():
        if ref.inline is None and ref.container is not None:
            by_container.setdefault(ref.container, []).append(
                (ref.offset, ref.offset + ref.length, name)
            )
    out: list[Span[K]] = []
    for container, blobs in by_container.items():
        blobs.sort(key=lambda b: (b[0], b[1]))
        start, end, own, names = blobs[0][0], blobs[0][1], blobs[0][1] - blobs[0][0], [blobs[0][2]]
        for s, e, name in blobs[1:]:
            wider, more = max(end, e), own + (e - s)
            if wider - start <= min(SPAN_MAX_BYTES, DENSE_SPAN * more):
                end, own = wider, more
                names.append(name)
                continue
            out.append(Span(container, start, end, tuple(names)))
            start, end, own, names = s, e, e - s, [name]
        out.append(Span(container, start, end, tuple(names)))
    return out


def load_many(
    store: Any, prefix: str, refs: Mapping[str, DVRef | None], *, what: str = "DV"
) -> dict[str, BitMap64]:
    """The checked DVs of ``refs`` (a name, say a file's path -> its reference), their
    container blobs read by :func:`spans` (one GET per dense span), each checked like
    :func:`load`."""
    out = {name: BitMap64() for name, ref in refs.items() if ref is None}
    present = {name: ref for name, ref in refs.items() if ref is not None}
    for name, ref in present.items():
        if ref.inline is not None or ref.container is None:
            out[name] = load(store, prefix, ref, what=f"{what} of {name}")
    for span in spans(present):
        body = span.read(store, prefix)
        for name in span.names:
            ref = present[name]
            out[name] = checked(span.blob(body, ref), ref, what=f"{what} of {name}")
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
