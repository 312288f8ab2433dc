"""``lethe lake create|add|map|tables|subjects|forget|resume|cancel|window|erasures``: the lake
registry, one forget request across every table that maps a subject, and one receipt per
request.

Examples::

    lethe lake create s3://b/_lethe --erasure-window 1d
    lethe lake add s3://b/_lethe s3://b/tables/orders
    lethe lake map s3://b/_lethe customer s3://b/tables/orders customer_id
    lethe lake forget s3://b/_lethe customer 42 --request-id gdpr-42 --mode erase
    lethe lake window s3://b/_lethe --max-bytes 1073741824
    lethe lake cancel s3://b/_lethe --request-id gdpr-42 --reason "ticket 88: wrong subject"
    lethe lake erasures s3://b/_lethe --pending --older-than 25d --json

Erase requests are hidden at once; their splices wait for the end of the lake's erasure
window (``--erasure-window``, one day by default) and ``window`` (scheduled) splices every
file of the requests whose window closed, once for all of them, then archives finished
requests out of ``lake.json``.

Requests are shown by their id hash, values by their count; ``erasures --older-than`` exits
1 when a listed request is not done yet (overdue); ``resume`` exits 1 when a request failed
again and ``window`` when a table failed (each with the reason, on stderr); a value that
fits no mapped column is refused before anything is recorded (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lake loads with the command that needs it
    from lethe.lake.receipt import LakeReceipt

__all__ = ["register"]


def _value(raw: str) -> Any:
    try:
        v = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return v if isinstance(v, str | int | float) and not isinstance(v, bool) else raw


def cmd_lake(a: argparse.Namespace) -> int:
    return int(_ACTIONS[a.action](a))


def _create(a: argparse.Namespace) -> int:
    from lethe.catalog.grace import parse_duration
    from lethe.lake import Lake

    window = parse_duration(a.erasure_window) if a.erasure_window else None
    lake = Lake.create(a.uri, erasure_window=window)
    print(f"created lake {lake.uri} (erasure window {lake.erasure_window})")
    return 0


def _add(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    uri = Lake.open(a.uri).add_table(a.table)
    print(f"added {uri}")
    return 0


def _map(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    earlier = Lake.open(a.uri).map_subject(a.kind, table=a.table, column=a.column)
    print(f"mapped {a.kind} -> {a.table} column {a.column!r}")
    if earlier:
        print(f"note: {earlier} earlier {a.kind} request(s) finished before this mapping")
    return 0


def _tables(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    tables = Lake.open(a.uri).tables()
    for t in tables:
        print(t)
    if not tables:
        print("no tables")
    return 0


def _subjects(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    subjects = Lake.open(a.uri).subjects()
    for s in subjects:
        print(f"{s.kind}: {s.table} {s.column}")
    if not subjects:
        print("no subjects mapped")
    return 0


def _forget(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    lake = Lake.open(a.uri)
    r = lake.forget(
        a.kind,
        [_value(v) for v in a.values],
        request_id=a.request_id,
        mode=a.mode,
        splice=True if a.now else False if a.no_splice else None,
    )
    what = "already committed" if r.duplicate else f"{r.rows_deleted} row(s)"
    print(
        f"request {r.id_hash}: {a.mode} of {r.values} value(s) in {len(r.tables)} table(s), {what}"
    )
    for t in r.tables:
        spliced = f", {t.files_spliced} file(s) spliced" if t.files_spliced else ""
        print(f"  {t.table}: {t.state} v{t.version} {t.rows_deleted} row(s){spliced}")
    return 0


def _resume(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    r = Lake.open(a.uri).resume_requests()
    for why in r.failed:
        print(f"lethe: {why}", file=sys.stderr)
    if r.values_deleted:
        print(f"{r.values_deleted} values object(s) of finished requests deleted")
    if not r.ok:
        print(f"lethe: {len(r.failed)} request(s) did not finish", file=sys.stderr)
        return 1
    print(f"{r.requests} pending request(s) resumed")
    return 0


def _cancel(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    receipt = Lake.open(a.uri).cancel(a.request_id, reason=a.reason)
    print(receipt.describe())
    return 0


def _window(a: argparse.Namespace) -> int:
    from lethe.catalog.grace import parse_duration
    from lethe.lake import Lake

    lake = Lake.open(a.uri)
    run = lake.splice_due(max_bytes=a.max_bytes)
    print(
        f"{run.requests_due} erase request(s) due, {run.requests_waiting} waiting for their "
        f"window: {run.files_spliced} file(s) spliced in {run.commits} commit(s)"
        + ("" if run.complete else " (budget spent: the next run continues)")
    )
    for t in run.tables:
        if t.error is None:
            print(f"  {t.table}: {t.files_spliced} file(s), {t.commits} commit(s)")
    if run.values_deleted:
        print(f"{run.values_deleted} values object(s) of finished requests deleted")
    moved = lake.archive(older_than=parse_duration(a.archive_after))
    if moved:
        print(f"{moved} finished request(s) archived")
    for t in run.failed:
        print(f"lethe: window run failed on {t.table}: {t.error}", file=sys.stderr)
    return 1 if run.failed else 0


def _erasures(a: argparse.Namespace) -> int:
    from lethe.catalog.grace import parse_duration
    from lethe.lake import Lake

    lake = Lake.open(a.uri)
    older = parse_duration(a.older_than) if a.older_than else None
    out: list[LakeReceipt]
    if a.request_id:
        out = [lake.erasure_status(a.request_id)]
        if older is not None:
            out = [r for r in out if r.age_days() * 86400 > older.total_seconds()]
        if a.pending:
            out = [r for r in out if not r.done]
    else:
        out = lake.erasures(pending=a.pending, older_than=older)
    if a.json:
        print(json.dumps([r.model_dump(mode="json") for r in out], indent=2))
    else:
        for r in out:
            print(r.describe())
        if not out:
            print("no matching requests")
    overdue = older is not None and any(not r.done for r in out)
    return 1 if overdue else 0


_ACTIONS = {
    "create": _create,
    "add": _add,
    "map": _map,
    "tables": _tables,
    "subjects": _subjects,
    "forget": _forget,
    "resume": _resume,
    "cancel": _cancel,
    "window": _window,
    "erasures": _erasures,
}


def register(sub: Any) -> None:
    """Add ``lake`` (and its actions) to the ``lethe`` parser."""
    p = sub.add_parser(
        "lake",
        help="a registry of tables: subjects, one forget request across tables, receipts",
        description="A lake registers tables and maps subject kinds (customer, email) to "
        "their columns; one forget request erases a subject from every table that maps it.",
    )
    acts = p.add_subparsers(dest="action", required=True)
    c = acts.add_parser("create", help="create an empty lake registry")
    c.add_argument("uri")
    c.add_argument(
        "--erasure-window", help="erase requests spliced together per window (1d; 0: at once)"
    )
    c = acts.add_parser("add", help="register a table (it must exist)")
    c.add_argument("uri")
    c.add_argument("table")
    c = acts.add_parser("map", help="map a subject kind to a table column (indexes it)")
    c.add_argument("uri")
    c.add_argument("kind")
    c.add_argument("table")
    c.add_argument("column")
    for name, what in (("tables", "list the tables"), ("subjects", "list the mappings")):
        c = acts.add_parser(name, help=what)
        c.add_argument("uri")
    c = acts.add_parser("forget", help="forget subjects in every table that maps the kind")
    c.add_argument("uri")
    c.add_argument("kind")
    c.add_argument("values", nargs="+", help="identifiers (JSON numbers or text)")
    c.add_argument("--request-id", required=True, help="idempotency id (hashed; never printed)")
    c.add_argument("--mode", choices=("erase", "logical"), default="erase")
    c.add_argument(
        "--no-splice", action="store_true", help="erase: leave the splices to the splice queue"
    )
    c.add_argument("--now", action="store_true", help="erase: splice now, not at window end")
    c = acts.add_parser("window", help="splice the requests whose erasure window closed")
    c.add_argument("uri")
    c.add_argument("--max-bytes", type=int, help="bound on bytes re-encoded per table")
    c.add_argument("--archive-after", default="7d", help="archive finished requests this old")
    c = acts.add_parser(
        "resume", help="finish pending requests (after a crash); exit 1 if any fails"
    )
    c.add_argument("uri")
    c = acts.add_parser("cancel", help="cancel a pending request (its receipt says why)")
    c.add_argument("uri")
    c.add_argument("--request-id", required=True, help="the request (hashed; never printed)")
    c.add_argument("--reason", required=True, help="why (kept in the receipt: name no person)")
    c = acts.add_parser("erasures", help="one receipt per request; --older-than exits 1 if overdue")
    c.add_argument("uri")
    c.add_argument("--request-id", help="one request (hashed before use; never printed)")
    c.add_argument("--pending", action="store_true", help="only requests not done yet")
    c.add_argument("--older-than", help="only requests older than this (25d); exit 1 if any")
    c.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_lake)
