"""What a splice costs, and the cheapest way to do it (issue 26: a cost-planned purge).

Everything a splice spends is counted in one unit, bytes over the wire (:class:`CostModel`):
bytes downloaded and uploaded count as themselves, a byte copied server-side
(``UploadPartCopy``) as ``copy_weight``, a request as ``request_bytes``, and a byte of a row
group decoded and re-encoded on the client as ``cpu_weight``. Two choices are made with it:

- :func:`plan_upload`: how the new object is assembled, the cheapest of the plain multipart
  plan (:func:`~lethe.parquet.parts.plan_parts`, fewest bytes downloaded), chained plans
  (:func:`~lethe.parquet.parts.plan_chained`, few bytes moved, a few temporary stages) and
  the plan of a streaming rewrite (:func:`~lethe.parquet.parts.plan_download`: every byte
  through the client, nothing copied). A plan copying more than ``max_copy_ratio`` times the
  source or using more than ``max_stages`` temporary stages is never chosen; the rewrite's
  plan always qualifies, so the choice is never worse than a rewrite.
- :func:`choose_level`: per file, before any row is decoded, whether to splice page by page,
  row group by row group, or to rewrite the file (one GET, the edited groups re-encoded, the
  others' bytes passed through, one PUT: a streaming rewrite that does not re-encode the
  groups it would reproduce), by the predicted total of each.

Pure: nothing here does I/O.

>>> from lethe.parquet.segments import Bytes, Copy
>>> MiB = 1 << 20
>>> segs = [Copy(0, 40 * MiB)]
>>> for k in range(40):  # a page rewritten in each of 40 row groups of 1 MiB
...     segs += [Bytes(b"x" * 1000), Copy(40 * MiB + k * MiB + 1000, 41 * MiB + k * MiB)]
>>> from lethe.parquet.parts import plan_chained
>>> old = upload_cost(plan_chained(segs, 80 * MiB))  # the wire-minimal chain
>>> old.copied // MiB, old.requests, old.stages
(2035, 322, 79)
>>> new = upload_cost(plan_upload(segs, 80 * MiB))
>>> new.copied // MiB, new.requests, new.stages, new.wire // MiB
(40, 44, 0, 77)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Literal

from lethe.parquet.footer import ByteRange, Footer, read_offset_index, row_group_range
from lethe.parquet.model import FileMetaData, InvalidParquet
from lethe.parquet.pages import Ranges, chunk_layout, count
from lethe.parquet.parts import (
    ChainedPlan,
    PartLimits,
    Plan,
    SinglePut,
    UploadPart,
    plan_chained,
    plan_download,
    plan_parts,
)
from lethe.parquet.segments import Bytes, Copy, Segment, Source, normalize

__all__ = [
    "DEFAULT_MODEL",
    "Cost",
    "CostModel",
    "Level",
    "LevelChoice",
    "choose_level",
    "page_level_hopeless",
    "plan_upload",
    "upload_cost",
]

MiB = 1 << 20
GET_GAP = 64 << 10
"""Ranges closer than this are fetched by one GET (as :mod:`lethe.erasure.splice_io` does)."""

Level = Literal["page", "row_group", "rewrite"]


@dataclass(frozen=True, slots=True)
class CostModel:
    """The price of each resource a splice uses, in bytes over the wire.

    Attributes:
        copy_weight: A byte copied server-side (it never crosses the wire nor uses the
            client, but S3 spends time on it; 0.1: ten copied bytes cost one moved).
        request_bytes: One request (a GET, PUT, part or multipart call): its round trip and
            the client CPU of signing and parsing it (128 KiB).
        cpu_weight: One byte of a row group decoded and re-encoded on the client (measured:
            pyarrow decodes and re-encodes zstd data at about half the speed a client moves
            it, so 2.0).
        max_copy_ratio: No upload plan copies more than this times the source's size (the
            chained planner's stages copy a minimum part each; 1.5 leaves room for one or
            two on small files, several on large ones).
        max_stages: No upload plan uses more temporary stages than this.
    """

    copy_weight: float = 0.1
    request_bytes: int = 128 << 10
    cpu_weight: float = 2.0
    max_copy_ratio: float = 1.5
    max_stages: int = 4


DEFAULT_MODEL = CostModel()


@dataclass(frozen=True, slots=True)
class Cost:
    """Resources one splice (or part of one) uses.

    Attributes:
        downloaded: Bytes downloaded.
        uploaded: Bytes uploaded.
        copied: Bytes copied server-side.
        requests: Requests.
        reencoded: Bytes of the original decoded and re-encoded on the client.
        stages: Temporary objects.
    """

    downloaded: int = 0
    uploaded: int = 0
    copied: int = 0
    requests: int = 0
    reencoded: int = 0
    stages: int = 0

    def __add__(self, o: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) + getattr(o, f.name) for f in fields(Cost)))

    @property
    def wire(self) -> int:
        """Bytes over the wire."""
        return self.downloaded + self.uploaded

    def total(self, model: CostModel = DEFAULT_MODEL) -> float:
        """Everything, in bytes over the wire."""
        return (
            self.wire
            + model.copy_weight * self.copied
            + model.request_bytes * self.requests
            + model.cpu_weight * self.reencoded
        )


# --- what is already in memory ------------------------------------------------------------
def _merged(ranges: Iterable[tuple[int, int]], gap: int = 0) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s <= out[-1][1] + gap:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


class _Have:
    """Byte ranges of the source already in memory."""

    def __init__(self, fetched: Iterable[tuple[int, int]]) -> None:
        self.ranges = _merged(fetched)
        self.starts = [s for s, _ in self.ranges]

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` not in memory."""
        out: list[tuple[int, int]] = []
        at = start
        i = max(0, bisect.bisect_right(self.starts, start) - 1)
        while at < end and i < len(self.ranges):
            s, e = self.ranges[i]
            if e <= at:
                i += 1
                continue
            if s >= end:
                break
            if s > at:
                out.append((at, s))
            at = max(at, e)
            i += 1
        if at < end:
            out.append((at, end))
        return out

    def fetch(self, ranges: Iterable[tuple[int, int]], gap: int = GET_GAP) -> Cost:
        """What fetching ``ranges`` costs: the missing bytes, by GETs of nearby ranges."""
        todo = [m for s, e in ranges for m in self.missing(s, e)]
        gets = _merged(todo, gap)
        return Cost(downloaded=sum(e - s for s, e in gets), requests=len(gets))


