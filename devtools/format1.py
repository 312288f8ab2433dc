"""Tables as a format-1 Lethe wrote them (one inline manifest, no segments), for the tests and
benches of the upgrade path. Lethe itself writes only format 2; it still reads format 1 and
upgrades it on the next commit or with ``lethe upgrade`` (docs/format.md).

:func:`rewrite_as_format1` replaces manifests of a table in place by the manifest a format-1
writer would have committed for the same snapshot: the same files, DVs, requests and
erasures, listed inline. It overwrites immutable objects, which only a tool that plays an old
writer may do; the segments it leaves unreferenced are garbage for GC.
"""

from __future__ import annotations

from collections.abc import Iterable

from lethe.catalog.manifest import Manifest, encode_manifest, manifest_key
from lethe.catalog.snapshot import Snapshot
from lethe.table import Table

__all__ = ["as_format1", "rewrite_as_format1"]


def as_format1(m: Snapshot) -> Manifest:
    """``m`` as format 1: every live file inline (its DV overlay applied), no segments."""
    return Manifest.model_validate(
        {
            **m.manifest.model_dump(
                by_alias=True, exclude={"segments", "dv_overlay", "inline_files"}
            ),
            "format_version": 1,
            "layout": "inline",
            "inline_files": [f.model_dump(by_alias=True) for f in m.files],
        }
    )


def rewrite_as_format1(table: Table, versions: Iterable[int] | None = None) -> Table:
    """Rewrite ``versions`` of ``table`` (default: every version up to the handle's) as a
    format-1 writer committed them; returns a new handle on the latest version (``table``'s
    own handle keeps the manifests it had read)."""
    cat = table.catalog
    for v in range(table.version + 1) if versions is None else versions:
        m = cat.read_manifest(v)
        cat.store.put(cat.key(manifest_key(v)), encode_manifest(as_format1(m)))
    return Table.open(table.uri, s3=table.store.client)
