"""CLI commands for deletes, erasure, verification and GC (registered by :mod:`lethe.cli`)."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(sub: Any, add_filters: Any) -> None:
    """Add the maintenance commands to the ``lethe`` parser."""
    del sub, add_filters
