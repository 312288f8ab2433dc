"""``lethe lake create|add|map|tables|subjects|forget|resume|cancel|window|window-set|erasures``:
the lake registry, one forget request across every table that maps a subject, and one receipt
per request.

Examples::

    lethe lake create s3://b/_lethe --erasure-window 1d
    lethe lake window-set s3://b/_lethe 6h
    lethe lake add s3://b/_lethe s3://b/tables/orders
    lethe lake map s3://b/_lethe customer s3://b/tables/orders customer_id
    lethe lake forget s3://b/_lethe customer 42 --request-id gdpr-42 --mode erase
    lethe lake window s3://b/_lethe --max-bytes 1073741824
    lethe lake cancel s3://b/_lethe --request-id gdpr-42 --reason "ticket 88: wrong subject"
    lethe lake erasures s3://b/_lethe --pending --older-than 25d --json

Erase requests are hidden at once; their splices wait for the end of the lake's erasure
window (``--erasure-window``, one day by default) and ``window`` (scheduled) splices every
file of the requests whose window closed, once for all of them, then archives finished
requests out of ``lake.json`` and says when each window still open closes; ``window-set``
changes the window (``0``: spliced at once). Durations print as they are written (``1d``).

Requests are shown by their id hash, values by their count; ``erasures --older-than`` exits
1 when a listed request is not done yet (overdue); ``resume`` exits 1 when a request failed
again and ``window`` when a table failed (each with the reason, on stderr); a value that
fits no mapped column is refused before anything is recorded (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lethe.catalog.grace import DEFAULT_ERASURE_GRACE, DEFAULT_RETENTION
from lethe.cli.common import add_command, print_receipts

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
    from lethe import errors

    try:
        return int(_ACTIONS[a.action](a))
    except errors.LakeNotFound as e:
        raise errors.LakeNotFound(_no_lake(a.uri), uri=a.uri) from e


def _no_lake(uri: str) -> str:
    """What to do about a lake URI without a lake (a table's URI given first, perhaps)."""
    from lethe.storage.layout import HEAD_KEY
    from lethe.storage.store import S3Store, parse_s3_uri

    bucket, prefix = parse_s3_uri(uri)
    try:
        table = S3Store(bucket).exists(f"{prefix}/{HEAD_KEY}" if prefix else HEAD_KEY)
    except Exception:  # the hint is best effort: the bucket may not exist at all
        table = False
    return f"no lake at {uri} (no lake.json there): create one with `lethe lake create {uri}`" + (
        f"; {uri} is a Lethe table: the lake's URI comes first (`lethe lake add LAKE TABLE`)"
        if table
        else ""
    )


def _create(a: argparse.Namespace) -> int:
    from lethe.catalog.grace import format_duration, parse_duration
    from lethe.lake import Lake

    window = parse_duration(a.erasure_window) if a.erasure_window else None
    lake = Lake.create(a.uri, erasure_window=window)
    print(f"created lake {lake.uri} (erasure window {format_duration(lake.erasure_window)})")
    return 0


def _window_set(a: argparse.Namespace) -> int:
    from lethe.catalog.grace import format_duration, parse_duration
    from lethe.lake import Lake

    window = parse_duration(a.window)
    lake = Lake.open(a.uri)
    was = lake.erasure_window
    lake.set_erasure_window(window)
    now = format_duration(lake.erasure_window)
    print(
        f"erasure window of {lake.uri}: {now} (was {format_duration(was)}); "
        + (
            "erase requests are spliced at once"
            if not window
            else f"erase requests wait up to {now} to be spliced together"
        )
        + " (requests not spliced yet included)"
    )
    return 0


def _gc(a: argparse.Namespace) -> int:
    """GC over every table of the lake (:func:`lethe.gc.collect` on each), then the lake's own
    leftovers: values objects no request names any more, finished requests archived."""
    from lethe.cli.gc import collect_with
    from lethe.lake import Lake

    lake = Lake.open(a.uri)
    failed = 0
    reports = {}
    for uri in lake.tables():
        r = collect_with(uri, a)
        failed += bool(r.failed)
        reports[uri] = r
        if not a.json:
            print(f"{uri}: {r.describe()}")
    swept = archived = 0
    if not a.dry_run:
        swept = lake.sweep_values()
        archived = lake.archive()
    if a.json:
        doc = {u: r.model_dump(mode="json") for u, r in reports.items()}
        print(json.dumps({"tables": doc, "values_swept": swept, "archived": archived}, indent=2))
    else:
        print(
            f"lake {lake.uri}: {len(reports)} table(s) collected"
            + (" (dry run: nothing deleted)" if a.dry_run else "")
            + f"; {swept} values object(s) swept, {archived} finished request(s) archived"
            + (f"; {failed} table(s) with failed deletions (exit 1)" if failed else "")
        )
    return 1 if failed else 0


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

    return _lines(Lake.open(a.uri).tables(), "no tables")


def _subjects(a: argparse.Namespace) -> int:
    from lethe.lake import Lake

    subjects = Lake.open(a.uri).subjects()
    return _lines([f"{s.kind}: {s.table} {s.column}" for s in subjects], "no subjects mapped")


def _lines(lines: Sequence[str], empty: str) -> int:
    """Print ``lines``, or ``empty`` when there are none."""
    print("\n".join(lines) if lines else empty)
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
        progress=a.progress,
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
    for closes, n in run.closes:
        print(f"  {n} request(s) wait for the window that closes at {_when(closes)}")
    moved = lake.archive(older_than=parse_duration(a.archive_after))
    if moved:
        print(f"{moved} finished request(s) archived")
    for t in run.failed:
        print(f"lethe: window run failed on {t.table}: {t.error}", file=sys.stderr)
    return 1 if run.failed else 0


def _when(at: datetime) -> str:
    """``2026-11-29T00:00:00+00:00 (in 13h)``."""
    from lethe.catalog.grace import format_duration

    left = max(0, int((at - datetime.now(UTC)).total_seconds()))
    unit = 3600 if left >= 3600 else 60 if left >= 60 else 1
    return f"{at.isoformat(timespec='seconds')} (in {format_duration(left - left % unit)})"


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
    print_receipts(out, a.json)
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
    "window-set": _window_set,
    "gc": _gc,
    "erasures": _erasures,
}


