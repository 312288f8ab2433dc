"""The multipart part planner of a splice (DESIGN §4 rule 5).

Given the segments of a new object (ranges of the source object and new bytes), choose how
to upload it: server-side ``UploadPartCopy`` for long unchanged ranges, ``UploadPart`` for
new bytes together with whatever source bytes must be downloaded to make every part but the
last at least 5 MiB, or one plain PUT for small objects. The plan downloads as few source
bytes as possible (then uses as few ranged GETs as possible).

A short upload buffer borrows the missing bytes from the neighbouring copy ranges: from the
spare tail of the range before it or the spare head of the range after it (spare: what a
range has beyond the 5 MiB its own copy part needs); a range that cannot lend enough, or is
under 5 MiB itself, is downloaded whole when that is cheaper. The choice is an exact dynamic
program over the segments, so the plan is optimal for these rules.

>>> from lethe.parquet.segments import Bytes, Copy
>>> MiB = 1 << 20
>>> plan = plan_parts([Copy(0, 100 * MiB), Bytes(b"x" * 1000)], 110 * MiB)
>>> [type(p).__name__ for p in plan.parts], plan.bytes_downloaded
(['CopyPart', 'UploadPart'], 0)
>>> plan = plan_parts([Bytes(b"PAR1"), Copy(4, 100 * MiB), Bytes(b"x")], 110 * MiB)
>>> plan.parts[0].size == 5 * MiB, plan.bytes_downloaded == 5 * MiB - 4
(True, True)
>>> type(plan_parts([Copy(0, 1000), Bytes(b"x")], 4_000_000)).__name__
'SinglePut'

A short upload buffer between two copies need not borrow anything when the object is built
in stages (:func:`plan_chained`): a temporary object is the last 5 MiB of the copy before
with the new bytes as its *last* part (which may be short), and the object copies that
temporary object whole as one part. Bytes moved drop to the new bytes; a few requests are
added.

>>> segs = [Copy(0, 100 * MiB), Bytes(b"x" * MiB), Copy(110 * MiB, 200 * MiB), Bytes(b"f")]
>>> bytes_moved(plan_parts(segs, 200 * MiB)), bytes_moved(plan_chained(segs, 200 * MiB))
(9437185, 1048577)
>>> [[(type(p).__name__, p.size // MiB) for p in s] for s in plan_chained(segs, 200 * MiB).stages]
[[('CopyPart', 5), ('UploadPart', 1)], [('CopyPart', 95), ('StageCopy', 6), ('CopyPart', 90), ('UploadPart', 0)]]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from lethe.errors import SpliceRefused
from lethe.parquet.footer import ByteRange
from lethe.parquet.segments import Bytes, Copy, Segment, coalesce, normalize

__all__ = [
    "ChainedPlan",
    "CopyPart",
    "Download",
    "MultipartPlan",
    "PartLimits",
    "Piece",
    "Plan",
    "SinglePut",
    "StageCopy",
    "UploadPart",
    "assemble",
    "bytes_moved",
    "plan_chained",
    "plan_download",
    "plan_parts",
]

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class PartLimits:
    """The S3 multipart limits (overridable, e.g. to test with small numbers).

    Attributes:
        min_part: Smallest part but the last (5 MiB).
        max_part: Largest part (5 GiB); must be at least twice ``min_part``.
        max_parts: Most parts in one upload (10,000).
        min_copy_source: A range copy needs a source larger than this (5 MB).
        max_put: Largest single PUT (5 GiB).
    """

    min_part: int = 5 * MiB
    max_part: int = 5 * GiB
    max_parts: int = 10_000
    min_copy_source: int = 5_000_000
    max_put: int = 5 * GiB

    def __post_init__(self) -> None:
        if self.min_part < 1 or self.max_part < 2 * self.min_part or self.max_parts < 1:
            raise ValueError(f"inconsistent part limits {self}")


@dataclass(frozen=True, slots=True)
class Download(ByteRange):
    """Source bytes ``[start, end)`` fetched by a ranged GET."""


Piece: TypeAlias = Bytes | Download


@dataclass(frozen=True, slots=True)
class CopyPart(ByteRange):
    """A part copied server-side (``UploadPartCopy``) from source ``[start, end)``."""

    @property
    def size(self) -> int:
        """Size of the part."""
        return self.length


def _downloads(pieces: Iterable[Piece]) -> list[Download]:
    return [p for p in pieces if isinstance(p, Download)]


@dataclass(frozen=True, slots=True)
class _Pieces:
    """New bytes and downloaded source ranges (``pieces``, in order) sent through the client."""

    pieces: tuple[Piece, ...]

    @property
    def size(self) -> int:
        """Number of bytes."""
        return sum(p.length for p in self.pieces)

    @property
    def bytes_downloaded(self) -> int:
        """Source bytes fetched by ranged GETs."""
        return sum(d.length for d in _downloads(self.pieces))

    @property
    def ranged_gets(self) -> int:
        """Number of ranged GETs."""
        return len(_downloads(self.pieces))


@dataclass(frozen=True, slots=True)
class UploadPart(_Pieces):
    """A part uploaded from the client: new bytes and downloaded source ranges, in order."""


Part: TypeAlias = CopyPart | UploadPart


def _uploads(parts: Iterable[object]) -> list[UploadPart]:
    return [p for p in parts if isinstance(p, UploadPart)]


@dataclass(frozen=True, slots=True)
class SinglePut(_Pieces):
    """The new object is small: download what is needed and PUT it whole."""

    @property
    def bytes_copied(self) -> int:
        """Source bytes copied server-side (none)."""
        return 0


class _PartSums:
    """What a plan of multipart uploads moves, summed over its :meth:`every_part`."""

    __slots__ = ()

    def every_part(self) -> tuple[ChainPart, ...]:
        """Every part of every upload of the plan."""
        raise NotImplementedError

    @property
    def bytes_downloaded(self) -> int:
        """Source bytes fetched by ranged GETs."""
        return sum(p.bytes_downloaded for p in _uploads(self.every_part()))

    @property
    def bytes_copied(self) -> int:
        """Bytes copied server-side (from the source, and from a chain's temporary objects)."""
        return sum(p.size for p in self.every_part() if not isinstance(p, UploadPart))

    @property
    def ranged_gets(self) -> int:
        """Number of ranged GETs."""
        return sum(p.ranged_gets for p in _uploads(self.every_part()))

    @property
    def bytes_uploaded(self) -> int:
        """Bytes sent from the client."""
        return sum(p.size for p in _uploads(self.every_part()))


@dataclass(frozen=True, slots=True)
class MultipartPlan(_PartSums):
    """A multipart upload: the parts in order.

    Attributes:
        parts: Part 1, part 2, ...
    """

    parts: tuple[Part, ...]

    @property
    def size(self) -> int:
        """Size of the new object."""
        return sum(p.size for p in self.parts)

    def every_part(self) -> tuple[ChainPart, ...]:
        return self.parts


Plan: TypeAlias = SinglePut | MultipartPlan


# --- the dynamic program ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Choice:
    """For one copy segment: copy it (borrowing ``take_prev`` + ``head``) or download it."""

    copy: bool
    take_prev: int = 0
    head: int = 0


_Chain: TypeAlias = "tuple[_Choice, _Chain] | None"
"""The choices made so far, last first (a linked list shared between states)."""


@dataclass(frozen=True, slots=True)
class _State:
    downloaded: int
    gets: int
    spare: int
    chain: _Chain


def _better(a: _State, b: _State) -> bool:
    """Whether ``a`` is at least as good as ``b`` in every respect."""
    return a.downloaded <= b.downloaded and a.gets <= b.gets and a.spare >= b.spare


def _add(front: dict[int, list[_State]], buf: int, s: _State) -> None:
    states = front.setdefault(buf, [])
    if any(_better(x, s) for x in states):
        return
    states[:] = [x for x in states if not _better(s, x)]
    states.append(s)


def _choose(items: Sequence[Segment], lim: PartLimits) -> list[_Choice]:
    """The optimal choice for every copy segment, in order."""
    mn = lim.min_part
    # front: capped buffer length -> Pareto-optimal states
    front: dict[int, list[_State]] = {0: [_State(0, 0, 0, None)]}
    for i, seg in enumerate(items):
        nxt: dict[int, list[_State]] = {}
        if isinstance(seg, Bytes):
            for buf, states in front.items():
                for s in states:
                    _add(nxt, min(mn, buf + seg.length), s)
            front = nxt
            continue
        length = seg.length
        need = 1 if i == len(items) - 1 else mn
        for buf, states in front.items():
            deficit = 0 if buf == 0 or buf >= mn else mn - buf
            for s in states:
                dl = _State(s.downloaded + length, s.gets + 1, s.spare, (_Choice(False), s.chain))
                _add(nxt, min(mn, buf + length), dl)
                take = min(deficit, s.spare)
                head = deficit - take
                if length - head >= need:
                    gets = s.gets + (take > 0) + (head > 0)
                    chain = (_Choice(True, take, head), s.chain)
                    spare = max(0, length - head - mn)
                    _add(nxt, 0, _State(s.downloaded + deficit, gets, spare, chain))
        front = nxt
    best = min(
        (s for states in front.values() for s in states),
        key=lambda s: (s.downloaded, s.gets),
    )
    out: list[_Choice] = []
    node = best.chain
    while node is not None:
        choice, node = node
        out.append(choice)
    return out[::-1]


def _split(size: int, lim: PartLimits) -> list[int]:
    """Sizes of the parts a run of ``size`` bytes is cut into (each <= max_part)."""
    k = max(1, -(-size // lim.max_part))
    base, extra = divmod(size, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def _spans(start: int, size: int, lim: PartLimits) -> list[tuple[int, int]]:
    """The ``[a, b)`` ranges ``size`` bytes from ``start`` are cut into (:func:`_split`)."""
    return list(itertools.pairwise(itertools.accumulate(_split(size, lim), initial=start)))


def _cut_pieces(pieces: list[Piece], sizes: list[int]) -> list[UploadPart]:
    parts: list[UploadPart] = []
    queue = list(pieces)
    for size in sizes:
        out: list[Piece] = []
        while size:
            p = queue.pop(0)
            if p.length > size:  # cut: the rest goes first into the next part
                rest: Piece
                if isinstance(p, Bytes):
                    p, rest = Bytes(p.data[:size]), Bytes(p.data[size:])
                else:
                    p, rest = Download(p.start, p.start + size), Download(p.start + size, p.end)
                queue.insert(0, rest)
            out.append(p)
            size -= p.length
        parts.append(UploadPart(tuple(out)))
    return parts


def _as_pieces(items: Iterable[Segment]) -> tuple[Piece, ...]:
    return tuple(coalesce(Download(s.start, s.end) if isinstance(s, Copy) else s for s in items))


def _normalized(segments: Iterable[Segment], source_size: int) -> tuple[Segment, ...]:
    """The segments normalized, each copy checked against the source's size.

    Raises:
        ValueError: A copy reaches past ``source_size``.
    """
    items = normalize(segments)
    for s in items:
        if isinstance(s, Copy) and s.end > source_size:
            raise ValueError(f"copy [{s.start}, {s.end}) past the source's {source_size} bytes")
    return items


def _multipart(items: Sequence[Segment], choices: Sequence[_Choice], lim: PartLimits) -> list[Part]:
    """The parts of the object, each copy segment copied or downloaded as ``choices`` say."""
    todo = iter(choices)
    parts: list[Part] = []
    buffer: list[Piece] = []
    pending: Copy | None = None  # the last copied range, its tail still negotiable

    def flush_copy() -> None:
        nonlocal pending
        if pending is not None and pending.length:
            parts.extend(CopyPart(a, b) for a, b in _spans(pending.start, pending.length, lim))
        pending = None

    def flush_buffer() -> None:
        merged = coalesce(buffer)
        buffer.clear()
        total = sum(p.length for p in merged)
        if total:
            parts.extend(_cut_pieces(merged, _split(total, lim)))

    for seg in items:
        if isinstance(seg, Bytes):
            buffer.append(seg)
            continue
        choice = next(todo)
        if not choice.copy:
            buffer.append(Download(seg.start, seg.end))
            continue
        if choice.take_prev:
            assert pending is not None
            cut = pending.end - choice.take_prev
            buffer.insert(0, Download(cut, pending.end))
            pending = Copy(pending.start, cut)
        flush_copy()
        if choice.head:
            buffer.append(Download(seg.start, seg.start + choice.head))
        flush_buffer()
        pending = Copy(seg.start + choice.head, seg.end)
    flush_copy()
    flush_buffer()
    return parts


def plan_parts(
    segments: Iterable[Segment], source_size: int, *, limits: PartLimits | None = None
) -> Plan:
    """Plan the upload of the object the segments describe.

    Args:
        segments: The new object (e.g. :attr:`lethe.parquet.splice.SplicePlan.segments`).
        source_size: Size of the source object the copies refer to.
        limits: The multipart limits; S3's by default.

    Returns:
        A :class:`SinglePut` when the source is at most 5 MB (range copies need more), the
        result is under 5 MiB, or nothing would be copied anyway; otherwise the
        :class:`MultipartPlan` that downloads the fewest source bytes.

    Raises:
        ValueError: A copy reaches past ``source_size``.
        SpliceRefused: The object cannot be uploaded within the part limits.
    """
    lim = limits or PartLimits()
    items = _normalized(segments, source_size)
    size = sum(s.length for s in items)
    single = SinglePut(_as_pieces(items))
    if source_size <= lim.min_copy_source or size < lim.min_part:
        if size > lim.max_put:
            raise SpliceRefused(f"a {size}-byte object cannot be uploaded by one PUT")
        return single
    parts = _multipart(items, _choose(items, lim), lim)
    plan = MultipartPlan(tuple(parts))
    if plan.bytes_copied == 0 and size <= lim.max_put:
        return single
    if len(parts) > lim.max_parts:
        raise SpliceRefused(f"the object needs {len(parts)} parts, more than {lim.max_parts}")
    return plan


# --- chained multipart uploads ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StageCopy:
    """A part copied server-side from ``[start, end)`` of an earlier stage's object.

    Attributes:
        stage: Index of the stage whose (temporary) object is copied.
        start: First byte.
        end: One past the last byte.
    """

    stage: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Size of the part."""
        return self.end - self.start


ChainPart: TypeAlias = CopyPart | UploadPart | StageCopy


@dataclass(frozen=True, slots=True)
class ChainedPlan(_PartSums):
    """The new object built by multipart uploads in stages.

    Every stage but the last uploads a temporary object; a stage may copy an earlier
    stage's object (:class:`StageCopy`). Each stage obeys the part rules on its own (every
    part but its last at least the minimum), so a short run of new bytes can be the last
    part of a temporary object instead of borrowing downloaded neighbours.

    Attributes:
        stages: Each stage's parts, in order; the last stage is the new object.
    """

    stages: tuple[tuple[ChainPart, ...], ...]

    @property
    def size(self) -> int:
        """Size of the new object."""
        return sum(p.size for p in self.stages[-1])

    def every_part(self) -> tuple[ChainPart, ...]:
        return tuple(p for st in self.stages for p in st)


def bytes_moved(plan: Plan | ChainedPlan) -> int:
    """Bytes a plan moves over the wire: downloaded plus uploaded."""
    up = plan.size if isinstance(plan, SinglePut) else plan.bytes_uploaded
    return plan.bytes_downloaded + up


_Item: TypeAlias = Copy | tuple[Piece, ...]
"""A long copy, or a block of new bytes and downloaded short copies sent through the client."""


def _length(it: _Item) -> int:
    return it.length if isinstance(it, Copy) else sum(p.length for p in it)


def _blocks(items: Sequence[Segment], keep: int | None) -> list[_Item]:
    """Copies of at least ``keep`` bytes stay copies; everything between two of them (new
    bytes, shorter copies downloaded) becomes one block. ``keep`` None: every segment is
    an item of its own (short copies stay copies)."""
    if keep is None:
        return [s if isinstance(s, Copy) else (s,) for s in items]
    out: list[Copy | list[Piece]] = []
    for seg in items:
        if isinstance(seg, Copy) and seg.length >= keep:
            out.append(seg)
            continue
        piece: Piece = seg if isinstance(seg, Bytes) else Download(seg.start, seg.end)
        last = out[-1] if out else None
        if isinstance(last, list):
            last.append(piece)
        else:
            out.append([piece])
    return [x if isinstance(x, Copy) else tuple(coalesce(x)) for x in out]


def _fill_head(items: list[_Item], mn: int) -> list[_Item]:
    """A short start filled up to ``mn`` from what follows (a copy's head downloaded; the
    whole copy when what would stay of it is shorter than ``mn``)."""
    if len(items) < 2 or _length(items[0]) >= mn:
        return items
    first = items[0]
    head = list(_as_pieces([first]) if isinstance(first, Copy) else first)
    rest = items[1:]
    while rest and sum(p.length for p in head) < mn:
        nxt = rest.pop(0)
        if not isinstance(nxt, Copy):
            head.extend(nxt)
            continue
        take = mn - sum(p.length for p in head)
        if nxt.length - take < mn:
            take = nxt.length
        head.append(Download(nxt.start, nxt.start + take))
        if take < nxt.length:
            rest.insert(0, Copy(nxt.start + take, nxt.end))
    return [tuple(coalesce(head)), *rest]


def _parts_of(it: _Item, lim: PartLimits) -> list[ChainPart]:
    if not isinstance(it, Copy):
        return list(_cut_pieces(list(it), _split(_length(it), lim)))
    return [CopyPart(a, b) for a, b in _spans(it.start, it.length, lim)]


def _stage_copies(stage: int, size: int, lim: PartLimits) -> list[ChainPart]:
    return [StageCopy(stage, a, b) for a, b in _spans(0, size, lim)]


def _chain_base(final: list[ChainPart], mn: int) -> ChainPart:
    """Take the last ``mn`` bytes of the object planned so far off it, as the first part of
    a new temporary stage (a copy part is cut when both halves keep ``mn``)."""
    last = final.pop()
    if isinstance(last, CopyPart) and last.size >= 2 * mn:
        final.append(CopyPart(last.start, last.end - mn))
        return CopyPart(last.end - mn, last.end)
    return last


def plan_chained(
    segments: Iterable[Segment],
    source_size: int,
    *,
    limits: PartLimits | None = None,
    keep: int | None = None,
) -> ChainedPlan:
    """Plan the object in stages so that no short segment drags neighbours through the client.

    Copies at least the minimum part become copy parts and new bytes at least the minimum
    become upload parts of the object. A shorter item that is not the object's last ends a
    temporary stage as its last part: the stage starts with the last minimum part's worth
    of what precedes it (cut off the object's preceding part), or by copying the previous
    temporary stage when short items follow each other; the object then copies the last
    stage of such a chain as one part. Only a short start of the object is filled up to the
    minimum part from the following copy's head (downloaded).

    Each stage of a chain copies the one before it whole, so a long run of short segments
    (a page rewritten in each of many row groups) copies many times the file. With ``keep``
    set, copies shorter than ``keep`` (never less than the minimum part) are downloaded and
    joined with the new bytes around them into one block, so short items never follow each
    other and no stage copies another: each copies little more than the minimum part.

    Raises:
        ValueError: A copy reaches past ``source_size``.
        SpliceRefused: A stage needs more parts than the limit.
    """
    lim = limits or PartLimits()
    items = list(_normalized(segments, source_size))
    mn = lim.min_part
    blocks = _fill_head(_blocks(items, None if keep is None else max(mn, keep)), mn)
    stages: list[tuple[ChainPart, ...]] = []
    final: list[ChainPart] = []
    chain: int | None = None  # the open chain's last temporary stage

    def close() -> None:
        nonlocal chain
        if chain is not None:
            final.extend(_stage_copies(chain, sum(p.size for p in stages[chain]), lim))
            chain = None

    for i, it in enumerate(blocks):
        if _length(it) >= mn or i == len(blocks) - 1 or (chain is None and not final):
            close()
            final.extend(_parts_of(it, lim))
            continue
        # a short item ends a temporary stage
        if chain is not None:
            base = _stage_copies(chain, sum(p.size for p in stages[chain]), lim)
        else:
            base = [_chain_base(final, mn)]
        stages.append((*base, *_parts_of(it, lim)))
        chain = len(stages) - 1
    close()
    stages.append(tuple(final))
    if any(len(st) > lim.max_parts for st in stages):
        raise SpliceRefused(f"a stage needs more than {lim.max_parts} parts")
    return ChainedPlan(tuple(stages))


def plan_download(
    segments: Iterable[Segment],
    source_size: int,
    *,
    limits: PartLimits | None = None,
    part: int = 16 * MiB,
) -> Plan:
    """Every byte through the client, nothing copied server-side: one PUT, or for an object
    over ``part`` bytes a multipart upload of ``part``-sized parts (downloaded as each part
    is sent). The plan a streaming rewrite of the file would use.

    Raises:
        ValueError: A copy reaches past ``source_size``.
        SpliceRefused: The object cannot be uploaded within the part limits.
    """
    lim = limits or PartLimits()
    items = _normalized(segments, source_size)
    pieces = _as_pieces(items)
    size = sum(p.length for p in pieces)
    if size <= max(part, lim.min_part) and size <= lim.max_put:
        return SinglePut(pieces)
    step = max(part, lim.min_part, -(-size // lim.max_parts))
    if step > lim.max_part:
        raise SpliceRefused(f"a {size}-byte object cannot be uploaded within the part limits")
    sizes = [step] * (size // step) + ([size % step] if size % step else [])
    return MultipartPlan(tuple(_cut_pieces(list(pieces), sizes)))


def assemble(plan: Plan | ChainedPlan, source: bytes) -> bytes:
    """Build the planned object in memory (what S3 would assemble); for tests and tools."""
    stages: Sequence[Sequence[ChainPart | SinglePut]]
    if isinstance(plan, ChainedPlan):
        stages = plan.stages
    else:
        stages = (plan.parts if isinstance(plan, MultipartPlan) else (plan,),)
    built: list[bytes] = []
    for stage in stages:
        out = bytearray()
        for p in stage:
            if isinstance(p, StageCopy):
                out += built[p.stage][p.start : p.end]
            elif isinstance(p, CopyPart):
                out += source[p.start : p.end]
            else:
                for x in p.pieces:
                    out += x.data if isinstance(x, Bytes) else source[x.start : x.end]
        built.append(bytes(out))
    return built[-1]
