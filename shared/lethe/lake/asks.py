"""What a lake request asks, checked before anything is recorded: a request id, a mode,
values that are JSON scalars, an id that names no other request (nor a cancelled one), a
subject kind some table maps, and values every mapped column can hold, checked as each
table's delete checks its filters (:func:`lethe.reading.filters.normalize`): a value no column can
hold (``"abc"`` for an int subject) is refused here, with the reason, instead of being
recorded and failing in every table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

import pyarrow as pa

import lethe.lake.model as model
from lethe import errors
from lethe.catalog.manifest import request_hash
from lethe.lake.model import LakeDoc
from lethe.reading.filters import normalize

__all__ = [
    "CONFLICT",
    "Asked",
    "ForgetRequest",
    "check",
    "misfit",
    "misfit_column",
    "subject_filters",
]

Mode = Literal["erase", "logical"]
CONFLICT = (
    "request id already names a different lake request (other subject kind, mode or values); "
    "a request id identifies one request: use a new id"
)


@dataclass(frozen=True, slots=True)
class ForgetRequest:
    """One request of a batch (:meth:`Lake.forget_batch`)."""

    kind: str
    values: Sequence[Any]
    request_id: str
    mode: Mode = "erase"
    requested_at: datetime | None = None


class Asked(NamedTuple):
    """A validated request of this call: its values, raw id and hashes."""

    req: ForgetRequest
    id_hash: str
    body_hash: str
    values: tuple[Any, ...]


def subject_filters(columns: Sequence[str], values: Sequence[Any]) -> Any:
    """The delete filters of ``values`` in any of ``columns`` (DNF: one clause a column)."""
    clauses = [[(c, "in", list(values))] for c in dict.fromkeys(columns)]
    return clauses[0] if len(clauses) == 1 else clauses


def misfit_column(values: Sequence[Any], uri: str, column: str, schema: pa.Schema) -> str | None:
    """Why ``values`` do not fit ``column`` of the table ``uri`` (None: they fit)."""
    try:
        normalize(subject_filters([column], values), schema)
    except errors.InvalidRequest as e:
        return f"the values do not fit column {column!r} of {uri}: {e}"
    return None


def misfit(
    doc: LakeDoc,
    kind: str,
    values: Sequence[Any],
    schema_of: Callable[[str], pa.Schema | None],
) -> str | None:
    """Why ``values`` do not fit a column ``kind`` maps to (None: they fit every one).
    ``schema_of(table)`` is None for a table that cannot be read now (checked when the
    request is applied to it). The reason never contains a value."""
    for uri, cols in doc.columns(kind).items():
        schema = schema_of(uri)
        if schema is None:
            continue
        for col in cols:
            why = misfit_column(values, uri, col, schema)
            if why is not None:
                return why
    return None


def check(
    doc: LakeDoc, r: ForgetRequest, schema_of: Callable[[str], pa.Schema | None]
) -> Asked | str:
    """``r`` checked against the registry ``doc``: the request to record or apply, or why it
    is refused."""
    if not r.request_id:
        return "a lake request needs a request id"
    if r.mode not in ("erase", "logical"):
        return "mode must be 'erase' or 'logical'"
    if isinstance(r.values, str | bytes) or not r.values:
        return "values must be a non-empty list of subject identifiers"
    try:
        values = tuple(model.canonical_values(r.values))
    except errors.InvalidRequest as e:
        return str(e)
    h = request_hash(r.request_id)
    body = model.body_hash(r.request_id, r.kind, r.mode, values)
    old = doc.request(h)
    if old is not None and old.body_hash != body:
        return CONFLICT
    if old is not None and old.cancelled_at is not None:
        return f"the request was cancelled ({old.cancel_reason}); ask again with a new request id"
    if old is None:
        if not doc.columns(r.kind):
            return f"no table of the lake maps subject kind {r.kind!r} (map_subject)"
        why = misfit(doc, r.kind, values, schema_of)
        if why is not None:
            return why
    return Asked(r, h, body, values)