# --- the upload ------------------------------------------------------------------------------
def upload_cost(plan: Plan | ChainedPlan, fetched: Iterable[tuple[int, int]] = ()) -> Cost:
    """What uploading ``plan`` costs, the source bytes in ``fetched`` already in memory."""
    have = _Have(fetched)
    if isinstance(plan, SinglePut):
        pieces, parts, stages = plan.pieces, [], 0
        calls = 1
    else:
        stage_list = plan.stages if isinstance(plan, ChainedPlan) else (plan.parts,)
        parts = [p for st in stage_list for p in st]
        pieces = tuple(x for p in parts if isinstance(p, UploadPart) for x in p.pieces)
        stages = len(stage_list) - 1
        calls = sum(2 + len(st) for st in stage_list) + (1 if stages else 0)  # + delete
    got = have.fetch(((p.start, p.end) for p in pieces if not isinstance(p, Bytes)), gap=0)
    return Cost(
        downloaded=got.downloaded,
        uploaded=sum(p.length for p in pieces),
        copied=plan.bytes_copied,
        requests=calls + got.requests,
        stages=stages,
    )


def plan_upload(
    segments: Iterable[Segment],
    source_size: int,
    *,
    limits: PartLimits | None = None,
    model: CostModel = DEFAULT_MODEL,
    fetched: Iterable[tuple[int, int]] = (),
    rewrite: bool = False,
) -> Plan | ChainedPlan:
    """The cheapest upload of the object the segments describe (see the module).

    Args:
        segments: The new object.
        source_size: Size of the source object the copies refer to.
        limits: The multipart limits; S3's by default.
        model: The prices.
        fetched: Source byte ranges already in memory (downloading them again costs nothing).
        rewrite: Only the plan of a streaming rewrite (nothing copied).

    Raises:
        ValueError: A copy reaches past ``source_size``.
        SpliceRefused: The object cannot be uploaded within the part limits.
    """
    lim = limits or PartLimits()
    items = normalize(segments)
    have = list(fetched)
    stream = plan_download(items, source_size, limits=lim)
    if rewrite:
        return stream
    plain = plan_parts(items, source_size, limits=lim)
    candidates: list[Plan | ChainedPlan] = [plain]
    if not isinstance(plain, SinglePut) and plain.bytes_downloaded:
        mn = lim.min_part
        keeps = (None, mn, 4 * mn, 16 * mn)
        candidates += [plan_chained(items, source_size, limits=lim, keep=k) for k in keeps]
    candidates.append(stream)
    best: tuple[float, Plan | ChainedPlan] | None = None
    for plan in candidates:
        c = upload_cost(plan, have)
        if plan is not stream and (
            c.copied > model.max_copy_ratio * source_size or c.stages > model.max_stages
        ):
            continue
        if best is None or c.total(model) < best[0]:
            best = (c.total(model), plan)
    assert best is not None
    return best[1]


