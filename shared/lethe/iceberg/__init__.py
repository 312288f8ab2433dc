"""An Apache Iceberg view of a Lethe table (DESIGN §6b, docs/format.md §10).

:func:`publish` writes Iceberg metadata (format 3 by default, 2 on request) for one Lethe
snapshot under ``<table>/metadata/``, referencing Lethe's own Parquet files and Puffin
deletion vectors (nothing is copied or rewritten); :func:`references` tells GC which
objects under ``metadata/`` retained snapshots still need, and which of them hold values
(for erasure completion). :mod:`lethe.iceberg.mapping` is the pure mapping,
:mod:`lethe.iceberg.avro` the Avro codec, :mod:`lethe.iceberg.glue` registers the view in
the AWS Glue Data Catalog.

Example:
    >>> import lethe                                                     # doctest: +SKIP
    >>> t = lethe.Table.open("s3://bucket/people")                       # doctest: +SKIP
    >>> t.publish_iceberg()                                              # doctest: +SKIP
    's3://bucket/people/metadata/v12.metadata.json'
"""

from __future__ import annotations

from lethe.iceberg.publish import PublishResult, publish, publish_view, read_hint
from lethe.iceberg.refs import IcebergReferences, erasure_objects, references

__all__ = [
    "IcebergReferences",
    "PublishResult",
    "erasure_objects",
    "publish",
    "publish_view",
    "read_hint",
    "references",
]
