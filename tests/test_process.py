"""How Lethe's entry points end their process (lethe.process).

pyarrow's thread pools can abort an interpreter's teardown after all work succeeded (rc -6,
apache/arrow#34314). Lethe's ``__main__``s leave through ``lethe.process.run_main``, which
skips that teardown. The tests prove it deterministically: a child registers an ``atexit``
hook before running an entry point; the hook runs during teardown, so if it printed, teardown
ran (and could have aborted). They also run the real ``lethe`` console script against moto
repeatedly, and check the exit statuses users and job runners rely on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import events
from pychild import run_child

import lethe
from lethe.process import EXIT_BROKEN_PIPE

ROOT = Path(__file__).resolve().parents[1]
LETHE = str(Path(sys.executable).parent / "lethe")
TEARDOWN = "__teardown_ran__"


def _child(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with an atexit hook that reports whether interpreter teardown ran."""
    prelude = f"import atexit, runpy, sys\natexit.register(print, {TEARDOWN!r}, flush=True)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")])}
    return run_child([sys.executable, "-c", prelude + code, *argv], env=env, cwd=ROOT)


@pytest.mark.parametrize(
    "code",
    [
        "sys.argv = ['ingest.py', '--help']; runpy.run_path('spark_jobs/ingest.py', run_name='__main__')",
        "sys.argv = ['compact.py', '--help']; runpy.run_path('spark_jobs/compact.py', run_name='__main__')",
        "sys.argv = ['index.py', '--help']; runpy.run_path('spark_jobs/index.py', run_name='__main__')",
        "sys.argv = ['x', '--help']; runpy.run_module('devtools.local.runtime', run_name='__main__')",
        "sys.argv = ['x', '--help']; runpy.run_module('devtools.demo', run_name='__main__')",
        "sys.argv = ['lethe', '--help']; runpy.run_module('lethe.cli', run_name='__main__')",
        "sys.argv = ['lethe', '--help']; from lethe.cli import console_main; console_main()",
    ],
    ids=[
        "spark-ingest",
        "spark-compact",
        "spark-index",
        "local-runtime",
        "demo",
        "cli-module",
        "cli-script",
    ],
)
def test_entry_points_skip_interpreter_teardown(code: str) -> None:
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
    assert TEARDOWN not in proc.stdout  # teardown (where pyarrow aborts) never ran


def test_the_probe_sees_a_normal_teardown() -> None:
    """The check above can fail: a plain exit does run the hook."""
    proc = _child("print('usage: plain')")
    assert proc.returncode == 0 and TEARDOWN in proc.stdout


@pytest.mark.parametrize(
    ("body", "status", "stderr_has"),
    [
        ("return 0", 0, ""),
        ("return 3", 3, ""),
        ("raise SystemExit(4)", 4, ""),
        ("raise SystemExit('bad option')", 1, "bad option"),
        ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
        ("raise KeyboardInterrupt", 130, ""),
    ],
)
def test_run_main_statuses(body: str, status: int, stderr_has: str) -> None:
    code = (
        "from lethe.process import run_main\n"
        "def main():\n"
        "    print('working', flush=True)\n"
        f"    {body}\n"
        "run_main(main)\n"
    )
    proc = _child(code)
    assert proc.returncode == status, proc.stderr[-2000:]
    assert "working" in proc.stdout and TEARDOWN not in proc.stdout
    assert stderr_has in proc.stderr
    if status == 1 and "boom" in stderr_has:
        assert "Traceback" in proc.stderr  # a real failure still shows where it happened


@pytest.fixture
def cli_table(table_uri: str, tmp_path: Path) -> str:
    t = lethe.Table.create(table_uri, events(0, 1).schema, key="id")
    for i in range(3):
        t.append(events(i * 1000, 1000))
    pq.write_table(events(0, 10), tmp_path / "e.parquet")
    return table_uri


@pytest.mark.slow
def test_cli_scan_exits_zero_every_time(cli_table: str) -> None:
    """The console script, as users run it, after pyarrow's thread pools did real work."""
    for _ in range(12):
        argv = [LETHE, "scan", cli_table, "--where", "customer_id = 7", "--columns", "id"]
        proc = run_child(argv, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "(30 rows" in proc.stdout


def test_cli_closed_pipe_is_quiet(cli_table: str) -> None:
    """``lethe history … | head``: no traceback, the status of a process ended by SIGPIPE."""
    proc = subprocess.Popen(
        [LETHE, "history", cli_table], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_cli_missing_table_says_lethe_create(bucket: str) -> None:
    uri = f"s3://{bucket}/nothing-here"
    proc = run_child([LETHE, "scan", uri], timeout=120)
    assert proc.returncode == 2
    assert f"lethe create {uri}" in proc.stderr and "Table.create" not in proc.stderr
