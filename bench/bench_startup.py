"""Start-up cost of ``import lethe`` and of ``lethe --version`` / ``--help`` (issue 36).

Each is a fresh interpreter; the CPU is the child's own (user + system, from ``wait4``), the
median of ``LETHE_BENCH_STARTUP_REPEAT`` runs (default 5). Targets: ``import lethe`` <= 0.6 s,
``--version`` and ``--help`` <= 0.3 s of CPU.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from typing import Any

CASES = {
    "import lethe": ([sys.executable, "-c", "import lethe"], 0.6),
    "lethe --version": ([sys.executable, "-m", "lethe.cli", "--version"], 0.3),
    "lethe --help": ([sys.executable, "-m", "lethe.cli", "--help"], 0.3),
}


def _cpu(argv: list[str]) -> float:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def run(repeat: int | None = None) -> dict[str, Any]:
    """Print each case's median CPU next to its target; returns them."""
    n = repeat or int(os.environ.get("LETHE_BENCH_STARTUP_REPEAT", "5"))
    out: dict[str, Any] = {}
    for name, (argv, target) in CASES.items():
        cpu = statistics.median(_cpu(argv) for _ in range(n))
        out[name] = cpu
        mark = "ok" if cpu <= target else "over"
        print(f"{name:<18} {cpu:5.2f} s CPU (median of {n})   target <= {target} s   {mark}")
    return out
