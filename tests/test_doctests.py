"""The examples in the docstrings of the library's pure modules (``lethe.parquet``'s too) run."""

from __future__ import annotations

import pytest

from tests.conftest import assert_doctests

MODULES = [
    "adopt.source",
    "adopt.objects",
    "adopt.iceberg",
    "iceberg.types",
    "adopt.names",
    "adopt.delta",
    "adopt.delta_format",
    "adopt.glue",
    "adopt.hive_types",
    "adopt.hive",
    "iceberg.partitioning",
    "catalog.partitions",
    "cli.adopt",
    "catalog.schemas",
    "maintenance.clustering",
    "iceberg.sorting",
    "storage.layout",
    "storage.objects",
    "reading.filters",
    "catalog.values",
    "storage.store",
    "cli.common",
    "gc.areas",
    "gc.policy",
    "gc.present",
    "ingest",
    "ingest.inputs",
    "ingest.conform",
    "ingest.readers",
    "ingest.staging",
    "ingest.shapes",
    "dv.remap",
    "progress",
    "lake.requests",
    "ingest.fit",
    "cli.inputs",
    "dv.store",
    "catalog.snapshot",
    "catalog.transforms.files",
    "maintenance.compaction_plan",
    "lake.model",
    "catalog.evolution",
    "catalog.grace",
    "catalog.changes",
    "catalog.requirements",
    "dv.blob",
    "dv.puffin",
]

PARQUET = [
    "thrift",
    "enums",
    "model",
    "footer",
    "offsets",
    "segments",
    "decode",
    "reencode",
    "region",
    "splice",
    "parts",
    "costs",
    "validate",
    "pages",
    "chunkmeta",
    "chunkvalues",
    "fates",
    "bloom",
    "sbbf",
    "dictpages",
]


@pytest.mark.parametrize("name", [*MODULES, *(f"parquet.{m}" for m in PARQUET)])
def test_docstring_examples(name: str) -> None:
    assert_doctests(f"lethe.{name}")
