"""Canonical JSON form of column statistics values, and their comparable Python form.

Manifests store min/max statistics as JSON scalars; pruning compares them with filter
values. Both sides go through :func:`comparable` so that ``int`` epochs, ``Decimal``s, ``str``
and ``bytes`` compare correctly for the column's Arrow type.

>>> import pyarrow as pa
>>> to_json(pa.scalar(5, pa.int64()))
5
>>> comparable("2024-01-01T00:00:00", pa.timestamp("us"))
1704067200000000
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any

import pyarrow as pa

JsonScalar = int | float | str | bool | None

__all__ = ["JsonScalar", "comparable", "from_json", "is_orderable", "to_json"]


def is_orderable(t: pa.DataType) -> bool:
    """Types whose min/max we record and prune on."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
        or pa.types.is_duration(t)
    )


def _is_temporal(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


def to_json(s: pa.Scalar) -> JsonScalar:
    """Encode an Arrow scalar as a JSON scalar (temporal types as raw integers)."""
    if not s.is_valid:
        return None
    t = s.type
    if _is_temporal(t):
        return (
            int(s.cast(pa.int64()).as_py())
            if not pa.types.is_date32(t)
            else int(s.cast(pa.int32()).as_py())
        )
    if pa.types.is_decimal(t):
        return str(s.as_py())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64encode(s.as_py()).decode("ascii")
    v = s.as_py()
    if isinstance(v, float) and v != v:  # NaN has no order
        return None
    return v  # type: ignore[no-any-return]


def from_json(v: JsonScalar, t: pa.DataType) -> Any:
    """Decode a JSON scalar written by :func:`to_json` into its comparable Python form."""
    if v is None:
        return None
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(v))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64decode(str(v))
    return v


def comparable(value: Any, t: pa.DataType) -> Any:
    """A user's filter value converted to the comparable Python form for column type ``t``.

    Raises ``TypeError``/``ValueError``/``pa.ArrowInvalid`` when the value does not fit.
    """
    if value is None:
        return None
    if _is_temporal(t):
        if isinstance(value, str):
            if pa.types.is_timestamp(t):
                value = dt.datetime.fromisoformat(value)
            elif pa.types.is_date(t):
                value = dt.date.fromisoformat(value)
        if isinstance(value, pa.Scalar):
            value = value.as_py()
        s = pa.scalar(value, type=t)
        return (
            int(s.cast(pa.int64()).as_py())
            if not pa.types.is_date32(t)
            else int(s.cast(pa.int32()).as_py())
        )
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(value))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return bytes(value) if not isinstance(value, str) else value.encode()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return value
    if pa.types.is_boolean(t):
        return bool(value)
    if pa.types.is_integer(t):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected an integer, got {type(value).__name__}")
        return value
    if pa.types.is_floating(t):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected a number, got {type(value).__name__}")
        return float(value)
    return value