# --- the level of a file's splice -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LevelChoice:
    """How one file is spliced, and why.

    Attributes:
        level: ``"page"`` (only pages holding erased rows re-encoded), ``"row_group"``
            (edited groups re-encoded whole, unchanged ranges copied server-side) or
            ``"rewrite"`` (every byte through the client: one GET, edited groups
            re-encoded, one PUT or uploaded parts, nothing copied).
        predicted: The predicted cost of each level considered.
        reason: Why page level was not considered, if it was not (never a value).
    """

    level: Level
    predicted: Mapping[Level, Cost]
    reason: str | None = None

    def total(self, level: Level, model: CostModel = DEFAULT_MODEL) -> float:
        """The predicted total of ``level``."""
        return self.predicted[level].total(model)


def _segments(
    footer: Footer,
    kept: Mapping[int, float],
    rewritten: Mapping[int, Sequence[ByteRange]],
    cap: int,
) -> tuple[list[Segment], int]:
    """The new file, predicted: each edited group's ``rewritten`` ranges replaced by new
    bytes (``kept`` of their size), the rest of the data area copied, a new tail. A run of
    new bytes longer than ``cap`` is planned as ``cap`` bytes (it is a run of whole parts
    either way); the bytes left out are returned, to be counted as uploaded."""
    meta = footer.metadata
    cuts: list[tuple[int, int, int]] = []
    for g, ranges in rewritten.items():
        for r in ranges:
            cuts.append((r.start, r.end, int(r.length * kept[g])))
    for g, share in kept.items():
        if share == 0:
            r = row_group_range(meta.row_groups[g])
            cuts.append((r.start, r.end, 0))
    data_end = max((row_group_range(rg).end for rg in meta.row_groups), default=4)
    spec: list[Copy | int] = []  # copies, and lengths of new bytes
    at = 4
    for s, e, n in sorted(cuts):
        if s > at:
            spec.append(Copy(at, s))
        spec.append(n)
        at = max(at, e)
    if data_end > at:
        spec.append(Copy(at, data_end))
    spec.append(4 + footer.file_size - data_end)
    out: list[Segment] = []
    run, left_out = 0, 0
    for x in [*spec, Copy(0, 0)]:
        if isinstance(x, int):
            run += x
            continue
        if run:
            out.append(Bytes(bytes(min(run, cap))))
            left_out += max(0, run - cap)
            run = 0
        if x.length:
            out.append(x)
    return out, left_out


