"""What GC must know of the Iceberg view: which objects under ``metadata/`` are still needed.

The view's objects are garbage like old Lethe manifests (DESIGN §6b). GC calls
:func:`references` with the Lethe versions it retains and gets:

* ``keep``: every ``metadata/`` object a retained snapshot needs: the metadata files of
  retained versions (and the one ``version-hint.text`` names, and the hint itself); for
  each of their snapshots whose version is retained, its manifest list, the manifests it
  lists and (format 2) the position-delete files those list;
* ``garbage``: everything else listed under ``metadata/`` (GC deletes it under its usual
  grace rule: an unreferenced object younger than the grace may belong to a publisher
  that has not written its metadata file yet);
* ``derived_from``: data manifest -> the segment object it was made from. Data manifests
  are the only view objects that hold values (the key column's bounds): each holds no
  value its segment object does not, so for erasure completion a data manifest counts
  exactly like its segment object (``ErasureRecord.superseded`` names segment objects:
  the data manifests derived from them must be gone too, see :func:`erasure_objects`).
  Manifest lists, delete manifests, position-delete files and metadata files hold paths,
  counts and ids only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lethe.iceberg.avro as avro
from lethe.catalog.commit import Catalog
from lethe.iceberg.mapping import HINT_KEY, segment_stem, stem_of_manifest, version_of_metadata
from lethe.iceberg.publish import pmap, read_hint
from lethe.storage.layout import METADATA_PREFIX, SEGMENT_PREFIX
from lethe.storage.store import ObjectInfo

__all__ = ["IcebergReferences", "erasure_objects", "references"]


@dataclass(frozen=True, slots=True)
class IcebergReferences:
    """The view's objects (table-relative keys) split into needed and garbage."""

    listed: Mapping[str, ObjectInfo]  # every object under metadata/, with size and age
    keep: frozenset[str]
    derived_from: Mapping[str, str] = field(default_factory=dict)  # data manifest -> stem

    @property
    def garbage(self) -> tuple[str, ...]:
        """Listed objects no retained snapshot needs (GC applies its grace rule)."""
        return tuple(sorted(k for k in self.listed if k not in self.keep))


def _rel(catalog: Catalog, key: str) -> str:
    return key[len(catalog.prefix) + 1 :] if catalog.prefix else key


def references(
    catalog: Catalog,
    retained: Collection[int],
    *,
    listed: Iterable[ObjectInfo] | None = None,
) -> IcebergReferences:
    """The ``metadata/`` objects that the Iceberg snapshots of ``retained`` Lethe versions
    need (see the module docstring). ``listed``: GC's own listing of ``metadata/`` (full
    keys), taken before it read the head; listed here when not given."""
    objs = {
        _rel(catalog, o.key): o
        for o in (
            listed if listed is not None else catalog.store.list(catalog.key(METADATA_PREFIX))
        )
    }
    keep: set[str] = set()
    versions = {v: k for k in objs if (v := version_of_metadata(k)) is not None}
    wanted = {versions[v] for v in retained if v in versions}
    if HINT_KEY in objs:
        keep.add(HINT_KEY)
        hint, _ = read_hint(catalog.store, catalog.key(HINT_KEY))
        if hint is not None and hint in versions:
            wanted.add(versions[hint])
    keep |= wanted
    location = catalog.uri.rstrip("/") + "/"

    def rel(uri: str) -> str:
        return uri[len(location) :] if uri.startswith(location) else uri

    def load(k: str) -> bytes:
        return catalog.store.get(catalog.key(k)).body

    lists: set[str] = set()
    for body in pmap(load, sorted(wanted)):
        meta: dict[str, Any] = json.loads(body)
        for s in meta.get("snapshots", []):
            if int(s["snapshot-id"]) in retained:
                lists.add(rel(s["manifest-list"]))
    lists = {k for k in lists if k in objs}
    keep |= lists
    manifests: set[str] = set()
    for body in pmap(load, sorted(lists)):
        manifests.update(rel(m.manifest_path) for m in avro.decode_manifest_list(body))
    manifests = {k for k in manifests if k in objs}
    keep |= manifests
    # format 2: position-delete files under metadata/ are listed by delete manifests
    deletes = [k for k in manifests if (s := stem_of_manifest(k)) and s[0] == "deletes"]
    for body in pmap(load, deletes):
        for e in avro.decode_manifest(body):
            p = rel(e.data_file.file_path)
            if p.startswith(METADATA_PREFIX):
                keep.add(p)
    derived = {k: s[1] for k in objs if (s := stem_of_manifest(k)) is not None and s[0] == "data"}
    return IcebergReferences(objs, frozenset(keep), derived)


def erasure_objects(refs: IcebergReferences, segments: Iterable[str]) -> tuple[str, ...]:
    """The view's objects that may hold the values of the given segment objects: the data
    manifests derived from them (other paths, e.g. the data files of
    ``ErasureRecord.superseded``, are ignored). Wherever GC requires a segment object to be
    gone for an erasure to be complete, these must be gone too."""
    stems = {segment_stem(p) for p in segments if p.startswith(SEGMENT_PREFIX)}
    return tuple(sorted(k for k, s in refs.derived_from.items() if s in stems))
