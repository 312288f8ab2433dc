"""The walk of one delete request through the library (issue 38): stops, modules, climbs.

Runs one SQS delete-request body through :func:`lethe.lake.requests.process_delete_messages`
(what the delete-requests Lambda calls) against moto in another process, and records every
call into ``shared/lethe`` (all threads). A *stop* is a call from one library function into
another; *modules* are the distinct modules entered; a *climb* is a call from a package into
a package on a higher layer of ``tests/test_layers.py``'s ``LAYERS`` (the library calling
back up, through a callback or a façade object).

    python -m devtools.walk            # prints the three numbers and the modules walked
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIB = (ROOT / "shared" / "lethe").resolve()


def _module(filename: str) -> str | None:
    p = Path(filename).resolve()
    if LIB not in p.parents:
        return None
    parts = list(p.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layers() -> dict[str, int]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_layers import LAYERS

    return {p: i for i, line in enumerate(LAYERS) for p in line}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lethe"


class Walk:
    """The calls between library functions seen while it is installed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (caller module, callee module)
        self.stops: list[str] = []
        self._lock = threading.Lock()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee = _module(frame.f_code.co_filename)
        caller = _module(frame.f_back.f_code.co_filename)
        if callee is None or caller is None or frame.f_code.co_name.startswith("<"):
            return
        with self._lock:
            self.calls.append((caller, callee))
            self.stops.append(f"{callee}.{frame.f_code.co_qualname}")

    def run(self, fn: Callable[[], Any]) -> Any:
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        try:
            return fn()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    def summary(self, layer: dict[str, int]) -> dict[str, Any]:
        modules = sorted({m for pair in self.calls for m in pair})
        climbs = [
            (a, b)
            for a, b in self.calls
            if _package(a) != _package(b)
            and layer.get(_package(b), -1) > layer.get(_package(a), -1)
        ]
        return {
            "stops": len(self.stops),
            "distinct stops": len(set(self.stops)),
            "modules": len(modules),
            "climbs": len(climbs),
            "climbed into": sorted({f"{a} -> {b}" for a, b in climbs}),
            "module list": modules,
        }


def main() -> int:
    import pyarrow as pa

    from bench.common import moto_process, new_bucket

    with moto_process() as aws:
        import lethe
        from lethe.lake.requests import process_delete_messages

        s3 = aws.client("s3")
        uri = f"s3://{new_bucket(aws)}/t"
        n = 10_000
        data = pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "customer_id": pa.array([i % 100 for i in range(n)], pa.int32()),
            }
        )
        lethe.Table.create(uri, data.schema, key="id", s3=s3, indexes=("customer_id",)).append(data)
        body = json.dumps(
            {"table": uri, "filters": [["customer_id", "=", 7]], "request_id": "walk-1"}
        )
        walk = Walk()
        out = walk.run(
            lambda: process_delete_messages(
                [("m1", body)], open_table=lambda u: lethe.Table.open(u, s3=s3)
            )
        )
        assert all(o.ok for o in out.values()), out
    s = walk.summary(_layers())
    print(
        f"delete request: {s['stops']} stops ({s['distinct stops']} distinct) through "
        f"{s['modules']} modules, {s['climbs']} climbs into {s['climbed into']}"
    )
    print("modules:", " ".join(m.removeprefix("lethe.") for m in s["module list"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
