"""One exit (issue 35, "the shape of the fix"): every way rows or files leave a table passes
one step that takes them out of the index pieces too (:func:`lethe.index.erase.scrub_rows`),
beside the data files, the statistics and summaries (the manifest's segments, rebuilt by the
commit) and the evidence (an erasure's ``superseded`` list).

The ways today, by the change kinds that take rows or files out (``lethe.catalog.changes``):

=====================  ============================  ===========================================
way                    module                        change kind
=====================  ============================  ===========================================
delete, erase          ``lethe/erasure/deletes.py``          ``SetDVs`` (a DV: the splices scrub, 37.3)
purge                  ``lethe/erasure/erase.py``            ``SetDVs`` (a purge record: the splices scrub)
erase / TTL / window   ``lethe/erasure/erase.py``            ``SpliceFiles`` (the splice's values, 37.3)
TTL drop               ``lethe/erasure/retention.py``        ``ExpireRows`` (dropped files scrubbed)
compaction, cluster    ``lethe/maintenance/compaction.py``       ``ReplaceFiles`` (sources scrubbed)
adopt rewrite          ``lethe/adopt/rewrite.py``    ``ReplaceFiles`` (sources scrubbed)
=====================  ============================  ===========================================

A static check finds every construction of those kinds in the library and the Lambda
functions: a new one fails until it is routed through the step and listed here; behavioural
checks run each way on an indexed table and read every index piece the head references."""

from __future__ import annotations

import ast
import io
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from lethe.index.origins import index_path, origin_removed
from lethe.maintenance.compaction import CompactionOptions

ROOT = Path(__file__).resolve().parents[1]
#: the change kinds that take rows (or whole files) out of the live table
ROW_REMOVING = ("SetDVs", "SpliceFiles", "ReplaceFiles", "ExpireRows")
#: the step (lethe.index.erase): index entries of rows leaving the table are removed
STEP = "scrub_rows"
#: (module, kind) -> the way; every construction of a ROW_REMOVING kind is one of these
WAYS: dict[tuple[str, str], str] = {
    ("shared/lethe/erasure/erase.py", "SetDVs"): "purge",
    ("shared/lethe/erasure/erase.py", "SpliceFiles"): "splices of erase, TTL and the lake window",
    ("shared/lethe/erasure/retention.py", "ExpireRows"): "TTL: files dropped whole, rows hidden",
    ("shared/lethe/maintenance/compaction.py", "ReplaceFiles"): "compaction and re-clustering",
    ("shared/lethe/adopt/rewrite.py", "ReplaceFiles"): "adopt --rewrite-unready",
}
#: ways that do not call the step, each with the reason it is right
KNOWN_BYPASS: dict[tuple[str, str], str] = {
    ("shared/lethe/erasure/deletes.py", "SetDVs"): "delete and erase: the DV stage removes no "
    "row physically; the splices' commit scrubs the rows they remove, with the values they "
    "read (issue 37 item 3: each data file read once)",
}


