"""What a page-level rewrite derives from ALL remaining values of a column chunk (DESIGN §4):
its rebuilt bloom filter, and whether its dictionary page may stay although pages holding
erased rows were dictionary-encoded (:mod:`lethe.parquet.partial` reads such chunks whole).

- *Bloom filter*: built from the remaining values at the original's size
  (:mod:`lethe.parquet.bloom`): xxHash64 of each value's plain encoding in a split-block
  bitset of as many bytes as the original's.
- *Dictionary*: it stays when no entry of it is a value of erased rows only. For a writer
  whose every dictionary entry is a value of a dictionary-encoded page (Arrow C++, see
  :mod:`lethe.parquet.partial`), the entries are the values of the chunk's
  dictionary-encoded pages: the dictionary stays when every value of the replaced
  dictionary-encoded pages (erased or not) is a value of a kept dictionary-encoded page,
  which also keeps that property for the next erase (the replaced pages are re-encoded
  PLAIN). For other writers the entries are some values of the chunk: it stays when every
  erased value is a remaining value. Floating point is never proven (``-0.0``/``0.0`` and
  NaNs compare equal but are distinct entries).

>>> values = pa.array([1, 2, 1, 2, 3, 4])  # three dictionary-encoded pages; row 2 erased
>>> keep = pa.array([True, True, False, True, True, True])
>>> pages, dict_encoded = [(0, 2), (2, 4), (4, 6)], [True, True, True]
>>> dictionary_stays(values, keep, pages, dict_encoded, {1}, arrow=True)
True
>>> dictionary_stays(values, keep, pages, dict_encoded, {1, 2}, arrow=True)  # 3, 4 would go
False
>>> dictionary_stays(values, keep, pages, dict_encoded, {1, 2}, arrow=False)
True
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lethe.parquet.bloom import bloom_filter
from lethe.parquet.chunkmeta import WholeChunk
from lethe.parquet.footer import Page
from lethe.parquet.model import FileMetaData
from lethe.parquet.reencode import column_spec

__all__ = ["all_in", "dictionary_stays", "lost_values", "rebuilt_bloom"]


def all_in(values: pa.Array, pool: pa.Array) -> bool:
    """Whether every non-null value of ``values`` is a value of ``pool``.

    Raises:
        WholeChunk: The type has no exact equality here (floating point) or none in Arrow.
    """
    if pa.types.is_floating(values.type):
        raise WholeChunk("a floating-point dictionary is not provable")
    want = pc.unique(values.drop_null())
    if not len(want):
        return True
    try:
        found = pc.unique(pool.filter(pc.is_in(pool, value_set=want)))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise WholeChunk("a dictionary of a type without exact equality") from e
    return len(found) == len(want)


def dictionary_stays(
    values: pa.Array,
    keep: pa.Array,
    pages: Sequence[tuple[int, int]],
    dict_encoded: Sequence[bool],
    replaced: Collection[int],
    arrow: bool,
) -> bool:
    """Whether a chunk's dictionary may stay after an erase.

    Args:
        values: All the chunk's values, erased rows included.
        keep: Whether each row stays.
        pages: Each data page's rows ``[first, end)``.
        dict_encoded: Whether each data page is dictionary-encoded.
        replaced: The pages re-encoded (dictionary-encoded ones become PLAIN).
        arrow: Whether every dictionary entry is a value of a dictionary-encoded page.

    Raises:
        WholeChunk: Equality is not exact for the type.
    """
    if not arrow:
        return all_in(values.filter(pc.invert(keep)), values.filter(keep))
    r = np.zeros(len(values), dtype=bool)
    k = np.zeros(len(values), dtype=bool)
    for i, ((first, end), d) in enumerate(zip(pages, dict_encoded, strict=True)):
        if d:
            (r if i in replaced else k)[first:end] = True
    return all_in(values.filter(pa.array(r)), values.filter(pa.array(k)))


def lost_values(gone: pa.Array, values: pa.Array, keep: pa.Array) -> pa.Array:
    """The erased values ``gone`` that bear on chunk statistics: all of them, or only the
    nulls when every one of them is also a remaining value (of ``values``, the chunk's,
    where ``keep``): the set of values, and so min and max, is then unchanged."""
    if pa.types.is_floating(gone.type) or not all_in(gone, values.filter(keep)):
        return gone
    return gone.filter(pc.is_null(gone))


def rebuilt_bloom(
    meta: FileMetaData, k: int, j: int, pages: Sequence[Page], kept: pa.Table, size: int
) -> bytes:
    """The bloom filter (header and bitset) of chunk ``j`` of group ``k`` holding the
    values of ``kept`` alone, the same ``size`` as the original's (issue 37 item 2: fewer
    values only lower its false-positive rate; see :mod:`lethe.parquet.bloom`).

    Raises:
        WholeChunk: No common header and bitset make ``size``.
        SpliceRefused: The values' plain bytes are not known.
    """
    elem = meta.leaves()[j][1]
    if elem.type is None:
        raise WholeChunk("a column without a physical type")
    options = column_spec(meta, k, j, pages, None).writer_options()
    got = bloom_filter(kept.column(0), size, elem.type, elem.type_length, options)
    if got is None:
        raise WholeChunk("a bloom filter of another header shape")
    return got
