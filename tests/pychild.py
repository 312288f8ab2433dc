"""Run Python code in a child interpreter, robust to pyarrow's abort at interpreter exit.

pyarrow's thread pools can abort a finished interpreter during teardown (``terminate called
without an active exception``, rc -6; apache/arrow#34314), 5-40% of runs on a loaded machine.
A child that did all its work must not fail a test for that, and a child that failed must
still fail it. So the child's code runs with a sentinel appended: after the code finished, it
prints :data:`DONE` on stdout, flushes, and leaves with ``os._exit(0)`` (no teardown). A test
asserts :func:`ok`: the sentinel was printed and the status is 0. An exception in the code
never reaches the sentinel (status 1 with its traceback, or -6 if teardown aborts too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

__all__ = ["DONE", "explain", "ok", "run_child", "run_python"]

DONE = "__lethe_child_done__"

_EPILOGUE = f"""
import os as _os, sys as _sys
_sys.stdout.write("\\n{DONE}\\n")
_sys.stdout.flush()
_sys.stderr.flush()
_os._exit(0)
"""


def run_python(
    code: str,
    *,
    args: Sequence[str] = (),
    flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python [flags] -c code args...`` with the sentinel epilogue (see module doc)."""
    argv = [sys.executable, *flags, "-c", code + "\n" + _EPILOGUE, *args]
    return run_child(argv, env=env, cwd=cwd, timeout=timeout)


def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``argv`` as a child process, its output captured as text, its status not checked
    (no sentinel: for tests of how a child exits)."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> bool:
    """The child ran its code to the end: status 0 and the sentinel on stdout."""
    return proc.returncode == 0 and DONE in proc.stdout.splitlines()


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    """A short reason for an assertion message: status, and the end of stderr."""
    return f"rc={proc.returncode} sentinel={DONE in proc.stdout}: {proc.stderr[-2000:]}"


def output(proc: subprocess.CompletedProcess[str]) -> str:
    """What the code printed, without the sentinel line."""
    return "\n".join(line for line in proc.stdout.splitlines() if line != DONE)
