"""``lethe erasures`` (receipts of delete and erase requests) and ``lethe report`` (the
table report, as JSON or one self-contained HTML page)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lethe.cli.common import add_command, print_receipts

if TYPE_CHECKING:  # the heavy modules load with the command that needs them
    from lethe.audit.receipts import ErasureReceipt
    from lethe.table import Table

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``erasures`` and ``report`` to the ``lethe`` parser."""
    from lethe.catalog.grace import DEFAULT_DEADLINE_DAYS

    c = add_command(
        sub,
        "erasures",
        "receipts of delete/erase requests: received, hidden, removed, complete",
        "uri",
        description="Reconstruct what became of delete and erase requests from the table's "
        "manifests and GC documents. Requests are shown by their id hash only. With "
        "--older-than, the exit status is 1 when some listed request is that old.",
        fn=cmd_erasures,
    )
    c.add_argument("--request-id", help="one request (hashed before use; never printed)")
    c.add_argument("--json", action="store_true")
    c.add_argument("--pending", action="store_true", help="only erasures GC has not completed")
    c.add_argument("--older-than", help="only requests received longer ago than this (25d)")
    c.add_argument(
        "--audit",
        action="append",
        help="a key value to look for in the table's current objects (repeat; JSON or text)",
    )
    what = "the table report: files, versions, erasures, GC runs"
    c = add_command(sub, "report", what, "uri", fn=cmd_report)
    c.add_argument("--html", help="write a self-contained HTML page (charts) to this file")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument("--deadline", default=f"{DEFAULT_DEADLINE_DAYS:g}d", help="erasure deadline")


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _receipts(args: argparse.Namespace, t: Table) -> list[ErasureReceipt]:
    from lethe.audit.evidence import gather
    from lethe.audit.receipts import audit, known_requests, receipt
    from lethe.catalog.manifest import request_hash

    ev = gather(t.catalog)
    found = None
    if args.audit:
        found = audit(t.catalog, ev, t.key, [_value(v) for v in args.audit])
    hashes = [request_hash(args.request_id)] if args.request_id else known_requests(ev)
    out = [receipt(ev, h, audit_result=found) for h in hashes]
    if args.pending:
        out = [r for r in out if r.erasure and not r.complete]
    return out


def cmd_erasures(args: argparse.Namespace) -> int:
    from lethe.catalog.grace import parse_duration
    from lethe.table import Table

    t = Table.open(args.uri)
    out = _receipts(args, t)
    overdue = False
    if args.older_than:
        now = datetime.now(UTC)
        limit = parse_duration(args.older_than).total_seconds() / 86400
        out = [r for r in out if (r.age_days(now) or 0.0) > limit]
        overdue = bool(out)
    print_receipts(out, args.json)
    return 1 if overdue else 0


def cmd_report(args: argparse.Namespace) -> int:
    from lethe.audit.report import table_report
    from lethe.catalog.grace import parse_duration
    from lethe.table import Table

    t = Table.open(args.uri)
    days = parse_duration(args.deadline).total_seconds() / 86400
    rep = table_report(t.catalog, deadline_days=days)
    if args.html:
        from lethe.audit.html import render

        path = Path(args.html)
        path.write_text(render(rep), encoding="utf-8")
        print(f"report written to {path.resolve()}")
    if args.json or not args.html:
        print(json.dumps(rep.model_dump(mode="json"), indent=2))
    return 0
