"""The description of a new object as pieces of an old one and new bytes.

A splice does not produce a file: it produces a list of segments that, concatenated, are the
new file. :mod:`lethe.parquet.parts` turns such a list into a multipart upload plan. What
a splice has already read of the old object is a set of :class:`Extent`, read through a
:class:`Source`.

>>> segs = normalize([Copy(0, 4), Copy(4, 8), Bytes(b"ab"), Bytes(b""), Bytes(b"c")])
>>> segs
(Copy(start=0, end=8), Bytes(data=b'abc'))
>>> apply_segments(segs, b"PAR1....rest")
b'PAR1....abc'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TypeAlias, TypeVar

from lethe.errors import SpliceRefused
from lethe.parquet.footer import ByteRange

__all__ = [
    "Bytes",
    "Copy",
    "Extent",
    "NeedBytes",
    "Segment",
    "Source",
    "apply_segments",
    "coalesce",
    "normalize",
    "segments_size",
]


@dataclass(frozen=True, slots=True)
class Copy(ByteRange):
    """Bytes ``[start, end)`` of the source object, unchanged."""

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"invalid copy range [{self.start}, {self.end})")


@dataclass(frozen=True, slots=True)
class Bytes:
    """New bytes.

    Attributes:
        data: The bytes.
    """

    data: bytes

    @property
    def length(self) -> int:
        """Number of bytes."""
        return len(self.data)

    def __repr__(self) -> str:
        if len(self.data) <= 32:
            return f"Bytes(data={self.data!r})"
        return f"Bytes(<{len(self.data)} bytes>)"


Segment: TypeAlias = Copy | Bytes


_R = TypeVar("_R", bound=ByteRange)


def coalesce(items: Iterable[Bytes | _R]) -> list[Bytes | _R]:
    """Drop empty items, join adjacent new bytes and merge contiguous ranges of one kind."""
    out: list[Bytes | _R] = []
    run: list[bytes] = []  # adjacent new bytes, joined once (pairwise joins are quadratic)

    def flush() -> None:
        if run:
            out.append(Bytes(run[0] if len(run) == 1 else b"".join(run)))
            run.clear()

    for s in items:
        if s.length == 0:
            continue
        if isinstance(s, Bytes):
            run.append(s.data)
            continue
        flush()
        prev = out[-1] if out else None
        if type(prev) is type(s) and not isinstance(prev, Bytes) and prev.end == s.start:
            out[-1] = replace(prev, end=s.end)
        else:
            out.append(s)
    flush()
    return out


def normalize(segments: Iterable[Segment]) -> tuple[Segment, ...]:
    """Drop empty segments, merge adjacent new bytes and contiguous copies."""
    return tuple(coalesce(segments))


def segments_size(segments: Iterable[Segment]) -> int:
    """Total length of the described object."""
    return sum(s.length for s in segments)


def apply_segments(segments: Iterable[Segment], source: bytes) -> bytes:
    """Build the described object in memory from the whole source.

    Raises:
        ValueError: A copy reaches past the end of the source.
    """
    out = bytearray()
    for s in segments:
        if isinstance(s, Copy):
            if s.end > len(source):
                raise ValueError(f"copy [{s.start}, {s.end}) past the source's {len(source)} B")
            out += source[s.start : s.end]
        else:
            out += s.data
    return bytes(out)


class NeedBytes(SpliceRefused):
    """Bytes of the original that were not provided (fetch them and plan again).

    Attributes:
        ranges: The missing ``(start, end)`` byte ranges, sorted and coalesced.
    """

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        merged: list[tuple[int, int]] = []
        for s, e in sorted(ranges):
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            elif e > s:
                merged.append((s, e))
        self.ranges = tuple(merged)
        shown = ", ".join(f"[{s}, {e})" for s, e in self.ranges[:3])
        super().__init__(f"bytes {shown} of the original file were not provided")


@dataclass(frozen=True, slots=True)
class Extent:
    """Bytes of the original file already in memory.

    Attributes:
        offset: File offset of ``data[0]``.
        data: The bytes.
    """

    offset: int
    data: bytes

    @property
    def end(self) -> int:
        """One past the last byte held."""
        return self.offset + len(self.data)


class Source:
    """Random access to the fetched extents of the original file.

    >>> src = Source([Extent(100, b"abcdef"), Extent(0, b"PAR1")])
    >>> src.read(102, 3), src.has(0, 5), src.extent_at(3).offset
    (b'cde', False, 0)
    """

    def __init__(self, extents: Iterable[Extent]) -> None:
        self._extents = sorted(extents, key=lambda e: e.offset)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)``, from one extent.

        Raises:
            NeedBytes: No extent holds them all.
        """
        for e in self._extents:
            if e.offset <= offset and offset + length <= e.end:
                return e.data[offset - e.offset : offset + length - e.offset]
        raise NeedBytes([(offset, offset + length)])

    def with_extents(self, more: Iterable[Extent]) -> Source:
        """This source and ``more`` extents."""
        return Source([*self._extents, *more])

    def has(self, offset: int, length: int) -> bool:
        """Whether one extent holds bytes ``[offset, offset + length)``."""
        return any(e.offset <= offset and offset + length <= e.end for e in self._extents)

    def extent_at(self, offset: int) -> Extent:
        """The extent holding byte ``offset``.

        Raises:
            SpliceRefused: None does.
        """
        for e in self._extents:
            if e.offset <= offset < e.end:
                return e
        raise SpliceRefused(f"byte {offset} of the original file was not provided")
