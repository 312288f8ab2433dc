"""Run every benchmark: ``python -m bench [name ...]``."""

from __future__ import annotations

import importlib
import sys

from lethe.process import run_main

BENCHES = [
    "bench_deletes",
    "bench_splice",
    "bench_lookup",
    "bench_scale",
    "bench_iceberg",
    "bench_index",
    "bench_spark",
    "bench_readwrite",
    "bench_erasure_lake",
    "bench_retention",
    "bench_lake",
    "bench_schema",
    "bench_adopt",
    "bench_engines",
    "bench_startup",
    "bench_history",
]


def main(argv: list[str]) -> None:
    names = argv or BENCHES
    for name in names:
        try:
            mod = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"bench.{name}":
                print(f"(skipping {name}: not present)")
                continue
            raise
        print(f"\n===== {name} =====", flush=True)
        mod.run()


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]))
