"""The splice's I/O: pinned ranged reads of the source object and the multipart assembly.

:class:`Fetcher` serves byte ranges of one source object from memory, reading only the gaps
with ETag-pinned ranged GETs (ranges closer than :data:`GET_GAP` by one GET);
:func:`read_footer` reads a Parquet tail through it. :func:`upload` assembles the new object
as :func:`lethe.parquet.costs.plan_upload` planned it: one PUT, one multipart upload (unchanged
ranges copied server-side with ``UploadPartCopy`` pinned by ``CopySourceIfMatch``, new bytes
uploaded), or a chain of them through temporary stages under ``_staging/``. Every failure
aborts the upload and removes the stages. What to splice is decided in :mod:`lethe.erasure.erase`
and the pure :mod:`lethe.parquet` phases.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence

from lethe.catalog.manifest import DataFile
from lethe.parquet.footer import Footer, TailTooShort, parse_tail
from lethe.parquet.parts import (
    ChainedPlan,
    CopyPart,
    Download,
    MultipartPlan,
    SinglePut,
    StageCopy,
    UploadPart,
)
from lethe.parquet.segments import Bytes, Extent
from lethe.reading.reader import TAILS
from lethe.storage.layout import STAGING_PREFIX
from lethe.storage.objects import PinnedObject
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = ["GET_GAP", "TAIL_BYTES", "Fetcher", "read_footer", "upload"]

TAIL_BYTES = 1 << 20
GET_GAP = 64 << 10  # ranges closer than this are fetched by one GET


class Fetcher:
    """Pinned ranged GETs of one source object, served from what is already in memory: the
    file's tail when this process read it already (the reader's cache of tails, keyed by
    ETag: the bytes cannot have changed), then what this fetcher read."""

    def __init__(self, store: S3Store, key: str, f: DataFile) -> None:
        self.source = PinnedObject(
            store, key, f.etag, f.size, changed="{key} changed under the splice (ETag {etag})"
        )
        self.extents: list[Extent] = []
        tail = TAILS.get((store.bucket, key, f.etag))
        if tail is not None:  # an erase located the rows (or a scrub read their values)
            self.extents.append(Extent(tail.start, tail.data))

    def get(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``: what is in memory is reused, only the gaps are read."""
        for e in self.extents:
            if e.offset <= start and end <= e.end:
                return e.data[start - e.offset : end - e.offset]
        pieces: list[bytes] = []
        at = start
        for e in sorted(self.extents, key=lambda x: x.offset):
            if e.end <= at or e.offset >= end:
                continue
            if e.offset > at:
                pieces.append(self._read(at, e.offset))
            t = min(end, e.end)
            pieces.append(e.data[max(at, e.offset) - e.offset : t - e.offset])
            at = t
        if at < end:
            pieces.append(self._read(at, end))
        data = b"".join(pieces)
        self.extents.append(Extent(start, data))  # one extent: a splice reads it as one
        return data

    def _read(self, start: int, end: int) -> bytes:
        data = self.source.read(start, end)
        self.extents.append(Extent(start, data))
        return data

    def get_many(self, ranges: Iterable[tuple[int, int]], gap: int = GET_GAP) -> None:
        """Fetch the ranges not yet in memory, ranges less than ``gap`` apart by one GET."""
        todo = sorted(
            (s, e)
            for s, e in ranges
            if e > s and not any(x.offset <= s and e <= x.end for x in self.extents)
        )
        merged: list[tuple[int, int]] = []
        for s, e in todo:
            if merged and s <= merged[-1][1] + gap:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        for s, e in merged:
            self.get(s, e)


def read_footer(fetch: Fetcher, size: int) -> Footer:
    n = min(size, TAIL_BYTES)
    fetch.get(size - n, size)
    try:
        return parse_tail(fetch.get(size - n, size), size)
    except TailTooShort as e:
        fetch.get(size - e.needed, size)
        return parse_tail(fetch.get(size - e.needed, size), size)


def upload(
    store: S3Store,
    fetch: Fetcher,
    key: str,
    plan: SinglePut | MultipartPlan | ChainedPlan,
    src_etag: str,
    key_of: Callable[[str], str],
) -> str:
    """Upload the new object as planned; returns its ETag.

    A chained plan uploads its temporary stages under ``_staging/`` (swept by GC if a crash
    leaves one behind; they hold only unchanged bytes and new pages) and deletes them once
    the new object is complete, or on failure.
    """

    def content(pieces: Sequence[Bytes | Download]) -> bytes:
        return b"".join(
            p.data if isinstance(p, Bytes) else fetch.get(p.start, p.end) for p in pieces
        )

    if isinstance(plan, SinglePut):
        return store.put(key, content(plan.pieces), if_none_match=True)
    stages = plan.stages if isinstance(plan, ChainedPlan) else (plan.parts,)
    temps: list[tuple[str, str]] = []  # (key, etag) of each completed temporary stage
    try:
        for i, stage in enumerate(stages):
            last = i == len(stages) - 1
            target = key if last else key_of(f"{STAGING_PREFIX}splice/{uuid.uuid4().hex}.part")
            if not last:
                temps.append((target, ""))
            tag = _stage(store, target, stage, fetch.source.key, src_etag, temps, content)
            if last:
                return tag
            temps[-1] = (target, tag)
        raise AssertionError("a plan has at least one stage")  # pragma: no cover
    finally:
        if temps:
            failed = store.delete_many(k for k, _ in temps)
            if failed:
                log.warning("%d temporary splice objects left for GC", len(failed))


def _stage(
    store: S3Store,
    key: str,
    parts: Sequence[CopyPart | UploadPart | StageCopy],
    src_key: str,
    src_etag: str,
    temps: Sequence[tuple[str, str]],
    content: Callable[[Sequence[Bytes | Download]], bytes],
) -> str:
    """One multipart upload of a plan (aborted on failure)."""
    upload_id = store.create_multipart(key)
    try:
        done: list[tuple[int, str]] = []
        for n, part in enumerate(parts, start=1):
            if isinstance(part, CopyPart):
                tag = store.upload_part_copy(
                    key, upload_id, n, src_key, part.start, part.end, src_etag=src_etag
                )
            elif isinstance(part, StageCopy):
                tkey, tetag = temps[part.stage]
                tag = store.upload_part_copy(
                    key, upload_id, n, tkey, part.start, part.end, src_etag=tetag
                )
            else:
                tag = store.upload_part(key, upload_id, n, content(part.pieces))
            done.append((n, tag))
        return store.complete_multipart(key, upload_id, done)
    except BaseException:
        store.abort_multipart(key, upload_id)
        raise
