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
import math
import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa

JsonScalar = int | float | str | bool | None

__all__ = [
    "JsonScalar",
    "NotExact",
    "comparable",
    "exact",
    "exact_scalar",
    "from_json",
    "is_orderable",
    "to_json",
]


_TEMPORAL = (pa.types.is_timestamp, pa.types.is_date, pa.types.is_time, pa.types.is_duration)
_ORDERABLE = (
    *_TEMPORAL,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_decimal,
    pa.types.is_boolean,
)


def is_orderable(t: pa.DataType) -> bool:
    """Types whose min/max we record and prune on."""
    return any(is_type(t) for is_type in _ORDERABLE)


def _is_temporal(t: pa.DataType) -> bool:
    return any(is_type(t) for is_type in _TEMPORAL)


def _is_binary(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
    )


def _epoch(s: pa.Scalar) -> int:
    """A temporal scalar's integer: days for date32, its unit since the epoch otherwise."""
    return int(s.cast(pa.int32() if pa.types.is_date32(s.type) else pa.int64()).as_py())


def to_json(s: pa.Scalar) -> JsonScalar:
    """Encode an Arrow scalar as a JSON scalar (temporal types as raw integers)."""
    if not s.is_valid:
        return None
    t = s.type
    if _is_temporal(t):
        return _epoch(s)
    if pa.types.is_decimal(t):
        return str(s.as_py())
    if _is_binary(t):
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
    if _is_binary(t):
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
        return _epoch(pa.scalar(value, type=t))
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(value))
    if _is_binary(t):
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


# --- exact filter values ---------------------------------------------------------------------
class NotExact(ValueError):
    """A filter value does not denote exactly one value of the column type. The message is
    the reason, and never contains the value (filter values are keys of people)."""


