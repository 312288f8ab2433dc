"""Progress of long operations: the library's events (lethe.progress) and how ``lethe`` shows
them (lethe.cli.bars): plain lines on a pipe, bars on a terminal, nothing with ``--quiet``."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import given
from hypothesis import strategies as st
from pychild import explain, ok, output, run_python

import lethe
from lethe.cli import main
from lethe.cli.bars import PlainLines, reporter
from lethe.gc import collect
from lethe.progress import ProgressEvent, track

SMALL = {"row_group_bytes": 4_000, "target_file_bytes": 12_000}  # several groups and files


class Recorder:
    """A progress callback that keeps every event, by task."""

    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def __call__(self, e: ProgressEvent) -> None:
        self.events.append(e)

    def of(self, task: str) -> list[ProgressEvent]:
        return [e for e in self.events if e.task == task]


def assert_well_formed(evs: list[ProgressEvent], *, total: int | None = None) -> None:
    """Starts at 0, counts never decrease, one finishing event last, ending at the total."""
    assert evs, "no events"
    assert evs[0].completed == 0 and not evs[0].finished
    counts = [e.completed for e in evs]
    assert counts == sorted(counts)
    assert [e.finished for e in evs] == [False] * (len(evs) - 1) + [True]
    last = evs[-1]
    assert last.completed == last.total
    if total is not None:
        assert last.total == total


# --- the library's events --------------------------------------------------------------------
@given(st.lists(st.integers(min_value=-2, max_value=50), max_size=40), st.booleans())
def test_a_tracker_counts_up_to_its_total(steps: list[int], known: bool) -> None:
    rec = Recorder()
    done = sum(n for n in steps if n > 0)
    with track(rec, "t", total=done if known else None, unit="u") as t:
        for n in steps:
            t.advance(n)
    assert_well_formed(rec.events, total=done)
    assert all(e.total == (done if known else None) for e in rec.events[:-1])


def test_a_tracker_is_thread_safe_and_grows_a_short_total() -> None:
    rec = Recorder()
    t = track(rec, "t", total=10, unit="u")  # too small: 4 threads x 100
    threads = [threading.Thread(target=lambda: [t.advance() for _ in range(100)]) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t.finish()
    t.finish()  # idempotent
    t.advance()  # ignored after the end
    assert_well_formed(rec.events, total=400)
    assert all(e.completed <= (e.total or 0) for e in rec.events)


def test_a_task_left_by_an_error_does_not_finish() -> None:
    rec = Recorder()
    with pytest.raises(ValueError), track(rec, "t", total=3, unit="u") as t:
        t.advance()
        raise ValueError("boom")
    assert [e.finished for e in rec.events] == [False, False]


def test_append_reports_rows_by_row_group(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    rec = Recorder()
    t.append(events(0, 3_000), progress=rec)
    evs = rec.of("append")
    assert_well_formed(evs, total=3_000)
    assert len(evs) > 3  # one per row group: several
    reader = pa.RecordBatchReader.from_batches(EVENTS, events(3_000, 500).to_batches())
    rec = Recorder()
    t.append(reader, progress=rec)  # a stream: no total until the end
    assert all(e.total is None for e in rec.events[:-1])
    assert_well_formed(rec.of("append"), total=500)
    assert t.scan().num_rows == 3_500


def test_erase_purge_publish_backfill_and_gc_report(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    t.append(events(0, 1_000))
    t.append(events(1_000, 1_000))
    files = len(t.manifest.files)
    rec = Recorder()
    r = t.erase([("customer_id", "=", 7)], progress=rec)
    assert_well_formed(rec.of("erase"), total=r.files_spliced + r.files_removed)
    assert r.files_spliced >= 2  # customer 7 is in every file of both appends
    t.delete([("customer_id", "=", 8)])
    rec = Recorder()
    p = t.purge(progress=rec)
    assert_well_formed(rec.of("purge"), total=p.files_spliced + p.files_removed)
    rec = Recorder()
    t.publish_iceberg(progress=rec)
    assert_well_formed(rec.of("publish"))
    assert rec.of("publish")[-1].total >= 1
    rec = Recorder()
    t.create_index("customer_id", progress=rec)
    assert_well_formed(rec.of("index backfill"), total=len(t.manifest.files))
    assert len(t.manifest.files) == files
    rec = Recorder()  # issue 36: compaction too shows its progress, one event per group
    from lethe.maintenance.compaction import CompactionOptions

    t.delete([("customer_id", "in", [1, 2, 3])])  # every file holds deleted rows
    c = t.compact(CompactionOptions(min_deleted_fraction=0.001), progress=rec)
    assert c.version is not None
    assert_well_formed(rec.of("compact"), total=len(c.plan.groups))
    rec = Recorder()
    rep = collect(t, retention="1v", erasure_grace="0s", progress=rec)  # README "Progress"
    assert_well_formed(rec.of("gc plan"))
    assert_well_formed(rec.of("gc sweep"))
    swept = sum(s.objects for c, s in rep.deleted.items() if c not in NOT_SWEPT)
    assert rec.of("gc sweep")[-1].total == swept >= r.files_spliced  # the superseded files


NOT_SWEPT = ("manifest", "upload", "version")  # GC's expire, abort and purge steps


def test_adopt_forget_and_retention_sweep_report(
    table_uri: str, s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (habits): ``adopt`` (footers read, files committed), ``lake forget`` (tables
    committed and spliced) and the retention sweep (files spliced) report their progress."""
    from datetime import UTC, datetime, timedelta

    from lethe.lake.core import Lake

    for i in range(3):
        buf = io.BytesIO()
        pq.write_table(events(i * 100, 100), buf)
        for src in ("ev", "cli"):
            s3.put_object(Bucket=bucket, Key=f"raw/{src}/dt={i}/a.parquet", Body=buf.getvalue())
    rec = Recorder()
    adopted = f"s3://{bucket}/tables/adopted"
    t = lethe.Table.adopt(adopted, f"s3://{bucket}/raw/ev/", key="id", batch_files=2,
                          progress=rec)  # fmt: skip
    assert isinstance(t, lethe.Table)
    assert_well_formed(rec.of("adopt footers"), total=3)
    assert_well_formed(rec.of("adopt"), total=3)
    assert [e.completed for e in rec.of("adopt")] == [0, 2, 3, 3]  # one event per commit
    capsys.readouterr()
    cli = f"s3://{bucket}/tables/cli"
    assert main(["adopt", cli, f"s3://{bucket}/raw/cli/", "--key", "id"]) == 0
    err = capsys.readouterr().err
    assert _last(err, "adopt footers").startswith("adopt footers: 3/3 files (100%)")
    assert _last(err, "adopt").startswith("adopt: 3/3 files (100%)")

    lake = Lake.create(f"s3://{bucket}/_lethe", erasure_window=timedelta(0))
    other = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    other.append(events(0, 1_000))
    for uri in (adopted, table_uri):
        lake.map_subject("customer", table=uri, column="customer_id")
    rec = Recorder()
    lake.forget("customer", [7], request_id="f-7", progress=rec)
    assert_well_formed(rec.of("forget"), total=2)
    assert_well_formed(rec.of("forget splices"), total=2)
    capsys.readouterr()
    assert main(["lake", "forget", lake.uri, "customer", "8", "--request-id", "f-8"]) == 0
    assert _last(capsys.readouterr().err, "forget").startswith("forget: 2/2 tables (100%)")

    keep = lethe.Table.open(table_uri)
    keep.set_retention("event_time", "1d")
    rec = Recorder()
    halfway = datetime.fromtimestamp(1_700_000_000 + 86_400 + 555, UTC)  # ids < 555 expire
    r = keep.sweep_retention(now=halfway, progress=rec)
    assert r.files_spliced >= 1 and r.rows_expired > 500  # less the rows forgotten above
    assert_well_formed(rec.of("retention"), total=r.files_spliced)


