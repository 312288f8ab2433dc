"""The Iceberg view from a shell: ``lethe iceberg publish s3://b/t``."""

from __future__ import annotations

import argparse
from typing import Any

from lethe.cli.common import add_at_version, add_command

__all__ = ["register"]


def cmd_publish(a: argparse.Namespace) -> int:
    from lethe.iceberg import publish
    from lethe.table import Table

    t = Table.open(a.uri, version=a.version)
    fv = a.format_version or t.manifest.properties.iceberg_format_version
    r = publish(t.catalog, t.manifest, format_version=fv, progress=a.progress)
    if r.new:
        print(
            f"published version {r.version} (Iceberg format {fv}): {len(r.written)} objects "
            f"written, {r.reused} manifests reused ({r.io.describe()})"
        )
    else:
        print(f"version {r.version} was already published")
    print(r.uri)
    return 0


def register(sub: Any) -> None:
    """Add ``lethe iceberg publish`` to the ``lethe`` parser."""
    ice = add_command(sub, "iceberg", "the table's Apache Iceberg view")
    isub = ice.add_subparsers(dest="iceberg_cmd", required=True)
    what = "write Iceberg metadata for the latest (or --version) snapshot; prints its URI"
    c = add_command(isub, "publish", what, "uri", fn=cmd_publish)
    add_at_version(c, "publish this table version (default: the latest)")
    c.add_argument(
        "--format-version",
        type=int,
        choices=(2, 3),
        help="Iceberg format (default: the table's iceberg_format_version, 3 unless set)",
    )