_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_ISO = re.compile(
    r"^(\d{4}-\d{2}-\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)
_TIME = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")
_EPOCH = dt.datetime(1970, 1, 1)


def _kind(value: Any) -> str:
    """What a value is, for a reason (never the value itself)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _exact_int(value: Any, t: pa.DataType) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    if isinstance(value, float) and not math.isfinite(value):
        raise NotExact(f"is not a finite number, the column is {t}")
    if isinstance(value, float | decimal.Decimal) and value != int(value):
        raise NotExact(f"has a fractional part, the column is {t}")
    if isinstance(value, float) and decimal.Decimal(repr(value)) != int(value):
        # 4.316409002163106e16 parses to ...056: not the integer the sender wrote
        raise NotExact(f"is a float too large to be an exact integer; send an integer for {t}")
    n = int(value)
    lo, hi = _int_range(t)
    if not lo <= n <= hi:
        raise NotExact(f"is out of range for {t} [{lo}, {hi}]")
    return n


def _exact_float(value: Any, t: pa.DataType) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    if isinstance(value, float) and math.isnan(value):
        raise NotExact("is NaN, which equals nothing and has no order")
    f = float(value)
    if isinstance(value, int | decimal.Decimal) and decimal.Decimal(f) != decimal.Decimal(value):
        raise NotExact(f"is not exactly representable as {t}")
    if pa.types.is_float64(t):
        return f
    import numpy as np

    narrow = np.float32 if pa.types.is_float32(t) else np.float16
    with np.errstate(over="ignore"):
        g = narrow(f)
    # exact in the narrow type, or the narrow value's own shortest decimal (0.1 for float32)
    if math.isfinite(f) and not math.isfinite(float(g)):
        raise NotExact(f"is out of range for {t}")
    if float(g) != f and float(str(g)) != f:
        raise NotExact(f"is not a value of {t} (it would be rounded)")
    return float(g)


def _exact_decimal(value: Any, t: pa.DataType) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | decimal.Decimal):
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    if isinstance(value, float) and not math.isfinite(value):
        raise NotExact(f"is not a finite number, the column is {t}")
    try:  # a float is taken by its shortest decimal form (1.1, not 1.100000000000000088817…)
        d = decimal.Decimal(repr(value) if isinstance(value, float) else value)
    except decimal.InvalidOperation as e:
        raise NotExact(f"is not a decimal number, the column is {t}") from e
    if not d.is_finite():
        raise NotExact(f"is not a finite number, the column is {t}")
    scale, precision = t.scale, t.precision
    if d == 0:
        return decimal.Decimal(0).scaleb(-scale)
    n = d.normalize()
    exponent = n.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -scale:
        raise NotExact(f"has more decimal places than the column's scale {scale}")
    if n.adjusted() + 1 > precision - scale:
        raise NotExact(f"has more digits than the column's precision {precision}")
    return n.quantize(decimal.Decimal(1).scaleb(-scale), context=decimal.Context(prec=precision))


def _ns_from_iso(s: str, *, aware_column: bool) -> int:
    m = _ISO.match(s.strip())
    if m is None:
        raise NotExact(
            "is not an ISO-8601 timestamp (YYYY-MM-DD[THH:MM[:SS[.fffffffff]]][Z|±HH:MM])"
        )
    day, hh, mm, ss, frac, zone = m.groups()
    try:
        base = dt.datetime.fromisoformat(f"{day}T{hh or '00'}:{mm or '00'}:{ss or '00'}")
    except ValueError as e:
        raise NotExact("is not a valid date and time") from e
    if aware_column and zone is None:
        raise NotExact("has no time zone, the column's timestamps are time-zone aware")
    if not aware_column and zone is not None:
        raise NotExact("has a time zone, the column's timestamps are naive (local, no zone)")
    offset = 0
    if zone and zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60)
    seconds = (base - _EPOCH) // dt.timedelta(seconds=1) - offset
    return seconds * 10**9 + int((frac or "").ljust(9, "0") or 0)


def _ns(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def _in_unit(ns: int, t: pa.DataType) -> int:
    """Nanoseconds ``ns`` in the unit of column type ``t``, which must hold them exactly."""
    per = _NS_PER_UNIT[t.unit]
    if ns % per:
        raise NotExact(f"is finer than the column's unit ({t.unit})")
    return ns // per


def _int64(n: int, t: pa.DataType) -> int:
    if not -(1 << 63) <= n < (1 << 63):
        raise NotExact(f"is out of range for {t}")
    return n


def _exact_timestamp(value: Any, t: pa.DataType) -> int:
    """Epoch in the column's unit; ints are taken as already in that unit."""
    aware = t.tz is not None
    per = _NS_PER_UNIT[t.unit]
    if isinstance(value, bool | float):
        raise NotExact(
            f"is {_kind(value)}; give an ISO-8601 string or an integer epoch in {t.unit}"
        )
    if isinstance(value, int):
        ns = value * per
    elif isinstance(value, str):
        ns = _ns_from_iso(value, aware_column=aware)
    elif isinstance(value, dt.datetime):
        if aware != (value.tzinfo is not None and value.utcoffset() is not None):
            raise NotExact(
                "is a naive datetime, the column is time-zone aware"
                if aware
                else "is an aware datetime, the column's timestamps are naive"
            )
        naive = value.astimezone(dt.UTC).replace(tzinfo=None) if aware else value
        ns = _ns(naive - _EPOCH)
    else:
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    return _int64(_in_unit(ns, t), t)


def _exact_date(value: Any, t: pa.DataType) -> int:
    """Days (date32) or milliseconds (date64) since the epoch; ints are taken as that number."""
    if isinstance(value, int) and not isinstance(value, bool):
        if pa.types.is_date64(t) and value % 86_400_000:
            raise NotExact(f"is not a whole day in milliseconds, the column is {t}")
        lo, hi = (
            (-(1 << 31), (1 << 31) - 1) if pa.types.is_date32(t) else (-(1 << 63), (1 << 63) - 1)
        )
        if not lo <= value <= hi:
            raise NotExact(f"is out of range for {t}")
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None or value.time() != dt.time():
            raise NotExact(f"is a date and time, the column is {t}")
        value = value.date()
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError as e:
            raise NotExact(f"is not an ISO-8601 date (YYYY-MM-DD), the column is {t}") from e
    if not isinstance(value, dt.date):
        raise NotExact(f"is {_kind(value)}; give an ISO-8601 date, the column is {t}")
    days = (value - _EPOCH.date()).days
    return days if pa.types.is_date32(t) else days * 86_400_000


def _exact_time(value: Any, t: pa.DataType) -> int:
    per = _NS_PER_UNIT[t.unit]
    if isinstance(value, bool | float):
        raise NotExact(f"is {_kind(value)}; give HH:MM:SS[.f] or an integer in {t.unit}")
    if isinstance(value, int):
        ns = value * per
    elif isinstance(value, str):
        m = _TIME.match(value.strip())
        if m is None:
            raise NotExact("is not a time of day (HH:MM[:SS[.fffffffff]])")
        hh, mm, ss, frac = m.groups()
        if int(hh) > 23 or int(mm) > 59 or int(ss or 0) > 59:
            raise NotExact("is not a valid time of day")
        ns = (int(hh) * 3600 + int(mm) * 60 + int(ss or 0)) * 10**9 + int(
            (frac or "").ljust(9, "0")
        )
    elif isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise NotExact("is a time with a zone, the column's times have none")
        ns = _ns(dt.datetime.combine(_EPOCH, value) - _EPOCH)  # since midnight
    else:
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    n = _in_unit(ns, t)
    if not 0 <= ns < 86_400 * 10**9:
        raise NotExact("is outside one day")
    return n


def _exact_duration(value: Any, t: pa.DataType) -> int:
    if isinstance(value, bool) or not isinstance(value, int | dt.timedelta):
        raise NotExact(f"is {_kind(value)}; give an integer in {t.unit} or a timedelta")
    return _int64(value if isinstance(value, int) else _in_unit(_ns(value), t), t)


def _exact_bool(value: Any, t: pa.DataType) -> bool:
    if not isinstance(value, bool):
        raise NotExact(f"is {_kind(value)}, the column is bool")
    return value


def _exact_str(value: Any, t: pa.DataType) -> str:
    if not isinstance(value, str):
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    return value


def _exact_bytes(value: Any, t: pa.DataType) -> bytes:
    if isinstance(value, str):
        value = value.encode()  # JSON has no bytes: a string stands for its UTF-8 bytes
    if not isinstance(value, bytes | bytearray):
        raise NotExact(f"is {_kind(value)}, the column is {t}")
    if pa.types.is_fixed_size_binary(t) and len(value) != t.byte_width:
        raise NotExact(f"is not {t.byte_width} bytes long, the column is {t}")
    return bytes(value)


# (the column types a test accepts, the conversion of a filter value for them)
_EXACT: tuple[tuple[Callable[[pa.DataType], bool], Callable[[Any, pa.DataType], Any]], ...] = (
    (pa.types.is_boolean, _exact_bool),
    (pa.types.is_integer, _exact_int),
    (pa.types.is_floating, _exact_float),
    (pa.types.is_decimal, _exact_decimal),
    (pa.types.is_string, _exact_str),
    (pa.types.is_large_string, _exact_str),
    (_is_binary, _exact_bytes),
    (pa.types.is_timestamp, _exact_timestamp),
    (pa.types.is_date, _exact_date),
    (pa.types.is_time, _exact_time),
    (pa.types.is_duration, _exact_duration),
)


def exact(value: Any, t: pa.DataType) -> Any:
    """The comparable form (as :func:`comparable`) of a filter value that denotes exactly one
    value of column type ``t``; :class:`NotExact` with the reason otherwise. Nothing is ever
    rounded, truncated, re-zoned or parsed from a string for a number.

    >>> exact(3.0, pa.int64()), exact("2024-01-01T00:00:00Z", pa.timestamp("s", tz="UTC"))
    (3, 1704067200)
    >>> exact(5550000023.5, pa.int64())
    Traceback (most recent call last):
    ...
    lethe.catalog.values.NotExact: has a fractional part, the column is int64
    """
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    for is_type, convert in _EXACT:
        if is_type(t):
            return convert(value, t)
    raise NotExact(f"cannot be compared: filters on {t} columns are not supported")


def exact_scalar(cmp: Any, t: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of column type ``t`` for a value :func:`exact` returned."""
    if _is_temporal(t):
        return pa.scalar(cmp, type=pa.int32() if pa.types.is_date32(t) else pa.int64()).cast(t)
    return pa.scalar(cmp, type=t)
