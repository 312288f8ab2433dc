"""The lineage object: where the rows of every file a splice replaced went (issue 39).

A splice replaces a data file by a new object without some of its rows. Versions from
before the splice still name the old file, which GC deletes after the erasure grace; they
read through the table's lineage instead (docs/format.md §6b). One immutable object
(``manifest/segments/lineage-<uuid32>.json.gz``, gzip JSON) per splice commit holds every
entry of the previous one, each brought up to date: ``path`` (a file some version named),
``removed`` (the positions of ``path`` the splices removed, a portable 64-bit Roaring bitmap,
base64) and ``file``, the entry of the file that holds the rest of its rows now (statistics
included, no DV; absent when no row is left). Chains are collapsed: a splice of a spliced
file updates the entries that led to it, so a reader follows one entry, never a chain. The
root names the object (:class:`~lethe.catalog.manifest.LineageRef`).

Nothing here does I/O (see :mod:`lethe.dv.lineage`).

>>> lin = Lineage(table_uuid="t", version=3, entries=(LineageEntry(path="data/a", version=3),))
>>> decode_lineage(encode_lineage(lin)) == lin, lin.by_path()["data/a"].file is None
(True, True)
"""

from __future__ import annotations

import gzip
import json
import uuid
from typing import Final, Literal

from pydantic import Field, ValidationError

from lethe import errors
from lethe.catalog.entries import DataFile, Frozen
from lethe.storage.layout import SEGMENT_PREFIX

__all__ = [
    "LINEAGE_FORMAT",
    "Lineage",
    "LineageEntry",
    "decode_lineage",
    "encode_lineage",
    "lineage_key",
]

LINEAGE_FORMAT: Final = "lethe.lineage"


class LineageEntry(Frozen):
    """One replaced file: ``path``, the positions of it the splices removed (``removed``,
    base64 Roaring; empty: none) and the live file its other rows are in (``file``, None:
    none left), as of the splice commit ``version`` that last changed the entry."""

    path: str
    version: int = Field(ge=0)
    removed: str = ""
    file: DataFile | None = None


class Lineage(Frozen):
    """One lineage object (see the module docstring)."""

    format: Literal["lethe.lineage"] = LINEAGE_FORMAT
    format_version: Literal[1] = 1
    table_uuid: str
    version: int = Field(ge=0)  # the splice commit that wrote it (its base + 1)
    entries: tuple[LineageEntry, ...] = ()

    def by_path(self) -> dict[str, LineageEntry]:
        """Entries by the path they replace."""
        return {e.path: e for e in self.entries}


def lineage_key() -> str:
    """A new lineage object's table-relative key (no version in the name: GC ages it by
    the grace like any upload until a root references it)."""
    return f"{SEGMENT_PREFIX}lineage-{uuid.uuid4().hex}.json.gz"


def encode_lineage(lin: Lineage) -> bytes:
    """gzip (no timestamp) of its JSON."""
    return gzip.compress(lin.model_dump_json().encode(), compresslevel=6, mtime=0)


def decode_lineage(raw: bytes, *, where: str = "lineage", table_uuid: str | None = None) -> Lineage:
    """Parse and validate a lineage object; anything wrong is :class:`CorruptManifest`."""
    try:
        obj = json.loads(gzip.decompress(raw))
        lin = Lineage.model_validate(obj)
    except (OSError, EOFError, ValueError, ValidationError) as e:
        raise errors.CorruptManifest(f"{where} is not a Lethe lineage object: {e}") from e
    if table_uuid is not None and lin.table_uuid != table_uuid:
        raise errors.CorruptManifest(f"{where} belongs to another table")
    return lin
