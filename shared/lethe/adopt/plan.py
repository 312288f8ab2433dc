"""The schema of an adoption (the union of the files' footers) and its plan: what a dry run
shows (files, bytes, partitions, schemas, and an erasure-readiness report per file)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from lethe import errors
from lethe.adopt.footers import Footer
from lethe.adopt.source import HistoryObject, SourceListing
from lethe.catalog.partitions import PARTITION_META
from lethe.catalog.schemas import same_type
from lethe.catalog.values import JsonScalar

__all__ = [
    "AdoptPlan",
    "ColumnPlan",
    "FilePlan",
    "HistoryPlan",
    "file_plan",
    "history_plan",
    "plan_of",
    "union_schema",
]

_FIELD_ID = b"PARQUET:field_id"
Action = Literal["page-level splice", "row-group splice", "needs one rewrite first"]


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t


def union_schema(footers: Sequence[Footer], listing: SourceListing) -> pa.Schema:
    """The union of the files' columns (first seen order), then the partition columns.

    Field ids are kept when every file carrying a column gives it the same id; columns
    missing from some files are nullable.

    Raises:
        SchemaMismatch: a column has different types in different files (naming the files
            and columns), or a partition column is also inside a file.
    """
    fields: dict[str, pa.Field] = {}
    seen: dict[str, list[str]] = {}
    ids: dict[str, set[int | None]] = {}
    conflicts: list[str] = []
    for ft in footers:
        for f in ft.schema:
            t = _plain(f.type)
            fid = (f.metadata or {}).get(_FIELD_ID)
            ids.setdefault(f.name, set()).add(int(fid) if fid is not None else None)
            if f.name not in fields:
                fields[f.name], seen[f.name] = pa.field(f.name, t, nullable=True), [ft.source.uri]
            elif not same_type(fields[f.name].type, t):
                conflicts.append(
                    f"column {f.name!r} is {t} in {ft.source.uri} but {fields[f.name].type} in "
                    f"{seen[f.name][0]}"
                )
            else:
                seen[f.name].append(ft.source.uri)
    if conflicts:
        raise errors.SchemaMismatch(
            f"the files to adopt disagree on {len(conflicts)} column type(s): "
            + "; ".join(conflicts[:10])
        )
    all_ids = [next(iter(s)) for s in ids.values() if len(s) == 1 and None not in s]
    keep_ids = len(all_ids) == len(ids) and len(set(all_ids)) == len(all_ids)
    out = [
        f.with_metadata({_FIELD_ID: str(next(iter(ids[n]))).encode()}) if keep_ids else f
        for n, f in fields.items()
    ]
    for p in listing.partition_schema or ():
        if p.name not in fields:
            out.append(
                pa.field(p.name, p.type, nullable=True, metadata={PARTITION_META: b"identity"})
            )
        elif not (same_type(fields[p.name].type, p.type) or pa.types.is_string(p.type)):
            # a writer that also keeps the partition column in its files (polars): the file's
            # column is read; a partition type given for it must agree
            raise errors.SchemaMismatch(
                f"partition column {p.name!r} is {p.type} by its directories but "
                f"{fields[p.name].type} inside {seen[p.name][0]}"
            )
    return pa.schema(out)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FilePlan(_Frozen):
    """One file of the plan, with its erasure readiness."""

    uri: str
    bytes: int
    rows: int
    footer_bytes: int
    partition: dict[str, JsonScalar]
    columns: tuple[str, ...]
    row_group_bytes: tuple[int, ...]
    page_index: bool
    action: Action
    reasons: tuple[str, ...] = ()
    deleted_rows: int = 0

    @property
    def needs_rewrite(self) -> bool:
        """What ``--rewrite-unready`` rewrites: no page index, or refused by the splice."""
        return self.action != "page-level splice"


class HistoryPlan(_Frozen):
    """One object of the source's history and metadata (not a live data file): adoption
    with ownership takes it as owned and superseded, GC deletes it after the grace."""

    uri: str
    bytes: int
    what: str


def history_plan(h: HistoryObject) -> HistoryPlan:
    return HistoryPlan(uri=h.uri, bytes=h.size, what=h.what)


class ColumnPlan(_Frozen):
    name: str
    type: str
    partition: bool = False


class AdoptPlan(_Frozen):
    """What an adoption would do (``Table.adopt(..., dry_run=True)``); nothing is written.

    Attributes:
        table: the table URI; ``source``/``format``: what is adopted.
        files: every file to adopt (already adopted ones excluded), with its readiness.
        already_adopted: files of the source the table holds already (same path and ETag).
        table_columns: the table schema the files make (partition columns marked).
        schemas: the distinct column sets of the files, with how many files have each.
        partitions: the distinct partition values, with their file counts.
        superseded: files of the source the table adopted before and has superseded since
            (an erasure spliced them; they stay until GC): never adopted again.
        history: the source's history and metadata (earlier snapshots' files, delete files,
            Iceberg metadata and manifests, Delta logs and checkpoints): copies of its values,
            taken as owned and superseded (GC deletes them after the grace).
    """

    table: str
    source: str
    format: str
    files: tuple[FilePlan, ...]
    already_adopted: int
    table_columns: tuple[ColumnPlan, ...]
    schemas: tuple[tuple[tuple[str, ...], int], ...]
    partitions: tuple[tuple[str, int], ...]
    take_ownership: bool
    superseded: int = 0
    history: tuple[HistoryPlan, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def footer_bytes(self) -> int:
        return sum(f.footer_bytes for f in self.files)

    @property
    def unready(self) -> tuple[FilePlan, ...]:
        return tuple(f for f in self.files if f.needs_rewrite)

    def to_json(self) -> str:
        """The plan as JSON (with the totals)."""
        doc = self.model_dump(mode="json")
        doc |= {"bytes": self.bytes, "rows": self.rows, "footer_bytes": self.footer_bytes}
        doc["unready"] = [f.uri for f in self.unready]
        return json.dumps(doc, indent=2, sort_keys=True)

    def describe(self) -> str:
        """A human-readable plan (what ``lethe adopt --dry-run`` prints)."""
        lines = [
            f"adopt {self.source} ({self.format}) into {self.table}: {len(self.files)} files, "
            f"{self.bytes:,} bytes, {self.rows:,} rows in place"
            + (f" ({self.already_adopted} already adopted)" if self.already_adopted else ""),
            "schema: "
            + ", ".join(
                f"{c.name} {c.type}" + (" (partition)" if c.partition else "")
                for c in self.table_columns
            ),
            f"column sets: {len(self.schemas)}; partitions: {len(self.partitions)}",
            f"ownership: {'taken (erasure may rewrite and delete the originals)' if self.take_ownership else 'none (erase refused)'}",
        ]
        if self.superseded:
            lines.append(
                f"superseded: {self.superseded} file(s) this table adopted before and has "
                "superseded since (erased): never adopted again"
            )
        if self.history:
            kinds = Counter(h.what for h in self.history)
            lines.append(
                f"history and metadata: {len(self.history)} object(s), "
                f"{sum(h.bytes for h in self.history):,} bytes ("
                + ", ".join(f"{n} {w}" for w, n in sorted(kinds.items()))
                + "): they hold copies of the values; "
                + (
                    "taken as owned and superseded (GC deletes them after the grace: the "
                    f"source stops working as a {self.format} table)"
                    if self.take_ownership
                    else "left in place (no ownership): an erasure cannot reach them"
                )
            )
        actions = Counter(f.action for f in self.files)
        lines.append(
            "erasure readiness: " + ", ".join(f"{n} {a}" for a, n in sorted(actions.items()))
        )
        for f in self.files:
            why = f" ({'; '.join(f.reasons)})" if f.reasons else ""
            lines.append(
                f"  {f.uri}: {f.rows:,} rows, {len(f.row_group_bytes)} row groups "
                f"(max {max(f.row_group_bytes, default=0):,} bytes): {f.action}{why}"
            )
        if self.history:
            lines.append("history and metadata:")
            lines.extend(f"  {h.uri}: {h.bytes:,} bytes, {h.what}" for h in self.history)
        return "\n".join(lines)


def file_plan(ft: Footer, partition: Mapping[str, JsonScalar]) -> FilePlan:
    r = ft.readiness
    reasons = list(r.refused)
    if r.refused:
        action: Action = "needs one rewrite first"
    elif r.page_index:
        action = "page-level splice"
    else:
        action = "row-group splice"
        reasons.append("no page index: an erasure re-uploads whole row groups")
    return FilePlan(
        uri=ft.source.uri,
        bytes=ft.size,
        rows=ft.metadata.num_rows,
        footer_bytes=ft.nbytes,
        partition=dict(partition),
        columns=tuple(ft.schema.names),
        row_group_bytes=r.row_group_bytes,
        page_index=r.page_index,
        action=action,
        reasons=tuple(reasons),
        deleted_rows=len(ft.source.deleted),
    )


def plan_of(
    uri: str,
    listing: SourceListing,
    footers: Sequence[Footer],
    schema: pa.Schema,
    done: int,
    own: bool,
    superseded: int = 0,
) -> AdoptPlan:
    """The plan of adopting ``footers`` (of ``listing``) into the table at ``uri`` under
    ``schema``; ``done``/``superseded``: the source's files the table holds or superseded."""
    parts = set((listing.partition_schema or pa.schema([])).names)
    by_part = Counter(
        ", ".join(f"{k}={v}" for k, v in ft.source.partition.items()) for ft in footers
    )
    sets = Counter(tuple(ft.schema.names) for ft in footers)
    return AdoptPlan(
        table=uri,
        source=listing.source,
        format=listing.format,
        files=tuple(file_plan(ft, ft.source.partition) for ft in footers),
        already_adopted=done,
        table_columns=tuple(
            ColumnPlan(name=f.name, type=str(f.type), partition=f.name in parts) for f in schema
        ),
        schemas=tuple(sorted(sets.items())),
        partitions=tuple(sorted(by_part.items())) if parts else (),
        take_ownership=own,
        superseded=superseded,
        history=tuple(history_plan(h) for h in listing.history),
    )
