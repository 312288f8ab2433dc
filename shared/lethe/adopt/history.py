"""A source's history and metadata: the objects of an Iceberg or Delta table that are not live
data files but hold copies of its values (issue 35 item 8).

Iceberg keeps every earlier snapshot's data and delete files until its snapshots expire, and
its metadata JSON, manifest lists and manifests carry column bounds; Delta keeps removed
files, ``_delta_log`` commits (statistics) and checkpoints. Adopting the current snapshot
alone would leave them behind: an erasure would remove a person from the live files while
the source's history still holds them. :func:`history_objects` lists them (the table's own
folders, and whatever its metadata references elsewhere); the adoption takes them as owned
and superseded (:mod:`lethe.erasure.ownership`), so GC deletes them after the grace.

>>> describe("s3://b/t/metadata/snap-1-1-ab.avro"), describe("s3://b/t/_delta_log/00000000000000000003.json")
('iceberg manifest list', 'delta log commit')
>>> describe("s3://b/t/_delta_log/00000000000000000010.checkpoint.parquet")
'delta checkpoint'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lethe import errors
from lethe.adopt.objects import SourceObjects
from lethe.adopt.source import HistoryObject

__all__ = ["describe", "history_objects"]


def describe(uri: str) -> str:
    """What a source object is, by its name."""
    name = uri.rsplit("/", 1)[-1]
    if "/_delta_log/" in uri:
        if ".checkpoint" in name:
            return "delta checkpoint"
        if name.endswith(".json"):
            return "delta log commit"
        return "delta log object"
    if name.endswith(".metadata.json"):
        return "iceberg metadata json"
    if name.startswith("snap-") and name.endswith(".avro"):
        return "iceberg manifest list"
    if name.endswith(".avro"):
        return "iceberg manifest"
    if name.endswith(".puffin"):
        return "iceberg deletion vectors"
    if name.startswith("deletion_vector_") and name.endswith(".bin"):
        return "delta deletion vector"
    if name.endswith((".parquet", ".parq", ".pq")):
        return "earlier snapshot's data or delete file"
    return "table object"


def history_objects(
    objects: SourceObjects, roots: Sequence[str], live: Iterable[str], walked: Iterable[str] = ()
) -> tuple[HistoryObject, ...]:
    """Every object under the ``roots`` (``s3://`` prefixes ending in ``/``) and every
    ``walked`` URI (what the metadata references, wherever it lives: one HEAD each outside
    the roots; gone ones are skipped), except the ``live`` data files, by URI."""
    live = set(live)
    found: dict[str, HistoryObject] = {}
    for root in dict.fromkeys(roots):
        bucket = root.removeprefix("s3://").split("/", 1)[0]
        for o in objects.list(root):
            uri = f"s3://{bucket}/{o.key}"
            if uri not in live:
                found[uri] = HistoryObject(uri, o.size, o.etag, describe(uri))
    rest = sorted({u for u in walked if u not in live and u not in found})

    def head(uri: str) -> HistoryObject | None:
        try:
            o = objects.head(uri)
        except errors.NotFound:
            return None
        return HistoryObject(uri, o.size, o.etag, describe(uri))

    for h in objects.map(head, rest):
        if h is not None:
            found[h.uri] = h
    return tuple(found[u] for u in sorted(found))