def page_level_hopeless(meta: FileMetaData, k: int, erased: Ranges, source: Source) -> str | None:
    """Why page level cannot win in group ``k``, judged from one offset index before any
    other is decoded; None when it may.

    Page level copies a page only when it holds no erased row. The chunk with the most
    uncompressed bytes has the most pages (writers cut pages by size, and by row count
    alike in every chunk), so when each of its pages holds an erased row, so does almost
    surely every page of the group: planning the rest (decoding every offset and column
    index) would be thrown away.
    """
    rg = meta.row_groups[k]
    if not rg.columns:
        return "a group without columns"
    j = max(range(len(rg.columns)), key=lambda c: rg.columns[c].meta_data.total_uncompressed_size)
    cc = rg.columns[j]
    oo, ol = cc.offset_index_offset, cc.offset_index_length
    if oo is None or ol is None or not source.has(oo, ol):
        return None  # the full planner says why
    try:
        layout = chunk_layout(rg, j, read_offset_index(source.read(oo, ol)))
    except InvalidParquet:
        return None
    if len(layout.overlapping(erased)) == len(layout.pages):
        return "every page of the largest column chunk holds an erased row"
    return None


def choose_level(
    footer: Footer,
    erased: Mapping[int, Ranges],
    pages: Mapping[int, Sequence[ByteRange]] | str,
    fetched: Iterable[tuple[int, int]],
    *,
    model: CostModel = DEFAULT_MODEL,
    limits: PartLimits | None = None,
) -> LevelChoice:
    """Choose the level of one file's splice by predicted total cost, before decoding.

    Args:
        footer: The file's footer.
        erased: Edited group -> erased positions within it.
        pages: Edited group that keeps rows -> the byte ranges a page-level rewrite reads
            (:func:`~lethe.parquet.partial.page_ranges`; a group left out is read whole),
            or why page level is out for the whole file.
        fetched: Source byte ranges already in memory (the tail).
        model: The prices.
        limits: The multipart limits.
    """
    meta = footer.metadata
    size = footer.file_size
    have = list(fetched)
    kept = {g: 1.0 - count(e) / max(1, meta.row_groups[g].num_rows) for g, e in erased.items()}
    lim = limits or PartLimits()
    cap = 4 * lim.min_part
    whole = {g: [row_group_range(meta.row_groups[g])] for g, k in kept.items() if k > 0}
    reencoded = sum(r.length for rs in whole.values() for r in rs)
    fetch_rg = _Have(have).fetch((r.start, r.end) for rs in whole.values() for r in rs)
    rg_segs = _segments(footer, kept, whole, cap)
    rg_fetched = [*have, *((r.start, r.end) for rs in whole.values() for r in rs)]

    def upload(segs: tuple[list[Segment], int], got: list[tuple[int, int]], rewrite: bool) -> Cost:
        plan = plan_upload(segs[0], size, limits=lim, model=model, fetched=got, rewrite=rewrite)
        extra = segs[1]  # new bytes planned as fewer: uploaded, in parts of 16 MiB at most
        return upload_cost(plan, got) + Cost(uploaded=extra, requests=-(-extra // (16 * MiB)))

    all_of = _Have(have).fetch([(0, size)], gap=size)
    predicted: dict[Level, Cost] = {
        "rewrite": all_of + upload(rg_segs, [(0, size)], True) + Cost(reencoded=reencoded),
        "row_group": fetch_rg + upload(rg_segs, rg_fetched, False) + Cost(reencoded=reencoded),
    }
    reason = pages if isinstance(pages, str) else None
    if not isinstance(pages, str):
        chosen = {g: pages.get(g, rs) for g, rs in whole.items()}
        ranges = [(r.start, r.end) for rs in chosen.values() for r in rs]
        got = [*have, *ranges]
        segs = _segments(footer, kept, chosen, cap)
        predicted["page"] = (
            _Have(have).fetch(ranges)
            + upload(segs, got, False)
            + Cost(reencoded=sum(e - s for s, e in ranges))
        )
    order: tuple[Level, ...] = ("page", "row_group", "rewrite")
    level = min((lv for lv in order if lv in predicted), key=lambda lv: predicted[lv].total(model))
    return LevelChoice(level, predicted, reason)
