"""The examples in the docstrings of ``lethe.parquet`` run."""

from __future__ import annotations

import pytest

from tests.conftest import assert_doctests

MODULES = [
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


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    assert_doctests(f"lethe.parquet.{name}")
