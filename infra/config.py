"""Deployment settings, read once from CDK context into a typed, validated object.

Keys and defaults are in :data:`infra.constants.CONTEXT_DEFAULTS`; set them in ``cdk.json``
or on the command line (``-c lethe:encryption=kms``). Command-line context arrives as strings,
so booleans and integers are parsed here, and anything unusable fails the synth loudly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from infra import constants as c

Encryption = Literal["s3", "kms"]
_T = TypeVar("_T")
_PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9._\-]*(/[a-z0-9][a-z0-9._\-]*)*$")
_SCHEDULE_RE = re.compile(r"^(rate\(.+\)|cron\(.+\))$")
_DURATION_RE = re.compile(r"^\d+[dhv]$")


class ConfigError(ValueError):
    """A context value is missing or malformed."""


_S3_RE = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])/([^*?]+?)/*$")


@dataclass(frozen=True, slots=True)
class S3Prefix:
    """A bucket and a key prefix (no trailing slash) parsed from ``s3://bucket/prefix``."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: object) -> S3Prefix:
        m = _S3_RE.match(uri) if isinstance(uri, str) else None
        if m is None:
            raise ValueError(f"{uri!r} is not s3://bucket/prefix (a bucket and a non-empty prefix)")
        return cls(m.group(1), m.group(2).strip("/"))

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True, slots=True)
class LakeConfig:
    """One stack per lake (context ``lethe:lake``): the lake's registry prefix, its tables'
    prefixes (in any buckets) and adopted prefixes (read-only: the data files of adopted
    Iceberg/Delta tables). Its functions get exactly these prefixes."""

    lake: S3Prefix
    tables: tuple[S3Prefix, ...]
    adopted: tuple[S3Prefix, ...] = ()

    @classmethod
    def parse(cls, raw: object) -> LakeConfig | None:
        """From a mapping or its JSON text; ``""``/``None``: no lake."""
        keys = ("uri", "tables", "adopted")
        raw = _mapping(raw, keys, '{"uri": ..., "tables": [...], "adopted": [...]}')
        if raw is None:
            return None
        tables = raw.get("tables") or []
        adopted = raw.get("adopted") or []
        if not isinstance(tables, list) or not tables or not isinstance(adopted, list):
            raise ValueError("tables: a non-empty list of s3:// table URIs; adopted: a list")
        out = cls(
            S3Prefix.parse(raw.get("uri")),
            tuple(S3Prefix.parse(t) for t in tables),
            tuple(S3Prefix.parse(a) for a in adopted),
        )
        _refuse_overlaps([out.lake, *out.tables, *out.adopted])
        return out

    @property
    def buckets(self) -> tuple[str, ...]:
        every = [self.lake, *self.tables, *self.adopted]
        return tuple(dict.fromkeys(p.bucket for p in every))


@dataclass(frozen=True, slots=True)
class AdoptConfig:
    """Data adopted in place into the stack's table (context ``lethe:adopt``, issue 28).

    Attributes:
        prefixes: adopted prefixes (any buckets) other writers keep landing Parquet files
            under: the upload trigger is notified of them and adopts each new file in place;
            the functions that read data files may read them.
        in_place: Parquet uploads under ``incoming/`` are adopted in place too (not copied
            into ``data/``); they are then data files of the table, so the expiry rule on
            ``incoming/`` is not created.
        ownership: the table owns what it adopts: erasure splices supersede the originals
            and GC's sweep (alone) may delete them; off: a read-only adoption (erase refuses).
    """

    prefixes: tuple[S3Prefix, ...] = ()
    in_place: bool = False
    ownership: bool = True

    @classmethod
    def parse(cls, raw: object) -> AdoptConfig | None:
        """From a mapping or its JSON text; ``""``/``None``: nothing adopted
        (tests/infra/test_infra_units.py shows what is refused)."""
        keys = ("prefixes", "inPlace", "ownership")
        raw = _mapping(raw, keys, '{"prefixes": [...], "inPlace": bool, "ownership": bool}')
        if raw is None:
            return None
        prefixes = raw.get("prefixes") or []
        if not isinstance(prefixes, list):
            raise ValueError("prefixes: a list of s3://bucket/prefix URIs")
        out = cls(
            tuple(S3Prefix.parse(p) for p in prefixes),
            _bool(raw.get("inPlace", False)),
            _bool(raw.get("ownership", True)),
        )
        if not out.prefixes and not out.in_place:
            raise ValueError('nothing adopted: give "prefixes" or "inPlace": true')
        _refuse_overlaps(out.prefixes)
        return out