# --- plain lines -----------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=997))
def test_plain_lines_stay_few_and_end_at_the_total(total: int, step: int) -> None:
    out, clock = io.StringIO(), Clock()
    with track(PlainLines(out, clock=clock), "erase", total=total, unit="files") as t:
        left = total
        while left:
            t.advance(min(step, left))
            left -= min(step, left)
    lines = out.getvalue().splitlines()
    assert len(lines) <= 11  # the start, at most one per tenth, the end
    if total:
        assert lines[0] == f"erase: 0/{total} files (0%)"
    assert lines[-1] == f"erase: {total}/{total} files (100%) in 0.0s"


def test_plain_lines_without_a_total_print_by_time() -> None:
    out, clock = io.StringIO(), Clock()
    with track(PlainLines(out, clock=clock), "append", total=None, unit="rows") as t:
        for _ in range(5):
            t.advance(100)  # no time passed: silent
        clock.now = PlainLines.interval
        t.advance(100)
        clock.now += 1
    assert out.getvalue().splitlines() == [
        "append: started",
        "append: 600 rows",
        f"append: 600/600 rows (100%) in {PlainLines.interval + 1:.1f}s",
    ]


def test_reporter_chooses_by_terminal_and_quiet() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    with reporter(stream=io.StringIO()) as p:
        assert isinstance(p, PlainLines)
    with reporter(quiet=True, stream=Tty()) as p:
        assert not isinstance(p, PlainLines)
        p(ProgressEvent("x", 0, 1, "u"))  # accepted, shown nowhere
    tty = Tty()
    with reporter(stream=tty) as p, track(p, "gc sweep", total=4, unit="objects") as t:
        t.advance(4)
    assert "gc sweep" in tty.getvalue() and "4/4" in tty.getvalue()


