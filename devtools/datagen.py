"""Synthetic event tables for the demo, the tests and the benches: the demo's schema and
:func:`generate` (ids in order, customers drawn at random, searchable payloads on request)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["BLOB_SCHEMA", "SCHEMA", "blob_rows", "generate"]

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)


def generate(
    start: int,
    n: int,
    *,
    customers: int = 10_000,
    seed: int = 7,
    payloads: Mapping[int, str] | None = None,
) -> pa.Table:
    """Synthetic events: ids ``start..start+n``, sorted by id; ``payloads`` replaces the
    payload of some ids (the demo's unique, searchable values)."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n, dtype=np.int64)
    words = np.array(["click", "view", "buy", "share", "login", "logout", "search", "rate"])
    payload = pc.binary_join_element_wise(
        pa.array(words[rng.integers(0, len(words), n)]),
        pa.array(rng.integers(0, 1_000_000, n).astype(str)),
        ":",
    )
    special = {i: p for i, p in (payloads or {}).items() if start <= i < start + n}
    if special:
        values = payload.to_pylist()
        for i, p in special.items():
            values[i - start] = p
        payload = pa.array(values, pa.string())
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(
                1_700_000_000_000_000 + ids * 37_000, pa.timestamp("us", tz="UTC")
            ),
            "customer_id": pa.array(rng.integers(0, customers, n).astype(np.int32)),
            "payload": payload,
        },
        schema=SCHEMA,
    )


BLOB_SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("blob", pa.binary())])


def blob_rows(start: int, n: int, width: int = 1000, *, digits: int = 0) -> pa.Table:
    """Rows of :data:`BLOB_SCHEMA`: ids ``start..start+n``, names ``name-<id>`` (the id
    zero-padded to ``digits``) and ``width`` random bytes each, seeded by ``start``."""
    rng = np.random.default_rng(start)
    raw = rng.integers(0, 256, n * width, dtype=np.uint8).tobytes()
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
    blob = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(raw)])
    ids = np.arange(start, start + n, dtype=np.int64)
    number = pa.array(ids).cast(pa.string())
    if digits:
        number = pc.utf8_lpad(number, width=digits, padding="0")
    names = pc.binary_join_element_wise("name-", number, "")
    return pa.table({"id": ids, "name": names, "blob": blob}, schema=BLOB_SCHEMA)