def register(sub: Any) -> None:
    """Add ``lake`` (and its actions) to the ``lethe`` parser."""
    p = add_command(
        sub,
        "lake",
        "a registry of tables: subjects, one forget request across tables, receipts",
        description="A lake registers tables and maps subject kinds (customer, email) to "
        "their columns; one forget request erases a subject from every table that maps it.",
        fn=cmd_lake,
    )
    acts = p.add_subparsers(dest="action", required=True)
    add_command(acts, "create", "create an empty lake registry", "uri").add_argument(
        "--erasure-window", help="erase requests spliced together per window (1d; 0: at once)"
    )
    add_command(acts, "add", "register a table (it must exist)", "uri", "table")
    what = "map a subject kind to a table column (indexes it)"
    add_command(acts, "map", what, "uri", "kind", "table", "column")
    for name, what in (("tables", "list the tables"), ("subjects", "list the mappings")):
        add_command(acts, name, what, "uri")
    _register_forget(acts)
    _register_window(acts)
    _register_gc(acts)
    add_command(
        acts, "resume", "finish pending requests (after a crash); exit 1 if any fails", "uri"
    )
    c = add_command(acts, "cancel", "cancel a pending request (its receipt says why)", "uri")
    c.add_argument("--request-id", required=True, help="the request (hashed; never printed)")
    c.add_argument("--reason", required=True, help="why (kept in the receipt: name no person)")
    c = add_command(
        acts, "erasures", "one receipt per request; --older-than exits 1 if overdue", "uri"
    )
    c.add_argument("--request-id", help="one request (hashed before use; never printed)")
    c.add_argument("--pending", action="store_true", help="only requests not done yet")
    c.add_argument("--older-than", help="only requests older than this (25d); exit 1 if any")
    c.add_argument("--json", action="store_true")


def _register_forget(acts: Any) -> None:
    what = "forget subjects in every table that maps the kind"
    c = add_command(acts, "forget", what, "uri", "kind")
    c.add_argument("values", nargs="+", help="identifiers (JSON numbers or text)")
    c.add_argument("--request-id", required=True, help="idempotency id (hashed; never printed)")
    c.add_argument("--mode", choices=("erase", "logical"), default="erase")
    c.add_argument(
        "--no-splice", action="store_true", help="erase: leave the splices to the splice queue"
    )
    c.add_argument("--now", action="store_true", help="erase: splice now, not at window end")


def _register_window(acts: Any) -> None:
    what = "splice the requests whose erasure window closed; say when the open ones close"
    c = add_command(acts, "window", what, "uri")
    c.add_argument("--max-bytes", type=int, help="bound on bytes re-encoded per table")
    c.add_argument("--archive-after", default="7d", help="archive finished requests this old")
    add_command(acts, "window-set", "change the lake's erasure window", "uri").add_argument(
        "window",
        help="how long erase requests wait to be spliced together: 1d, 6h, 30m; 0: at once",
    )


def _register_gc(acts: Any) -> None:
    what = "garbage-collect every table of the lake (as `lethe gc`), then the lake's leftovers"
    c = add_command(acts, "gc", what, "uri")
    c.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    c.add_argument("--retention", default=DEFAULT_RETENTION, help="as `lethe gc --retention`")
    c.add_argument("--grace", default=None, help="as `lethe gc --grace` (the table's by default)")
    c.add_argument(
        "--erasure-grace", default=DEFAULT_ERASURE_GRACE, help="as `lethe gc --erasure-grace`"
    )
    c.add_argument("--json", action="store_true", help="print every table's report as JSON")