# --- the command line ------------------------------------------------------------------------
@pytest.fixture
def files(table_uri: str, tmp_path: Path) -> tuple[str, str]:
    """Two Parquet files of events (2,000 and 1,000 rows); the table created (by the CLI) from
    the first one's schema."""
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(events(0, 2_000), a)
    pq.write_table(events(2_000, 1_000), b)
    args = ["create", table_uri, "--schema", str(a), "--key", "id"]
    assert main([*args, "--row-group-bytes", "4000", "--target-file-bytes", "12000"]) == 0
    return str(a), str(b)


def _last(err: str, task: str) -> str:
    """The finishing line of ``task`` (``task: done/total unit (100%) in Ns``)."""
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{task}: ") and " in " in ln]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_prints_plain_progress_lines_on_a_pipe(
    table_uri: str, files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = files
    capsys.readouterr()
    assert main(["append", table_uri, a]) == 0
    out, err = capsys.readouterr()
    assert "appended 2000 rows" in out and "append:" not in out
    assert err.splitlines()[0] == "append: 0/2000 rows (0%)"
    assert re.fullmatch(r"append: 2000/2000 rows \(100%\) in \d+\.\ds", _last(err, "append"))
    assert len(err.splitlines()) <= 11
    assert main(["append", table_uri, b]) == 0
    capsys.readouterr()

    assert main(["erase", table_uri, "--where", "customer_id = 7", "--request-id", "e1"]) == 0
    out, err = capsys.readouterr()
    spliced = int(re.search(r"in (\d+) spliced and (\d+) removed", out).group(1))  # type: ignore[union-attr]
    assert spliced >= 2
    assert _last(err, "erase").startswith(f"erase: {spliced}/{spliced} files (100%)")

    assert main(["gc", table_uri, "--retention", "1v", "--erasure-grace", "0s", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # stdout is the JSON alone
    assert report["kind"] == "lethe.gc.report"
    sweep = re.fullmatch(r"gc sweep: (\d+)/(\d+) objects \(100%\) in .*", _last(err, "gc sweep"))
    assert sweep is not None and sweep.group(1) == sweep.group(2)
    assert int(sweep.group(2)) >= spliced  # every superseded file was a candidate
    assert _last(err, "gc plan").startswith("gc plan: ")

    assert main(["iceberg", "publish", table_uri]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith(".metadata.json")
    written = re.fullmatch(r"publish: (\d+)/(\d+) manifests \(100%\) in .*", _last(err, "publish"))
    assert written is not None and written.group(1) == written.group(2) != "0"


def test_cli_quiet_prints_nothing_on_stderr(
    table_uri: str, files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = files
    capsys.readouterr()
    assert main(["-q", "append", table_uri, a]) == 0
    assert main(["append", table_uri, b, "--quiet"]) == 0  # after the command's name too
    assert main(["erase", table_uri, "--where", "customer_id = 7", "-q"]) == 0
    assert main(["iceberg", "publish", table_uri, "-q"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "appended 2000 rows" in out and "appended 1000 rows" in out and "erased" in out
    assert main(["--quiet", "gc", table_uri, "--dry-run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["dry_run"] is True


def _run_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """``python -m lethe.cli ARGS`` with stderr on a pseudo-terminal, stdout on a pipe:
    (status, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    for k in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CI"):
        env.pop(k, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lethe.cli", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    screen = bytearray()
    while True:  # drain the terminal while the child runs (it would block on a full one)
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            screen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    out, _ = proc.communicate()  # small: the command's one-line result
    return proc.returncode, out.decode(), screen.decode(errors="replace")


def test_cli_draws_a_bar_on_a_terminal(table_uri: str, files: tuple[str, str]) -> None:
    a, _ = files
    rc, out, screen = _run_on_a_terminal(["append", table_uri, a])
    assert rc == 0, screen
    assert "appended 2000 rows" in out and "\x1b" not in out  # stdout: the result, plain
    assert "append" in screen and "2000/2000" in screen
    assert "━" in screen  # rich's bar
    assert "\x1b[" in screen  # drawn with terminal control sequences
    assert "append: 0/2000" not in screen  # not the plain lines
    rc, _, screen = _run_on_a_terminal(["-q", "append", table_uri, a])
    assert rc == 0 and screen == ""


def test_rich_is_imported_only_to_draw() -> None:
    """``import lethe`` and the ``lethe`` parser do not load rich (a quick ``lethe scan``)."""
    code = (
        "import sys, lethe, lethe.cli, lethe.gc, lethe.iceberg\n"
        "lethe.cli.build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'tqdm')))"
    )
    proc = run_python(code)
    assert ok(proc), explain(proc)
    assert output(proc).strip() == "[]"


def test_scan_output_stays_clean(
    table_uri: str, files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = files
    assert main(["append", table_uri, a]) == 0
    capsys.readouterr()
    assert main(["scan", table_uri, "--where", "id = 5", "--columns", "id"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "(1 rows)" in out