def _constructions() -> set[tuple[str, str]]:
    """(module, kind) for every call of a ROW_REMOVING kind outside lethe/catalog/changes.py."""
    found: set[tuple[str, str]] = set()
    for base in (ROOT / "shared" / "lethe", ROOT / "functions"):
        for p in sorted(base.rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel == "shared/lethe/catalog/changes.py":
                continue
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                    if name in ROW_REMOVING:
                        found.add((rel, name))
    return found


def _calls_step(module: str) -> bool:
    tree = ast.parse((ROOT / module).read_text())
    return any(
        isinstance(n, ast.Call)
        and (getattr(n.func, "id", None) == STEP or getattr(n.func, "attr", None) == STEP)
        for n in ast.walk(tree)
    )


def test_one_exit_every_row_removing_commit_is_a_listed_way_through_the_step() -> None:
    """issue 35 one exit: a module that commits a row-removing change kind is a listed way
    and calls the step; a new way fails here until it does (and is listed)."""
    from lethe.catalog import changes

    kinds = {k.__name__ for k in changes.KINDS}
    assert set(ROW_REMOVING) <= kinds
    found = _constructions()
    unlisted = sorted(found - set(WAYS) - set(KNOWN_BYPASS))
    assert unlisted == [], (
        "a new way rows leave the table: route it through lethe.index.erase.scrub_rows "
        "and list it in WAYS"
    )
    assert sorted(set(WAYS) - found) == [], "a listed way is gone: update WAYS"
    assert sorted(set(KNOWN_BYPASS) - found) == [], "a bypass is gone: remove it"
    bypassing = sorted({m for m, _ in WAYS if not _calls_step(m)})
    assert bypassing == [], f"these ways do not pass the step ({STEP})"


def test_one_exit_the_static_check_sees_a_bypass(tmp_path: Path) -> None:
    """The detector finds a construction of a row-removing kind, and a module without the
    step (so the check above can fail)."""
    src = (
        "from lethe.catalog.changes import ReplaceFiles\n\ndef f():\n    return ReplaceFiles(())\n"
    )
    tree = ast.parse(src)
    names = [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    assert "ReplaceFiles" in names and STEP not in names
    assert _calls_step("shared/lethe/erasure/retention.py") and not _calls_step(
        "shared/lethe/catalog/grace.py"
    )


# --- behaviour --------------------------------------------------------------------------------
T0 = 1_700_000_000
TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def _entries(t: lethe.Table) -> list[tuple[str, Any, str, int]]:
    """(column, value, file, pos) of every entry of the head's indexes."""
    out: list[tuple[str, Any, str, int]] = []
    for ix in t.manifest.indexes:
        for r in ix.runs:
            for p in r.pieces:
                e = pq.read_table(io.BytesIO(t.store.get(t.key_of(p.path)).body))
                for v, f, pos in zip(
                    e["value"].to_pylist(), e["file"].to_pylist(), e["pos"].to_pylist(), strict=True
                ):
                    out.append((ix.column, v, str(f), int(pos)))
    return out


def _stale(t: lethe.Table) -> list[str]:
    """Entries naming a file no longer live or a position a splice removed."""
    live = {index_path(f): origin_removed(f) for f in t.manifest.files}
    bad = []
    for col, _, f, pos in _entries(t):
        if f not in live:
            bad.append(f"{col}: entry of a file no longer live")
        elif pos in live[f]:
            bad.append(f"{col}: entry of a row a splice removed")
    return bad


def _indexed(uri: str, s3: Any, **kw: Any) -> lethe.Table:
    t = lethe.Table.create(
        uri, EVENTS, key="id", s3=s3, retention=("event_time", "1000s"), **TINY, **kw
    )
    for k in range(3):
        t.append(events(k * 200, 200, customers=100_000))  # customer i is row i
    for c in ("customer_id", "payload"):
        t.create_index(c)  # one run over every file
    return t.refresh()


def _bounds(t: lethe.Table) -> list[int]:
    """Customers at a bound of a file's statistics (an erase of them must move the bound)."""
    cs = [f.columns["customer_id"] for f in t.manifest.files]
    return sorted({int(c.min) for c in cs} | {int(c.max) for c in cs})  # type: ignore[arg-type]


def _erase(t: lethe.Table) -> set[int]:
    gone = [*_bounds(t)[:2], 250]
    t.erase([("customer_id", "in", gone)], request_id="one-exit-erase")
    return set(gone)


def _purge(t: lethe.Table) -> set[int]:
    gone = [*_bounds(t)[-2:], 333]
    t.delete([("customer_id", "in", gone)], request_id="one-exit-delete")
    t.refresh().purge(request_id="one-exit-purge")
    return set(gone)


def _ttl(t: lethe.Table) -> set[int]:
    first = t.manifest.files[0]
    n = first.rows + 3  # the first file drops whole, the next is spliced
    t.sweep_retention(now=datetime.fromtimestamp(T0 + 1000 + n, UTC))
    return set(range(n))


def _compact(t: lethe.Table) -> set[int]:
    t.delete([("id", "in", list(range(200, 260)))])
    opts = CompactionOptions(min_deleted_fraction=0.05, small_file_fraction=0.0)
    assert t.refresh().compact(opts).version is not None
    return set()


WAY_RUNS: dict[str, Callable[[lethe.Table], set[int]]] = {
    "erase": _erase,
    "purge": _purge,
    "ttl": _ttl,
    "compact": _compact,
}


@pytest.mark.parametrize("way", sorted(WAY_RUNS))
def test_one_exit_no_index_entry_outlives_its_row(way: str, table_uri: str, s3: Any) -> None:
    """issue 35 one exit (and item 9): after each way, no entry of the head's indexes names
    a file that left the table or a row a splice removed, and an erased customer's id is in
    no entry at all."""
    t = _indexed(table_uri, s3)
    assert _stale(t) == []
    gone = WAY_RUNS[way](t)
    t = lethe.Table.open(table_uri, s3=s3)
    assert _stale(t) == []
    named = {v for c, v, _, _ in _entries(t) if c == "customer_id"}
    assert not (named & gone)
    live = set(t.scan(["customer_id"])["customer_id"].to_pylist())
    assert named == live  # every entry is of a live row, every live row has its entry
    # the statistics and summaries of the head name none of them either
    stats = [f.columns for f in t.manifest.files] + [s.columns for s in t.manifest.segments]
    bounds = {
        b for c in stats if "customer_id" in c for b in (c["customer_id"].min, c["customer_id"].max)
    }
    assert not (bounds & gone), sorted(bounds & gone)


def test_one_exit_reclustering_leaves_no_entry_of_its_sources(table_uri: str, s3: Any) -> None:
    """issue 35 one exit: a late append re-clusters its window; the entries of the files
    that window's compaction replaced leave the run that still covers the other windows."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", s3=s3, cluster_by="customer_id", cluster_window="1h",
        **TINY,
    )  # fmt: skip
    for start in (0, 4_000):
        t.append(events(start, 4_000, customers=50))
    t.refresh().compact()
    t.refresh().create_index("payload")  # one run over the clustered windows
    clustered = {f.path for f in t.refresh().manifest.files}
    t.append(events(8_000, 200, customers=50))  # shares the last window
    r = t.refresh().compact()
    rewritten = {f.path for g in r.plan.groups for f in g.files}
    assert rewritten & clustered and clustered - rewritten  # the run stays partly live
    t = lethe.Table.open(table_uri, s3=s3)
    assert _stale(t) == []
