"""Whether a re-encoding stores what the original did, as a reader could tell.

A chunk's pages show how it was written (:class:`ChunkShape`: dictionary use, data
encodings, data page types, checksums); a schema element says what its values mean
(:func:`meaning`: a legacy ``converted_type`` and the equivalent ``logicalType`` are the same
thing). A re-encoding (:mod:`lethe.parquet.reencode`, :mod:`lethe.parquet.partial`) is
refused when it changes either (:func:`compare_schema`, :func:`compare_shapes`).

>>> from lethe.parquet.model import SchemaElement
>>> from lethe.parquet.thrift import Field, Struct, TType
>>> legacy = Struct((Field(1, TType.I32, 1), Field(4, TType.BINARY, b"t"), Field(6, TType.I32, 15)))
>>> meaning(SchemaElement(legacy))[-1]
('int', 8, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lethe.errors import SpliceRefused
from lethe.parquet.enums import Encoding, PageType, PhysicalType
from lethe.parquet.footer import Page
from lethe.parquet.model import ColumnChunk, FileMetaData, SchemaElement
from lethe.parquet.thrift import Struct, ThriftList, TType

__all__ = [
    "ChunkShape",
    "check_column",
    "chunk_shape",
    "compare_chunk",
    "compare_schema",
    "compare_shapes",
    "meaning",
]

DICT = Encoding.RLE_DICTIONARY
"""The dictionary encoding (``PLAIN_DICTIONARY`` pages count as it)."""


@dataclass(frozen=True, slots=True)
class ChunkShape:
    """What a column chunk's pages show about how it was written."""

    dictionary: bool
    data_encodings: frozenset[int]
    page_types: frozenset[int]
    crc: bool


def chunk_shape(pages: Sequence[Page]) -> ChunkShape:
    """What the pages of a chunk show about how it was written."""
    data = [p for p in pages if p.header.is_data]
    enc = {p.header.encoding for p in data}
    norm = frozenset(DICT if e == Encoding.PLAIN_DICTIONARY else e for e in enc if e is not None)
    return ChunkShape(
        dictionary=any(p.header.type == PageType.DICTIONARY_PAGE for p in pages),
        data_encodings=norm,
        page_types=frozenset(p.header.type for p in data),
        crc=any(p.header.crc is not None for p in pages),
    )


def check_column(meta: FileMetaData, j: int, tmeta: FileMetaData) -> None:
    """Check that a one-column file written for leaf ``j`` stores it as the original does.

    Raises:
        SpliceRefused: The schema element differs in a way a reader would see.
    """
    _same_meaning(meta.leaves()[j][1], tmeta.leaves()[0][1])


def compare_chunk(
    name: str, cc: ColumnChunk, tcc: ColumnChunk, old: Sequence[Page], new: Sequence[Page]
) -> None:
    """:func:`compare_shapes` on the chunks' pages (both complete)."""
    compare_shapes(name, cc, tcc, chunk_shape(old), chunk_shape(new))


def _canon(v: object) -> object:
    """A comparable form of a thrift value that ignores header-form choices."""
    if isinstance(v, Struct):
        return tuple(sorted((f.id, _canon(f.value)) for f in v.fields))
    if isinstance(v, ThriftList):
        et = TType.BOOL if v.elem_type == TType.BOOL_FALSE else v.elem_type
        return ("list", int(et), tuple(_canon(x) for x in v.items))
    return v


_TIME_UNITS = {1: "ms", 2: "us", 3: "ns"}
_CONVERTED: dict[int, tuple[object, ...]] = {
    0: ("string",),
    1: ("map",),
    3: ("list",),
    4: ("enum",),
    6: ("date",),
    7: ("time", True, "ms"),
    8: ("time", True, "us"),
    9: ("timestamp", True, "ms"),
    10: ("timestamp", True, "us"),
    11: ("int", 8, False),
    12: ("int", 16, False),
    13: ("int", 32, False),
    14: ("int", 64, False),
    15: ("int", 8, True),
    16: ("int", 16, True),
    17: ("int", 32, True),
    18: ("int", 64, True),
    19: ("json",),
    20: ("bson",),
}
_LOGICAL_TAGS = {
    1: "string",
    2: "map",
    3: "list",
    4: "enum",
    6: "date",
    11: "null",
    12: "json",
    13: "bson",
    14: "uuid",
    15: "float16",
}


def _unit(s: object) -> str:
    if isinstance(s, Struct) and len(s.fields) == 1:
        return _TIME_UNITS.get(s.fields[0].id, "?")
    return "?"