def _mapping(raw: object, keys: Sequence[str], expected: str) -> dict[str, object] | None:
    """A context value given as a mapping or its JSON text, with no key but ``keys`` (else
    ValueError: ``expected``); ``""``, ``None`` or ``{}``: None."""
    if raw in ("", None, {}):
        return None
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, dict) or set(raw) - set(keys):
        raise ValueError(f"expected {expected}")
    return raw


def _refuse_overlaps(prefixes: Sequence[S3Prefix]) -> None:
    """Raise ValueError if two of ``prefixes`` are the same or one lies under another."""
    for i, a in enumerate(prefixes):
        for b in prefixes[i + 1 :]:
            if a.bucket == b.bucket and (
                f"{b.prefix}/".startswith(f"{a.prefix}/")
                or f"{a.prefix}/".startswith(f"{b.prefix}/")
            ):
                raise ValueError(f"{a.uri} and {b.uri} overlap: give each its own prefix")


def parse_context(pairs: Sequence[str]) -> dict[str, object]:
    """``-c key=value`` arguments as a CDK context mapping (values stay strings)."""
    context: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"-c expects key=value, got {pair!r}")
        context[key] = value
    return context


@dataclass(frozen=True, slots=True)
class LetheConfig:
    """Everything an operator may choose per deployment. See ``docs/deploy.md``."""

    table_prefix: str
    encryption: Encryption
    versioned: bool
    noncurrent_version_days: int
    access_logs: bool
    access_log_retention_days: int
    incoming_expiration_days: int
    log_level: str
    log_retention_days: int
    splice_concurrency: int
    splice_max_bytes: int
    direct_register_max_bytes: int
    gc_schedule: str
    gc_retention: str
    gc_grace: str
    gc_dry_run: bool
    gc_map_concurrency: int
    emr_max_vcpu: int
    emr_idle_timeout_minutes: int
    alarm_email: str
    erasure_alarm_days: int
    lake: LakeConfig | None = None
    erasure_window_schedule: str = "rate(1 hour)"
    adopt: AdoptConfig | None = None

    @classmethod
    def from_context(cls, get: Callable[[str], object]) -> LetheConfig:
        """Build from a context getter (``node.try_get_context``); defaults fill the gaps."""

        def value(key: str) -> object:
            got = get(key)
            return c.CONTEXT_DEFAULTS[key] if got is None else got

        def typed(key: str, parse: Callable[[object], _T]) -> _T:
            raw = value(key)
            try:
                return parse(raw)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"context {key}={raw!r}: {e}") from e

        config = cls(
            table_prefix=typed(c.CTX_TABLE_PREFIX, _str).strip("/"),
            encryption=cast(Encryption, typed(c.CTX_ENCRYPTION, _str).lower()),
            versioned=typed(c.CTX_VERSIONED, _bool),
            noncurrent_version_days=typed(c.CTX_NONCURRENT_VERSION_DAYS, _int),
            access_logs=typed(c.CTX_ACCESS_LOGS, _bool),
            access_log_retention_days=typed(c.CTX_ACCESS_LOG_DAYS, _int),
            incoming_expiration_days=typed(c.CTX_INCOMING_EXPIRATION_DAYS, _int),
            log_level=typed(c.CTX_LOG_LEVEL, _str).upper(),
            log_retention_days=typed(c.CTX_LOG_RETENTION_DAYS, _int),
            splice_concurrency=typed(c.CTX_SPLICE_CONCURRENCY, _int),
            splice_max_bytes=typed(c.CTX_SPLICE_MAX_BYTES, _int),
            direct_register_max_bytes=typed(c.CTX_DIRECT_REGISTER_MAX_BYTES, _int),
            gc_schedule=typed(c.CTX_GC_SCHEDULE, _str),
            gc_retention=typed(c.CTX_GC_RETENTION, _str),
            gc_grace=typed(c.CTX_GC_GRACE, _str),
            gc_dry_run=typed(c.CTX_GC_DRY_RUN, _bool),
            gc_map_concurrency=typed(c.CTX_GC_MAP_CONCURRENCY, _int),
            emr_max_vcpu=typed(c.CTX_EMR_MAX_VCPU, _int),
            emr_idle_timeout_minutes=typed(c.CTX_EMR_IDLE_MINUTES, _int),
            alarm_email=typed(c.CTX_ALARM_EMAIL, _str).strip(),
            erasure_alarm_days=typed(c.CTX_ERASURE_ALARM_DAYS, _int),
            lake=typed(c.CTX_LAKE, LakeConfig.parse),
            erasure_window_schedule=typed(c.CTX_ERASURE_WINDOW_SCHEDULE, _str),
            adopt=typed(c.CTX_ADOPT, AdoptConfig.parse),
        )
        config.validate()
        return config

    @classmethod
    def from_mapping(cls, context: Mapping[str, object]) -> LetheConfig:
        """Build from a plain mapping (tests)."""
        return cls.from_context(context.get)

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first unusable value."""
        checks: list[tuple[bool, str, object, str]] = [
            (
                bool(_PREFIX_RE.match(self.table_prefix))
                and not self.table_prefix.startswith(c.INCOMING_PREFIX.rstrip("/")),
                c.CTX_TABLE_PREFIX,
                self.table_prefix,
                "lower-case path segments [a-z0-9._-] without leading or trailing slash, "
                f"not under the upload prefix {c.INCOMING_PREFIX}",
            ),
            (self.encryption in ("s3", "kms"), c.CTX_ENCRYPTION, self.encryption, '"s3" or "kms"'),
            (
                self.noncurrent_version_days >= 1,
                c.CTX_NONCURRENT_VERSION_DAYS,
                self.noncurrent_version_days,
                ">= 1",
            ),
            (
                self.access_log_retention_days >= 1,
                c.CTX_ACCESS_LOG_DAYS,
                self.access_log_retention_days,
                ">= 1",
            ),
            (
                self.incoming_expiration_days >= 1,
                c.CTX_INCOMING_EXPIRATION_DAYS,
                self.incoming_expiration_days,
                ">= 1",
            ),
            (
                self.log_level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                c.CTX_LOG_LEVEL,
                self.log_level,
                "a Python log level name",
            ),
            (
                self.splice_concurrency == 0 or self.splice_concurrency >= 2,
                c.CTX_SPLICE_CONCURRENCY,
                self.splice_concurrency,
                "0 (unbounded) or >= 2 (an SQS event source runs at least 2 pollers)",
            ),
            (
                self.splice_max_bytes >= 5 * 1024 * 1024,
                c.CTX_SPLICE_MAX_BYTES,
                self.splice_max_bytes,
                ">= 5 MiB",
            ),
            (
                self.direct_register_max_bytes >= 0,
                c.CTX_DIRECT_REGISTER_MAX_BYTES,
                self.direct_register_max_bytes,
                ">= 0",
            ),
            (
                bool(_SCHEDULE_RE.match(self.gc_schedule)),
                c.CTX_GC_SCHEDULE,
                self.gc_schedule,
                "an EventBridge rate(...) or cron(...) expression",
            ),
            (
                bool(_DURATION_RE.match(self.gc_retention)),
                c.CTX_GC_RETENTION,
                self.gc_retention,
                "like 30d, 720h or 1000v",
            ),
            (bool(_DURATION_RE.match(self.gc_grace)), c.CTX_GC_GRACE, self.gc_grace, "like 7d"),
            (
                1 <= self.gc_map_concurrency <= 40,
                c.CTX_GC_MAP_CONCURRENCY,
                self.gc_map_concurrency,
                "1..40",
            ),
            (self.emr_max_vcpu >= 4, c.CTX_EMR_MAX_VCPU, self.emr_max_vcpu, ">= 4"),
            (
                self.emr_idle_timeout_minutes >= 1,
                c.CTX_EMR_IDLE_MINUTES,
                self.emr_idle_timeout_minutes,
                ">= 1",
            ),
            (
                bool(_SCHEDULE_RE.match(self.erasure_window_schedule)),
                c.CTX_ERASURE_WINDOW_SCHEDULE,
                self.erasure_window_schedule,
                "an EventBridge rate(...) or cron(...) expression",
            ),
            (
                self.erasure_alarm_days >= 1,
                c.CTX_ERASURE_ALARM_DAYS,
                self.erasure_alarm_days,
                ">= 1",
            ),
        ]
        for p in self.adopt.prefixes if self.adopt else ():
            if (
                p.prefix.startswith(c.INCOMING_PREFIX.rstrip("/"))
                or f"{p.prefix}/".startswith(f"{self.table_prefix}/")
                or f"{self.table_prefix}/".startswith(f"{p.prefix}/")
            ):
                checks.append(
                    (
                        False,
                        c.CTX_ADOPT,
                        p.uri,
                        "a prefix apart from the table and the upload prefix (adopt uploads "
                        'in place with "inPlace": true)',
                    )
                )
        for ok, key, got, expected in checks:
            if not ok:
                raise ConfigError(f"context {key}={got!r}: expected {expected}")

    @property
    def kms(self) -> bool:
        return self.encryption == "kms"


def _str(raw: object) -> str:
    if not isinstance(raw, str):
        raise TypeError("expected a string")
    return raw


def _bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.lower() in ("true", "1", "yes")
    raise ValueError("expected true or false")


def _int(raw: object) -> int:
    if isinstance(raw, bool):
        raise TypeError("expected an integer")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    raise ValueError("expected an integer")
