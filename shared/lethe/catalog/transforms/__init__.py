"""Every manifest transform: snapshot N+1 from snapshot N plus one change (pure).

* :mod:`lethe.catalog.transforms.files`: files appended, replaced, their DVs set; the format-1
  upgrade (how a commit writes O(change) segments);
* :mod:`lethe.catalog.transforms.indexes`: index runs added, merged and scrubbed, indexes declared
  and dropped;
* :mod:`lethe.catalog.transforms.erasures`: erasure records after a splice or a compaction.

The commit kinds that use them are :mod:`lethe.catalog.changes`; the loop that calls them again on a
newer base is :meth:`lethe.catalog.commit.Catalog.commit_change`.
"""

from lethe.catalog.transforms.erasures import (
    archive_erasures,
    externalize_superseded,
    spliced_erasures,
    superseding,
    update_erasures,
    with_erasures,
)
from lethe.catalog.transforms.files import (
    apply_append,
    apply_dv_updates,
    apply_properties,
    apply_replace,
    summarize,
    upgrade,
)
from lethe.catalog.transforms.indexes import (
    Merge,
    check_indexable,
    dead_run_pieces,
    declare,
    piece_paths,
    replace_pieces,
    undeclare,
    with_merges,
    with_new_runs,
    with_runs,
    without_dead_runs,
)

__all__ = [
    "Merge",
    "apply_append",
    "apply_dv_updates",
    "apply_properties",
    "apply_replace",
    "archive_erasures",
    "check_indexable",
    "dead_run_pieces",
    "declare",
    "externalize_superseded",
    "piece_paths",
    "replace_pieces",
    "spliced_erasures",
    "summarize",
    "superseding",
    "undeclare",
    "update_erasures",
    "upgrade",
    "with_erasures",
    "with_merges",
    "with_new_runs",
    "with_runs",
    "without_dead_runs",
]
