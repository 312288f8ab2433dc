"""Issue 38 item 3: one schema rule. Three type rules disagreed (``schemas.is_widening``,
``ingest.fit.widens`` which let an int into a float column, ``ingest.fit.same_type``): a
file ``lethe append`` cast was refused by ``lethe append --evolve``. Now data fits a column
by one rule (:func:`lethe.catalog.schemas.fits`: Iceberg's promotions after what only
changes a representation), and every fold of input schemas into schema changes is
:func:`lethe.catalog.evolution.plan_merge`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.catalog.evolution import plan_merge
from lethe.catalog.manifest import TableProperties, initial_manifest
from lethe.catalog.schemas import fits, is_widening, same_type, with_ids
from lethe.catalog.snapshot import Snapshot
from lethe.ingest.fit import fit, schema_problems

TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint32(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(9, 2),
    pa.decimal128(18, 2),
    pa.decimal128(18, 3),
    pa.date32(),
    pa.timestamp("ms"),
    pa.timestamp("us"),
    pa.timestamp("us", tz="UTC"),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.dictionary(pa.int32(), pa.string()),
    pa.null(),
]


def _snapshot(t: pa.DataType) -> Snapshot:
    schema = with_ids(pa.schema([pa.field("id", pa.int64(), False), ("c", t)]))
    return Snapshot(
        initial_manifest(table_uuid="u", schema=schema, properties=TableProperties(key="id"))
    )


@settings(max_examples=200, deadline=None)
@given(got=st.sampled_from(TYPES), want=st.sampled_from(TYPES[:-3]))
def test_append_and_merge_agree_on_every_pair_of_types(got: pa.DataType, want: pa.DataType) -> None:
    """What a plain append takes (it casts) a merge takes without a schema change; what it
    refuses, a merge widens the table for (Iceberg's promotion the other way) or refuses."""
    offered = pa.schema([pa.field("id", pa.int64(), False), ("c", got)])
    table = pa.schema([pa.field("id", pa.int64(), False), ("c", want)])
    takes = not schema_problems(offered, table)
    assert takes == fits(got, want)
    try:
        changes = plan_merge(offered, _snapshot(want)).changes
    except errors.SchemaMismatch:
        changes = None
    if takes:
        assert changes == ()
    elif is_widening(want, got):
        assert changes is not None and [type(c).__name__ for c in changes] == ["Widen"]
    else:
        assert changes is None
    if fits(got, want) and not pa.types.is_null(got):  # fitting is exactly the promotion rule
        base = got.value_type if pa.types.is_dictionary(got) else got
        assert same_type(base, want) or is_widening(base, want) or pa.types.is_timestamp(want)


def test_an_int_no_longer_fits_a_float_column(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38 item 3, a deliberate change: ``widens`` let an int32 Parquet column into a
    double column (cast), which ``--evolve`` then refused ("not a widening either way").
    Both now refuse it, naming the column; nothing is committed."""
    from lethe.cli import main

    schema = pa.schema([("id", pa.int64(), False), ("x", pa.float64())])
    t = lethe.Table.create(table_uri, schema, key="id")
    pq.write_table(pa.table({"id": [1], "x": pa.array([7], pa.int32())}), tmp_path / "a.parquet")
    for extra in ([], ["--evolve"]):
        rc = main(["-q", "append", table_uri, str(tmp_path / "a.parquet"), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("lethe: SchemaMismatch") and "int32" in err and "x" in err
    with pytest.raises(errors.SchemaMismatch, match="not a promotion"):
        fit(pa.table({"id": [1], "x": pa.array([7], pa.int32())}), schema)
    assert lethe.Table.open(table_uri).version == t.version
    assert not fits(pa.int32(), pa.float64()) and not fits(pa.uint8(), pa.int32())


def test_plan_merge_lists_every_input_and_plans_on_the_snapshot(table_uri: str, s3: Any) -> None:
    """One fold for every caller: each input labelled, nothing planned when one fails; the
    plan follows the renames of the snapshot it is given (issue 35 item 10 by construction)."""
    schema = pa.schema([("id", pa.int64(), False), ("note", pa.string()), ("n", pa.int32())])
    t = lethe.Table.create(table_uri, schema, key="id", s3=s3)
    t.update_schema().rename_column("note", "memo").commit()
    good = pa.schema([("id", pa.int64()), ("note", pa.large_string()), ("n", pa.int64())])
    plan = plan_merge([good, pa.schema([("id", pa.int64()), ("extra", pa.string())])], t.manifest)
    assert [type(c).__name__ for c in plan.changes] == ["Widen", "Add"]
    assert plan.shapes[0].names == ["id", "memo", "n"] and plan.schema.names[-1] == "extra"
    with pytest.raises(errors.SchemaMismatch, match=r"(?s)2 of 3 inputs.*a.parquet.*c.parquet"):
        plan_merge(
            [
                pa.schema([("id", pa.int64()), ("n", pa.string())]),
                good,
                pa.schema([("memo", pa.int8())]),
            ],
            t.manifest,
            labels=["a.parquet", "b.parquet", "c.parquet"],
        )
