"""The Iceberg view at scale (issue 15): a 10k-file table (synthetic entries committed
through ``Table.commit_files``, as in bench_scale), published once in full, then again after
a 1-key delete (only the touched segment's delete manifest, the manifest list and the
metadata file are new).

Targets (moto): a full first publish of 10k files <= 30 s; after a 1-key delete, the publish
uploads <= 1 MiB and takes <= 1 s. Numbers are printed next to the targets, never asserted.

``python -m bench bench_iceberg`` (``LETHE_BENCH_ICEBERG_FILES=10000`` to change the size).
"""

from __future__ import annotations

import os

from bench.bench_scale import build, size
from bench.common import measure, moto_process, new_bucket
from lethe.iceberg import publish
from lethe.table import Table


def run() -> dict[str, object]:
    files = int(os.environ.get("LETHE_BENCH_ICEBERG_FILES", "10000"))
    with moto_process() as aws:
        bucket = new_bucket(aws)
        uri = f"s3://{bucket}/iceberg-{files}"
        start = build(uri, files)
        t = Table.open(uri)
        full = measure(lambda: publish(t.catalog, t.manifest))
        again = measure(lambda: publish(t.catalog, t.manifest))
        t.delete([("id", "=", start + 1)])
        after = measure(lambda: publish(t.catalog, t.manifest))
        out = {
            "files": files,
            "full_s": full.wall,
            "full_up": full.result.io.bytes_uploaded,
            "full_puts": full.result.io.puts,
            "again_puts": again.result.io.puts,
            "delete_s": after.wall,
            "delete_up": after.result.io.bytes_uploaded,
            "delete_puts": after.result.io.puts,
        }
        print(
            f"{files:,} files: first publish {full.wall:.2f}s (target <= 30 s), "
            f"up {size(full.result.io.bytes_uploaded)} in {full.result.io.puts} PUTs; "
            f"same version again: {again.result.io.puts} PUTs (target 0)",
            flush=True,
        )
        print(
            f"after a 1-key delete: publish {after.wall:.3f}s (target <= 1 s), "
            f"up {size(after.result.io.bytes_uploaded)} (target <= 1 MiB) in "
            f"{after.result.io.puts} PUTs, {after.result.reused} manifests reused",
            flush=True,
        )
        return out
