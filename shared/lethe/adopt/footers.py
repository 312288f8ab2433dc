"""Footers of files to adopt, read with suffix GETs only (one sized by the footers seen so
far, or the footer's length, then exactly the footer), pinned to each file's ETag; and what the footer says about erasing from the file
in place (the erasure-readiness report)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.adopt.source import SourceFile
from lethe.parquet.enums import Codec, Encoding
from lethe.parquet.footer import check_roundtrip, parse_tail
from lethe.progress import Progress, track
from lethe.storage.store import S3Store

__all__ = [
    "Footer",
    "FooterGuess",
    "Readiness",
    "footer_of",
    "read_footers",
    "readiness",
    "tail_bytes",
]

#: codecs the splice re-encodes with (pyarrow writes them); others need a rewrite first
SPLICE_CODECS = frozenset(
    {Codec.UNCOMPRESSED, Codec.SNAPPY, Codec.GZIP, Codec.BROTLI, Codec.ZSTD, Codec.LZ4_RAW}
)
#: encodings the splice reproduces (values and levels)
SPLICE_ENCODINGS = frozenset(
    {
        Encoding.PLAIN,
        Encoding.PLAIN_DICTIONARY,
        Encoding.RLE_DICTIONARY,
        Encoding.RLE,
        Encoding.BIT_PACKED,
        Encoding.DELTA_BINARY_PACKED,
        Encoding.DELTA_LENGTH_BYTE_ARRAY,
        Encoding.DELTA_BYTE_ARRAY,
        Encoding.BYTE_STREAM_SPLIT,
    }
)


@dataclass(frozen=True, slots=True)
class Readiness:
    """How an erasure can edit one file in place.

    Attributes:
        page_index: every column chunk has an offset and a column index (page-level splices).
        row_group_bytes: the compressed size of each row group (what a row-group-level
            splice re-uploads at most).
        refused: why the splice cannot edit the file (a codec or encoding it cannot
            reproduce, a footer that does not re-serialize identically); empty: it can.
    """

    page_index: bool
    row_group_bytes: tuple[int, ...]
    refused: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        """Page-level splices possible and nothing refused (else: needs one rewrite first)."""
        return self.page_index and not self.refused


@dataclass(frozen=True, slots=True)
class Footer:
    """One file's footer as read (``nbytes``: the footer's length plus its 8-byte trailer)."""

    source: SourceFile
    etag: str
    size: int
    metadata: pq.FileMetaData
    schema: pa.Schema
    nbytes: int
    readiness: Readiness
    #: the table's name -> the file's own name, for the columns the file names otherwise
    #: (Delta column mapping, an Iceberg rename; :mod:`lethe.adopt.names`); ``schema`` then
    #: has the table's names
    physical: Mapping[str, str] = field(default_factory=dict)

    @property
    def file_schema(self) -> pa.Schema:
        """The schema as the file names its columns."""
        if not self.physical:
            return self.schema
        return pa.schema(
            [f.with_name(self.physical.get(f.name, f.name)) for f in self.schema],
            metadata=self.schema.metadata,
        )


def readiness(tail: bytes, size: int) -> Readiness:
    """What the footer (``tail``: at least the footer and trailer) says about splicing."""
    footer = parse_tail(tail, size)
    meta = footer.metadata
    refused: list[str] = []
    page_index = True
    groups: list[int] = []
    for rg in meta.row_groups:
        total = 0
        for cc in rg.columns:
            m = cc.meta_data
            total += m.total_compressed_size
            if cc.offset_index_offset is None or cc.column_index_offset is None:
                page_index = False
            if m.codec not in SPLICE_CODECS:
                refused.append(f"column {'.'.join(m.path_in_schema)}: codec {Codec(m.codec).name}")
            bad = [Encoding(e).name for e in m.encodings if e not in SPLICE_ENCODINGS]
            if bad:
                refused.append(f"column {'.'.join(m.path_in_schema)}: encodings {bad}")
        groups.append(total)
    try:
        check_roundtrip(footer.raw)
    except errors.LetheError as e:
        refused.append(str(e))
    return Readiness(page_index, tuple(groups), tuple(dict.fromkeys(refused)))


class FooterGuess:
    """How many tail bytes to ask for first: the largest footer seen so far (plus 1% and 8
    bytes), so that files from the same writer take one suffix GET each and download at most
    a few percent more than their footers; 0 (nothing seen yet): the trailer first."""

    __slots__ = ("_largest",)

    def __init__(self) -> None:
        self._largest = 0

    def __call__(self) -> int:
        return (self._largest + self._largest // 100 + 8) if self._largest else 0

    def saw(self, n: int) -> None:
        if n > self._largest:  # a lost race costs one more GET, of the missing bytes only
            self._largest = n


def _read_one(store: S3Store, sf: SourceFile, guess: FooterGuess | None = None) -> Footer:
    etag, size, tail = tail_bytes(store, sf, guess=guess() if guess else 0)
    if guess is not None:
        guess.saw(len(tail))
    return footer_of(sf, etag, size, tail)


def tail_bytes(store: S3Store, sf: SourceFile, *, guess: int = 0) -> tuple[str, int, bytes]:
    """``(etag, size, footer and trailer bytes)`` of one file, by suffix GETs pinned to its
    ETag (a HEAD first when the source did not give it): with ``guess``, one GET of that
    many tail bytes, and a second of the footer's missing head only when the footer is
    longer; without, the 8-byte trailer, then the rest of the footer. What a Spark task
    returns.

    Raises:
        UnsupportedFile: not a Parquet file, or encrypted.
    """
    etag, size = sf.etag, sf.size
    if etag is None:
        info = store.head(sf.uri)
        etag, size = info.etag, info.size
    if size < 12:
        raise errors.UnsupportedFile(f"{sf.uri} is not a Parquet file ({size} bytes)")
    first = store.get(sf.uri, etag=etag, suffix=max(8, min(guess, size))).body
    if first[-4:] != b"PAR1":
        what = "an encrypted Parquet file" if first[-4:] == b"PARE" else "not a Parquet file"
        raise errors.UnsupportedFile(f"{sf.uri} is {what}")
    n = int.from_bytes(first[-8:-4], "little") + 8
    if n > size:
        raise errors.UnsupportedFile(f"{sf.uri}: footer length exceeds the file size")
    if n <= len(first):
        return etag, size, first[len(first) - n :]
    # the guess fell short: only the footer's head that is missing, never a byte twice
    head = store.get(sf.uri, etag=etag, start=size - n, end=size - len(first)).body
    return etag, size, head + first


def footer_of(sf: SourceFile, etag: str, size: int, tail: bytes) -> Footer:
    """The :class:`Footer` of ``sf`` from its footer and trailer bytes ``tail``.

    Raises:
        UnsupportedFile: the footer or its schema cannot be read.
    """
    try:
        md = pq.read_metadata(pa.BufferReader(tail))
        schema = md.schema.to_arrow_schema()
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.UnsupportedFile(f"{sf.uri}: unreadable Parquet footer ({e})") from e
    return Footer(sf, etag, size, md, schema, len(tail), readiness(tail, size))


def read_footers(
    store: S3Store,
    files: Sequence[SourceFile],
    *,
    threads: int = 16,
    progress: Progress | None = None,
) -> list[Footer]:
    """The footers of ``files``, in order (``threads`` at a time; one suffix GET each once a
    footer was seen, see :class:`FooterGuess`); ``progress`` hears of each file read (task
    ``"adopt footers"``).

    Raises:
        UnsupportedFile: a file is not (readable) Parquet.
        PreconditionFailed: a file changed since it was listed.
    """
    with track(progress, "adopt footers", total=len(files), unit="files") as tracker:
        if not files:
            return []
        with ThreadPoolExecutor(max_workers=min(threads, len(files))) as pool:
            guess = FooterGuess()
            return list(pool.map(tracker.each(lambda sf: _read_one(store, sf, guess)), files))
