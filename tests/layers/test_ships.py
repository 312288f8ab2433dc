"""What ships (``layers/ships.py``), checked on the built artifacts: the wheel, the Lambda
library layer and the EMR job archive each hold the library exactly (every module of
``shared/lethe``, no cache, no test suite) and nothing of devtools/, tests/, bench/, infra/,
layers/ or functions/ (the functions ship as their own asset)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from email.parser import Parser
from pathlib import Path

import pytest

from layers import build as layer_build
from layers import ships

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "shared" / "lethe"
NOT_SHIPPED = {"devtools", "tests", "bench", "infra", "layers", "functions"}
LAMBDA_ONLY = {"aws_lambda_powertools", "pydantic_settings"}


def _library_modules() -> set[str]:
    """Every module of shared/lethe, as an artifact path."""
    return {
        f"lethe/{p.relative_to(LIB).as_posix()}"
        for p in LIB.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def check_artifact(names: Iterable[str], *, what: str) -> set[str]:
    """Assert the artifact's paths hold the library exactly; return its top-level names."""
    names = {n.removeprefix("./") for n in names}
    assert {n for n in names if n.startswith("lethe/")} == set(ships.library_files()), what
    assert _library_modules() <= names, what
    assert "lethe/py.typed" in names, what
    cached = [n for n in names if "__pycache__" in n.split("/") or n.endswith((".pyc", ".pyo"))]
    assert cached == [], what
    tops = {n.split("/")[0] for n in names if "/" in n}
    assert not tops & NOT_SHIPPED, what
    return tops


# --- the rule ----------------------------------------------------------------------------------


def test_the_rule_skips_caches_and_test_suites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "lethe"
    for rel in (
        "__init__.py",
        "py.typed",
        "parquet/__init__.py",
        "parquet/footer.py",
        "__pycache__/x.cpython-311.pyc",
        "parquet/__pycache__/footer.cpython-311.pyc",
        "tests/test_x.py",
        "stale.pyc",
        "old.pyo",
    ):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("")
    monkeypatch.setattr(ships, "LIBRARY_SOURCE", src)
    assert list(ships.library_files()) == [
        "lethe/__init__.py",
        "lethe/py.typed",
        "lethe/parquet/__init__.py",
        "lethe/parquet/footer.py",
    ]


def test_every_module_of_the_library_ships_and_only_the_library() -> None:
    assert _library_modules() <= set(ships.library_files())
    assert all(n.startswith("lethe/") for n in ships.library_files())
    jobs = {n for n in ships.emr_files() if not n.startswith("lethe/")}
    assert jobs == {
        *(f"spark_jobs/{p.name}" for p in (ROOT / "spark_jobs").glob("*.py")),
        "spark_jobs/__init__.py",
    }


# --- the artifacts -----------------------------------------------------------------------------


def test_the_emr_archive_step_copies_the_library_and_the_jobs(tmp_path: Path) -> None:
    """``package.sh`` step 3 alone (offline): what it copies is what the rule lists."""
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "layers" / "ships.py"), "emr", str(site)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,  # runs from anywhere
    )
    assert proc.returncode == 0, proc.stderr
    names = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    assert names == set(ships.emr_files())
    assert check_artifact(names, what="EMR site") == {"lethe", "spark_jobs"}
    assert (site / "spark_jobs" / "__init__.py").read_bytes() == b""
    for name, src in ships.library_files().items():
        assert (site / name).read_bytes() == src.read_bytes(), name


def test_the_library_layer_holds_the_library(tmp_path: Path) -> None:
    layer_build.assemble_lib(tmp_path / "python")
    names = {p.relative_to(tmp_path / "python").as_posix() for p in tmp_path.rglob("*")}
    files = {n for n in names if (tmp_path / "python" / n).is_file()}
    assert check_artifact(files, what="lethe layer") == {"lethe"}


def test_the_wheel_holds_the_library_and_powertools_is_an_extra(tmp_path: Path) -> None:
    proc = subprocess.run(
        [layer_build._uv(), "build", "--wheel", "--out-dir", str(tmp_path), "-q", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("lethe-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(zf.read(meta).decode())
    tops = check_artifact(names, what="wheel")
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lethe"}
    assert "lambda" in metadata.get_all("Provides-Extra", [])
    for req in metadata.get_all("Requires-Dist", []):
        if req.startswith(("aws-lambda-powertools", "pydantic-settings")):
            assert "extra == 'lambda'" in req.replace('"', "'"), req


@pytest.mark.slow
def test_the_built_layer_holds_the_library_and_the_lambda_extra() -> None:
    layer_build.build()
    with zipfile.ZipFile(layer_build.LIB_ZIP) as zf:
        names = [n.removeprefix("python/") for n in zf.namelist()]
    assert check_artifact(names, what="lethe.zip") == {"lethe"}
    deps = {p.name for p in (layer_build.DEPS_DIR / "python").iterdir()}
    assert deps >= LAMBDA_ONLY and not deps & NOT_SHIPPED and "lethe" not in deps


@pytest.mark.slow
def test_the_emr_archive_holds_the_library_the_jobs_and_no_lambda_extra(tmp_path: Path) -> None:
    """The whole ``package.sh`` (downloads EMR's wheels, or takes them from uv's cache)."""
    out = tmp_path / "lethe-pyspark.tar.gz"
    proc = subprocess.run(
        ["bash", str(ROOT / "spark_jobs" / "package.sh"), str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "UV": layer_build._uv(), "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    tops = check_artifact(names, what="EMR archive")
    assert {n.removeprefix("./") for n in names} >= set(ships.emr_files())
    assert {"lethe", "spark_jobs", "pyarrow", "pyroaring", "boto3"} <= tops
    assert not tops & (LAMBDA_ONLY | {"pyspark"})
