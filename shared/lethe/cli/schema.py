"""``lethe schema show|add|drop|rename|widen|optional|uploads``: the table's schema and its
history (field ids, :mod:`lethe.catalog.schemas`). Each change is one commit (``Table.update_schema``);
``uploads URI evolve|strict`` sets whether uploads may evolve it (``uploads_evolve``).

>>> parse_type("decimal(12, 2)"), parse_type("timestamp[us]"), parse_type("int64")
(Decimal128Type(decimal128(12, 2)), TimestampType(timestamp[us]), DataType(int64))
"""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any

from lethe import errors
from lethe.cli.common import add_at_version, add_command

if TYPE_CHECKING:  # the heavy modules load with the command that needs them
    import pyarrow as pa

    from lethe.table import Table

__all__ = ["parse_type", "register"]


def parse_type(text: str) -> pa.DataType:
    """An Arrow type by name: pyarrow's aliases (``int64``, ``string``, ``date32``,
    ``timestamp[us]``, ...) or ``decimal(P, S)``."""
    import pyarrow as pa

    m = re.fullmatch(r"\s*decimal(?:128)?\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*", text)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    try:
        return pa.type_for_alias(text.strip())
    except (ValueError, KeyError) as e:
        raise errors.InvalidRequest(
            f"unknown type {text!r} (e.g. int64, string, decimal(12, 2))"
        ) from e


def _describe(schema: pa.Schema, key: str) -> list[str]:
    from lethe.catalog.schemas import field_id, initial_default

    out = []
    for f in schema:
        extra = " key" if f.name == key else ("" if f.nullable else " required")
        d = initial_default(f)
        if d is not None:
            extra += f" default={d!r}"
        out.append(f"  {field_id(f):>4}  {f.name}: {f.type}{extra}")
    return out


def cmd_schema(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri, version=a.version) if a.action == "show" else Table.open(a.uri)
    if a.action == "show":
        current = t.manifest.current_schema_id
        shown = t.schema_history if a.history else [(current, t.schema)]
        for sid, schema in shown:
            mark = " (current)" if sid == current else ""
            print(f"schema {sid}{mark} of version {t.version}:")
            print("\n".join(_describe(schema, t.key)))
        print(f"uploads: {'evolve' if t.manifest.properties.uploads_evolve else 'strict'}")
        return 0
    args = list(a.args)
    if a.action == "uploads":
        return _uploads(t, args)
    want = {"add": 2, "drop": 1, "rename": 2, "widen": 2, "optional": 1}[a.action]
    if len(args) != want:
        raise errors.InvalidRequest(f"lethe schema {a.action} takes {want} argument(s), got {args}")
    u = t.update_schema()
    if a.action == "add":
        default = json.loads(a.default) if a.default is not None else None
        u.add_column(args[0], parse_type(args[1]), default=default)
    elif a.action == "drop":
        u.drop_column(args[0])
    elif a.action == "rename":
        u.rename_column(args[0], args[1])
    elif a.action == "widen":
        u.widen_column(args[0], parse_type(args[1]))
    else:
        u.make_optional(args[0])
    r = u.commit()
    print(f"schema {t.manifest.current_schema_id} -> version {r.version}")
    return 0


def _uploads(t: Table, args: list[str]) -> int:

    if args not in (["evolve"], ["strict"]):
        raise errors.InvalidRequest(f"lethe schema uploads takes evolve or strict, got {args}")
    r = t.set_properties(uploads_evolve=args[0] == "evolve")
    print(f"uploads: {args[0]} -> version {r.version}")
    return 0


def register(sub: Any) -> None:
    """Add ``schema`` to the ``lethe`` parser."""
    c = add_command(
        sub,
        "schema",
        "show the schema (--history: every schema by id) or change it: add, drop, "
        "rename, widen, optional",
        "uri",
        actions=("show", "add", "drop", "rename", "widen", "optional", "uploads"),
        fn=cmd_schema,
        description="Each change is one commit; files keep the schema they were written "
        "under and read by field id. add COLUMN TYPE [--default JSON], drop COLUMN, "
        "rename COLUMN NEW, widen COLUMN TYPE, optional COLUMN; uploads evolve|strict: whether "
        "an upload (the trigger, the ingest job it starts) of another shape may evolve the "
        "schema (new columns, widenings) or is refused (the default).",
    )
    c.add_argument("args", nargs="*")
    c.add_argument("--history", action="store_true", help="show: every schema of the history")
    add_at_version(c, "show: the schema of this table version")
    c.add_argument("--default", help="add: the initial default of older rows (JSON)")
