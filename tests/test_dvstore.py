"""The one DV load path (lethe.dvstore) on a real container in moto: the blob a delete wrote
reads back as its positions, and a reference whose CRC or cardinality disagrees is refused."""

from __future__ import annotations

import pytest
from conftest import EVENTS, events

import lethe
from lethe import dvstore, errors


def test_a_deletes_dv_loads_and_a_lying_reference_is_refused(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 1_000))
    t.delete([("id", "in", [3, 500, 999])])
    [f] = t.manifest.files
    ref = f.dv
    assert ref is not None and ref.container is not None
    prefix = t.catalog.prefix
    assert sorted(dvstore.load(t.store, prefix, ref)) == [3, 500, 999]
    assert len(dvstore.load(t.store, prefix, None)) == 0
    with pytest.raises(errors.CorruptDeletionVector, match="3 positions, the manifest says 4"):
        dvstore.load(t.store, prefix, ref.model_copy(update={"cardinality": 4}), what="DV of f")
    with pytest.raises(errors.CorruptDeletionVector):
        dvstore.load(t.store, prefix, ref.model_copy(update={"crc32": (ref.crc32 + 1) % 2**32}))
    with pytest.raises(errors.CorruptDeletionVector, match="neither container nor inline"):
        dvstore.load(t.store, prefix, ref.model_copy(update={"container": None}))
