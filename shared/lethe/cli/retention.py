"""``lethe retention set|show|clear|sweep``: the table's row TTL (:mod:`lethe.erasure.retention`).

``set`` declares it (``--column event_time --keep 400d``), ``clear`` removes it, ``show``
prints it, ``sweep`` erases the expired rows now (the GC workflow does it on its schedule):
whole files dropped by a metadata-only commit, straddling files spliced; ``--dry-run``
tells what it would do and commits nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from lethe import errors
from lethe.cli.common import add_command

__all__ = ["register"]


def cmd_retention(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    if a.action == "set":
        if a.column is None or a.keep is None:
            raise errors.InvalidRequest("retention set needs --column and --keep (e.g. 400d)")
        r = t.set_retention(a.column, a.keep)
        print(
            f"retention set -> version {r.version}: {t.retention.describe() if t.retention else ''}"
        )
    elif a.action == "clear":
        r = t.set_retention(None)
        print(f"retention cleared -> version {r.version}")
    elif a.action == "show":
        keep = t.retention
        print(f"version {t.version}: {keep.describe() if keep else 'no row retention'}")
    else:
        s = t.sweep_retention(dry_run=a.dry_run, progress=a.progress)
        print(s.describe())
    return 0


def register(sub: Any) -> None:
    """Add ``retention`` to the ``lethe`` parser."""
    c = add_command(
        sub,
        "retention",
        "row TTL: set, show, clear, sweep (expired rows are erased, not just hidden)",
        "uri",
        actions=("set", "show", "clear", "sweep"),
        description="Rows whose timestamp or date column is older than the retention are "
        "erased by the GC workflow's sweep (or `lethe retention sweep`).",
        fn=cmd_retention,
    )
    c.add_argument("--column", help="a timestamp or date column (set)")
    c.add_argument("--keep", help="how long rows stay, e.g. 400d, 12h (set)")
    c.add_argument("--dry-run", action="store_true", help="sweep: tell, commit nothing")
