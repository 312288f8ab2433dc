"""Fast checks of the infra pieces that need no synth: settings, handler names, layer rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from infra import constants as c
from infra.config import ConfigError, LetheConfig
from layers import build as layer_build

# ------------------------------------------------------------------------------- handlers


@pytest.mark.parametrize("handler", c.ALL_HANDLERS)
def test_handler_package_is_not_shadowed_by_the_standard_library(handler: str) -> None:
    """Lambda imports ``a.b`` for handler ``a.b.f``; a stdlib ``a`` would win over functions/a."""
    top = handler.split(".")[0]
    assert top not in sys.stdlib_module_names, (
        f"{handler}: the top-level package {top!r} is a standard-library module, so "
        f"`import {handler.rpartition('.')[0]}` fails (\"'{top}' is not a package\"); rename "
        f"functions/{top}/ and the handler constant in infra/constants.py"
    )


def test_handler_names_are_module_paths_with_a_function() -> None:
    for handler in c.ALL_HANDLERS:
        parts = handler.split(".")
        assert len(parts) >= 2 and all(p.isidentifier() for p in parts), handler
    assert len(set(c.ALL_HANDLERS)) == len(c.ALL_HANDLERS)


# ------------------------------------------------------------------------------- config


def test_defaults_are_valid_and_documented() -> None:
    config = LetheConfig.from_mapping({})
    assert config.encryption == "s3" and not config.versioned and config.access_logs
    assert config.gc_schedule == "rate(1 day)"
    assert config.table_prefix == c.CONTEXT_DEFAULTS[c.CTX_TABLE_PREFIX]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    for key in c.CONTEXT_DEFAULTS:
        assert f"`{key}`" in docs, f"{key} is not documented in docs/deploy.md"


def test_command_line_strings_are_parsed() -> None:
    config = LetheConfig.from_mapping(
        {
            c.CTX_VERSIONED: "true",
            c.CTX_ACCESS_LOGS: "false",
            c.CTX_SPLICE_CONCURRENCY: "4",
            c.CTX_ENCRYPTION: "KMS",
            c.CTX_TABLE_PREFIX: "/events/",
        }
    )
    assert config.versioned and not config.access_logs and config.kms
    assert config.splice_concurrency == 4
    assert config.table_prefix == "events"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (c.CTX_ENCRYPTION, "aes"),
        (c.CTX_VERSIONED, "maybe"),
        (c.CTX_SPLICE_CONCURRENCY, "1"),
        (c.CTX_SPLICE_CONCURRENCY, "two"),
        (c.CTX_TABLE_PREFIX, "Tables/Main"),
        (c.CTX_TABLE_PREFIX, "incoming/t"),
        (c.CTX_GC_SCHEDULE, "every day"),
        (c.CTX_GC_RETENTION, "30 days"),
        (c.CTX_GC_MAP_CONCURRENCY, 0),
        (c.CTX_SPLICE_MAX_BYTES, 1024),
    ],
)
def test_bad_values_fail_loudly(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        LetheConfig.from_mapping({key: value})


# ------------------------------------------------------------------------------- layer rules


def _touch(path: Path, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_strip_keeps_sonames_and_drops_what_lambda_never_loads(tmp_path: Path) -> None:
    site = tmp_path / "python"
    keep = [
        "pyarrow/__init__.py",
        "pyarrow/libarrow.so.2600",
        "pyarrow/libarrow_python.so.2600",
        "pyarrow/lib.cpython-312-aarch64-linux-gnu.so",
        "pyarrow/libarrow_substrait.so.2600",
        "pydantic/main.py",
        "numpy.libs/libopenblas64_p-r0-1234.3.29.so",
    ]
    drop = [
        "pyarrow/libarrow_python.so",
        "pyarrow/libarrow_python.so.2600.1.0",
        "pyarrow/include/arrow/api.h",
        "pyarrow/src/arrow/python/api.h",
        "pyarrow/tests/test_array.py",
        "pyarrow/lib.pyx",
        "pyarrow/lib.pxd",
        "pyarrow/_flight.cpython-312-aarch64-linux-gnu.so",
        "pyarrow/libarrow_flight.so.2600",
        "pydantic/__pycache__/main.cpython-312.pyc",
        "boto3-stubs/s3.pyi",
    ]
    for rel in keep + drop:
        _touch(site / rel)
    layer_build.strip(site)
    for rel in keep:
        assert (site / rel).exists(), rel
    for rel in drop:
        assert not (site / rel).exists(), rel


def test_binary_checks_refuse_other_interpreters_and_newer_glibc(tmp_path: Path) -> None:
    target = layer_build.LAMBDA_TARGET
    good = tmp_path / "ok"
    _touch(good / "pkg" / f"mod{target.extension_suffix}", b"\x7fELF GLIBC_2.17 GLIBC_2.28")
    layer_build.check_binaries(good, target)

    wrong_abi = tmp_path / "abi"
    _touch(wrong_abi / "pkg" / "mod.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")
    with pytest.raises(layer_build.LayerBuildError, match="not built for"):
        layer_build.check_binaries(wrong_abi, target)

    too_new = tmp_path / "glibc"
    _touch(too_new / "pkg" / "libx.so.1", b"\x7fELF GLIBC_2.17 GLIBC_2.99")
    with pytest.raises(layer_build.LayerBuildError, match=r"GLIBC_2\.99"):
        layer_build.check_binaries(too_new, target)


def test_size_check_fails_clearly_over_the_quota() -> None:
    info = layer_build.LayerInfo(
        input_hash="x", unzipped_bytes=c.LAMBDA_UNZIPPED_LIMIT_BYTES, zipped_bytes=1, file_count=1
    )
    small = layer_build.LayerInfo(input_hash="y", unzipped_bytes=1, zipped_bytes=1, file_count=1)
    report = layer_build.LayerReport(
        python_version="3.12", platform="p", deps=info, lib=small, functions_bytes=0
    )
    with pytest.raises(layer_build.LayerBuildError, match="250 MB"):
        layer_build.check_size(report)
    assert layer_build.LayerReport.from_json(report.to_json()) == report


def test_zip_is_reproducible(tmp_path: Path) -> None:
    root = tmp_path / "layer"
    _touch(root / "python" / "a.py", b"print(1)")
    _touch(root / "python" / "pkg" / "b.py", b"print(2)")
    first = tmp_path / "1.zip"
    second = tmp_path / "2.zip"
    layer_build.write_zip(root, first)
    (root / "python" / "a.py").touch()  # newer mtime, same bytes
    layer_build.write_zip(root, second)
    assert first.read_bytes() == second.read_bytes()


# ------------------------------------------------------------------------------- adopt


def test_config_parses_and_refuses_the_adopt_key() -> None:
    cfg = LetheConfig.from_mapping(
        {
            c.CTX_ADOPT: json.dumps(
                {
                    "prefixes": ["s3://raw-bkt/raw/events", "s3://landing-bkt/firehose/clicks/"],
                    "inPlace": True,
                }
            )
        }
    ).adopt
    assert cfg is not None and cfg.in_place and cfg.ownership  # ownership: on by default
    assert [p.uri for p in cfg.prefixes] == [
        "s3://raw-bkt/raw/events",
        "s3://landing-bkt/firehose/clicks",
    ]
    assert LetheConfig.from_mapping({c.CTX_ADOPT: {"inPlace": "true"}}).adopt is not None
    assert LetheConfig.from_mapping({}).adopt is None  # absent: nothing adopted
    for bad in (
        {"prefixes": []},  # nothing adopted
        {"prefixes": ["s3://raw-bkt/a", "s3://raw-bkt/a/b"]},  # overlap
        {"prefixes": ["raw-bkt/a"]},
        {"prefixes": ["s3://raw-bkt/incoming/x"]},  # the upload prefix: use inPlace
        {"prefixes": ["s3://raw-bkt/tables/main"]},  # the table itself
        {"prefixes": ["s3://raw-bkt/a"], "ownership": "maybe"},
        {"prefixes": ["s3://raw-bkt/a"], "extra": 1},
    ):
        with pytest.raises(ConfigError, match=c.CTX_ADOPT):
            LetheConfig.from_mapping({c.CTX_ADOPT: json.dumps(bad)})
