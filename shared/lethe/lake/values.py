"""The values objects of lake requests (``<lake prefix>/requests/<uuid>.json``): the only place
the lake keeps the values of a person, in plain text, while a request is pending.

Their life, so that none outlives its request (issue 35 item 5):

1. a call names the object in ``lake.json`` first (the requests it records carry the key),
   and only then PUTs it (create-only), holding only the requests that name it: a twin
   delivery that finds the request recorded already writes nothing, and every object that
   exists is named by a request;
2. once no part of a request is pending (committed everywhere, or cancelled), the object is
   deleted, every version and delete marker of it in a versioned bucket, by the call that
   finished the request and again by every later call that touches it (a call that PUT
   late, after a twin finished, deletes its own object at its end);
3. :func:`sweep` (run by ``resume`` and by the scheduled window run) deletes every object
   that only finished requests name, and objects no request names (left by a call of an
   older release, or one killed between its PUT and its record) once they are an hour old;
4. :func:`present` lists which objects still have a version: a receipt lists each request's
   object as a copy of the person's values, present or gone, from that listing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lethe import errors
from lethe.lake.model import VALUES_PREFIX, LakeDoc
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = ["drop", "finished", "load", "present", "put", "sweep"]

#: Objects no request names are swept only past this age (a call of an older release PUT
#: them before recording its requests).
UNNAMED_AFTER = timedelta(hours=1)


def put(store: S3Store, prefix: str, rel: str, entries: Mapping[str, dict[str, Any]]) -> None:
    """PUT (create-only) the values object ``rel`` holding ``entries`` (id hash -> request
    id, body hash and values). A second PUT of the same key is refused by S3 and ignored."""
    try:
        store.put(object_key(prefix, rel), json.dumps(entries).encode(), if_none_match=True)
    except errors.PreconditionFailed:
        log.info("values object of lake %s exists already", prefix)


def load(
    store: S3Store, prefix: str, rel: str, id_hash: str, body_hash: str
) -> tuple[str, tuple[Any, ...]] | None:
    """The (request id, values) of request ``id_hash`` from object ``rel`` (None: absent)."""
    try:
        doc = json.loads(store.get(object_key(prefix, rel)).body).get(id_hash)
    except errors.NotFound:
        return None
    if not doc or doc.get("body_hash") != body_hash:
        return None
    return str(doc["request_id"]), tuple(doc["values"])


def _versions(store: S3Store, prefix: str) -> list[S3Store.ObjectVersion]:
    """Every version and delete marker under the lake's values prefix (ListObjectVersions
    answers for an unversioned bucket too: each object once, version ``null``)."""
    return list(store.list_object_versions(object_key(prefix, VALUES_PREFIX)))


def present(store: S3Store, prefix: str) -> set[str]:
    """Lake-relative keys of the values objects that still have a version (a delete
    marker alone does not hold values)."""
    cut = len(object_key(prefix, ""))
    return {v.key[cut:] for v in _versions(store, prefix) if not v.is_delete_marker}


def drop(store: S3Store, prefix: str, rels: Collection[str]) -> int:
    """Delete the values objects ``rels``: every version and delete marker of each (in an
    unversioned bucket, the object). Returns how many had something to delete."""
    if not rels:
        return 0
    keys = {object_key(prefix, r) for r in rels}
    found = [v for v in _versions(store, prefix) if v.key in keys]
    if not found:
        return 0
    failed = store.delete_versions((v.key, v.version_id) for v in found)
    if failed:
        raise errors.StoreError(
            f"lake {prefix}: {len(failed)} version(s) of values objects could not be deleted; "
            "the next resume or window run retries"
        )
    return len({v.key for v in found})


def finished(doc: LakeDoc, id_hashes: Iterable[str]) -> set[str]:
    """The values objects of those of the requests ``id_hashes`` that are finished (no part
    pending), unless a pending request shares one."""
    needed = {r.values_object for r in doc.requests if r.pending}
    objs = {
        r.values_object for h in id_hashes if (r := doc.request(h)) is not None and not r.pending
    }
    return objs - needed


def sweep(
    store: S3Store,
    prefix: str,
    read_doc: Callable[[], LakeDoc],
    *,
    older_than: timedelta = UNNAMED_AFTER,
    now: datetime | None = None,
) -> int:
    """Delete every values object no pending request needs: at once when only finished or
    cancelled requests name it, past ``older_than`` when none does. The listing is read
    before the registry (``read_doc()``), so an object listed is named in the registry read
    after it (a call names its object before the PUT). Returns how many were deleted."""
    now = now or datetime.now(UTC)
    cut = len(object_key(prefix, ""))
    listed: dict[str, datetime | None] = {}
    for v in _versions(store, prefix):
        rel = v.key[cut:]
        seen = listed.get(rel)
        if rel not in listed or (v.last_modified and (seen is None or v.last_modified > seen)):
            listed[rel] = v.last_modified
    if not listed:
        return 0
    doc = read_doc()
    named = {r.values_object for r in doc.requests}
    needed = {r.values_object for r in doc.requests if r.pending}
    stale: Sequence[str] = [
        rel
        for rel, at in listed.items()
        if rel not in needed and (rel in named or (at is not None and at < now - older_than))
    ]
    n = drop(store, prefix, stale)
    if n:
        log.info("lake %s: deleted %d values object(s) no pending request needs", prefix, n)
    return n