def meaning(e: SchemaElement) -> tuple[object, ...]:
    """What a schema element says about its values, however the writer annotated it.

    Two elements with equal meanings store the same bytes for the same values and order
    them (for statistics and column indexes) the same way: a legacy ``converted_type``
    and the equivalent ``logicalType`` are the same thing, and a plain ``INT32``/``INT64``
    is a signed integer of that width.
    """
    width = e.type_length if e.type == PhysicalType.FIXED_LEN_BYTE_ARRAY else None
    shape = (e.name, e.type, width, e.repetition_type, e.num_children)
    lt = e.logical_type
    meaning: tuple[object, ...] | None = None
    if lt is not None and len(lt.fields) == 1:
        f = lt.fields[0]
        v = f.value
        if f.id in _LOGICAL_TAGS:
            meaning = (_LOGICAL_TAGS[f.id],)
        elif f.id == 5 and isinstance(v, Struct):
            meaning = ("decimal", v.get(2), v.get(1))
        elif f.id in (7, 8) and isinstance(v, Struct):
            meaning = ("time" if f.id == 7 else "timestamp", v.get(1) is True, _unit(v.get(2)))
        elif f.id == 10 and isinstance(v, Struct):
            meaning = ("int", v.get(1), v.get(2) is True)
        else:
            meaning = ("logical", _canon(lt))
    elif lt is not None:
        meaning = ("logical", _canon(lt))
    elif e.converted_type == 5:
        meaning = ("decimal", e.precision, e.scale or 0)
    elif e.converted_type is not None:
        meaning = _CONVERTED.get(e.converted_type, ("converted", e.converted_type))
    elif e.type == PhysicalType.INT32:
        meaning = ("int", 32, True)
    elif e.type == PhysicalType.INT64:
        meaning = ("int", 64, True)
    return (*shape, meaning)


def _same_meaning(x: SchemaElement, y: SchemaElement) -> None:
    if meaning(x) != meaning(y):
        raise SpliceRefused(
            f"re-encoding changes schema element {x.name!r}: {meaning(x)} -> {meaning(y)}"
        )


def compare_schema(orig: FileMetaData, new: FileMetaData) -> None:
    """Check that a re-encoding's schema elements mean what the original's do.

    Raises:
        SpliceRefused: The schema has another shape, or an element another meaning.
    """
    a, b = orig.schema, new.schema
    if len(a) != len(b) or a[0].num_children != b[0].num_children:
        raise SpliceRefused("the re-encoded schema has a different shape")
    for x, y in zip(a[1:], b[1:], strict=True):
        _same_meaning(x, y)


def compare_shapes(
    name: str,
    cc: ColumnChunk,
    tcc: ColumnChunk,
    old: ChunkShape,
    new: ChunkShape,
    *,
    bloom_apart: bool = False,
) -> None:
    """Check that chunk ``tcc`` of a re-encoding (pages of shape ``new``) stores column
    ``name`` as the original ``cc`` (``old``) does; ``bloom_apart``: its bloom filter is
    built apart, so pyarrow's presence of one is not compared.

    Raises:
        SpliceRefused: Type, path, codec, dictionary use, encodings beyond the original's,
            data page version, bloom filter presence, or a lost offset index.
    """
    m, t = cc.meta_data, tcc.meta_data
    if (m.type, m.path_in_schema, m.codec) != (t.type, t.path_in_schema, t.codec):
        raise SpliceRefused(f"column {name!r}: re-encoding changes type, path or codec")
    if old.dictionary != new.dictionary:
        raise SpliceRefused(f"column {name!r}: re-encoding changes dictionary use")
    allowed = set(old.data_encodings)
    if old.dictionary:
        allowed |= {DICT, Encoding.PLAIN}
    if not new.data_encodings <= allowed:
        raise SpliceRefused(
            f"column {name!r}: re-encoding uses encodings {sorted(new.data_encodings)}, "
            f"the original {sorted(old.data_encodings)}"
        )
    if old.page_types != new.page_types:
        raise SpliceRefused(f"column {name!r}: re-encoding changes the data page version")
    if not bloom_apart and (m.bloom_filter_offset is None) != (t.bloom_filter_offset is None):
        raise SpliceRefused(f"column {name!r}: re-encoding changes bloom filter presence")
    if cc.offset_index_offset is not None and tcc.offset_index_offset is None:
        raise SpliceRefused(f"column {name!r}: re-encoding loses the offset index")
