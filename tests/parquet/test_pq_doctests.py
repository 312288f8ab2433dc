"""The examples in the docstrings of ``lethe.parquet`` run."""

from __future__ import annotations

import doctest
import importlib

import pytest

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
    module = importlib.import_module(f"lethe.parquet.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
