"""Build the Lambda layers (locked runtime dependencies, and the ``lethe`` library) without Docker.

Usage (from the repository root)::

    python -m layers.build            # cached: does nothing when the inputs are unchanged
    python layers/build.py --force    # rebuild unconditionally
    python -m layers.build --check    # fail unless up-to-date layers exist (CI guard)

Two layers, so that a change to ``shared/lethe`` re-zips kilobytes, not 70 MB of wheels:

* ``layers/build/deps/python``: the project's runtime dependencies, exactly as locked.

  1. ``uv export --frozen --no-default-groups --no-emit-project --extra lambda`` writes them,
     pinned and hashed, from ``uv.lock``: the library's dependencies plus its ``lambda`` extra
     (what only the functions need: Powertools, pydantic-settings). ``--no-dev`` alone is not
     enough: the project's ``default-groups`` would pull pyspark and aws-cdk-lib into the layer.
  2. ``uv pip install --python-platform <LAMBDA_WHEEL_PLATFORM> --python-version <py>
     --only-binary :all: --no-deps --require-hashes --target …`` fetches the wheels built for
     Lambda's OS and architecture (no compiler, no container).
  3. Files a Lambda never needs are stripped: ``__pycache__``, ``*.pyc``, ``*.pyi``, test
     suites, Cython sources and C++ headers, pyarrow's Arrow Flight (nothing links it but its
     own Python module) and the development copies of versioned shared objects (wheels cannot
     hold symlinks, so ``libX.so`` and ``libX.so.N.M.P`` are byte copies of ``libX.so.N``, the
     SONAME the extension modules load).
  4. Checks: every extension module is built for the target interpreter and no shared object
     needs a newer glibc than the runtime's.

* ``layers/build/lethe/python/lethe``: the library as :mod:`layers.ships` decides (a copy of
  ``shared/lethe`` without caches and tests; the EMR job archive ships the same files).

Each tree is also written as a reproducible zip (``layers/build/deps.zip``, ``lethe.zip``):
those are the stack's layer assets. Finally the unzipped size of both layers plus ``functions/`` is compared with Lambda's 250 MB
quota (a clear error when exceeded) and ``layers/build/report.json`` records input hashes and
sizes. Each tree is built in a staging directory and renamed into place.

boto3/botocore are kept although the runtime has them: the commit protocol needs S3
conditional writes (``If-None-Match``/``If-Match`` on PutObject), so the layer pins the locked
botocore instead of whatever version the runtime image carries.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python layers/build.py` puts layers/ on sys.path, not ROOT
    sys.path.insert(0, str(ROOT))

from infra import constants as c  # noqa: E402  (needs ROOT on sys.path)
from layers import ships  # noqa: E402

BUILD_DIR = ROOT / c.LAYER_BUILD_DIR
DEPS_DIR = ROOT / c.LAYER_DEPS_DIR
LIB_DIR = ROOT / c.LAYER_LIB_DIR
DEPS_ZIP = ROOT / c.LAYER_DEPS_ZIP
LIB_ZIP = ROOT / c.LAYER_LIB_ZIP
REPORT_FILE = ROOT / c.LAYER_REPORT_FILE
FUNCTIONS_DIR = ROOT / c.FUNCTIONS_DIR
LIBRARY_SOURCE = ships.LIBRARY_SOURCE
LAMBDA_EXTRA = "lambda"  # pyproject's optional dependencies of the functions (lethe[lambda])
# Bump when the strip rules or the layout change, to invalidate cached builds.
BUILD_FORMAT = 6

# Removed wherever they appear (directory names / file suffixes).
STRIP_DIRS = frozenset({"__pycache__", "tests"})
STRIP_SUFFIXES = (".pyc", ".pyo", ".pyi", ".pyx", ".pxd", ".pxi")
# pyarrow parts no Lambda of ours loads. Paths relative to site-packages; globs allowed.
# Kept on purpose: libarrow_substrait/_acero/_dataset (pyarrow.lib links them), libarrow_s3.
STRIP_GLOBS = (
    "pyarrow/include",
    "pyarrow/src",
    "pyarrow/_pyarrow_cpp_tests*",
    "pyarrow/conftest.py",
    "pyarrow/_flight*",
    "pyarrow/flight.py",
    "pyarrow/libarrow_flight.so*",
    "pyarrow/libarrow_python_flight.so*",
    "pyarrow/*gandiva*",
    "pyarrow/libgandiva.so*",
)
_GLIBC_RE = re.compile(rb"GLIBC_(\d+)\.(\d+)")
_VERSIONED_SO_RE = re.compile(r"^(?P<stem>lib[\w\-+]+\.so)\.(?P<major>\d+)(?P<rest>(\.\d+)*)$")
MiB = 1024 * 1024
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class LayerBuildError(RuntimeError):
    """A layer cannot be built or the code would violate a Lambda limit."""


@dataclass(frozen=True, slots=True)
class Target:
    """The interpreter and OS a layer is assembled for."""

    python_version: str  # "3.12"
    wheel_platform: str  # uv --python-platform, e.g. "aarch64-manylinux_2_34"
    extension_suffix: str  # what every extension module's name must end with
    glibc: str  # newest glibc symbol version a shared object may need


LAMBDA_TARGET = Target(
    python_version=c.LAMBDA_PYTHON_VERSION,
    wheel_platform=c.LAMBDA_WHEEL_PLATFORM,
    extension_suffix=c.LAMBDA_EXTENSION_SUFFIX,
    glibc=c.LAMBDA_GLIBC_VERSION,
)


@dataclass(frozen=True, slots=True)
class LayerInfo:
    """One built layer: input hash and apparent sizes in bytes (as Lambda counts them)."""

    input_hash: str
    unzipped_bytes: int
    zipped_bytes: int
    file_count: int
    largest: dict[str, int] = field(default_factory=dict)
    packages: list[str] = field(default_factory=list)
    build_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class LayerReport:
    """Both layers plus the function code: what Lambda adds up against its quota."""

    python_version: str
    platform: str
    deps: LayerInfo
    lib: LayerInfo
    functions_bytes: int

    @property
    def total_unzipped_bytes(self) -> int:
        """Function code plus layers: the figure Lambda compares with its 250 MB quota."""
        return self.deps.unzipped_bytes + self.lib.unzipped_bytes + self.functions_bytes

    def summary(self) -> str:
        top = ", ".join(f"{k} {v / MiB:.1f}" for k, v in list(self.deps.largest.items())[:6])
        return (
            f"deps layer {self.deps.unzipped_bytes / MiB:.1f} MiB unzipped "
            f"({self.deps.file_count} files, {self.deps.zipped_bytes / MiB:.1f} MiB zipped); "
            f"lethe layer {self.lib.unzipped_bytes / 1024:.0f} KiB "
            f"({self.lib.zipped_bytes / 1024:.0f} KiB zipped); "
            f"functions {self.functions_bytes / 1024:.0f} KiB; "
            f"total {self.total_unzipped_bytes / MiB:.1f} MiB of "
            f"{c.LAMBDA_UNZIPPED_LIMIT_BYTES / MiB:.0f} MiB. Largest (MiB): {top}"
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LayerReport:
        data = json.loads(text)
        return cls(
            python_version=data["python_version"],
            platform=data["platform"],
            deps=LayerInfo(**data["deps"]),
            lib=LayerInfo(**data["lib"]),
            functions_bytes=data["functions_bytes"],
        )


# ---------------------------------------------------------------------------- file helpers


def _files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _is_stripped(rel: Path) -> bool:
    return any(part in STRIP_DIRS for part in rel.parts) or rel.suffix in STRIP_SUFFIXES


def tree_bytes(root: Path, *, skip_stripped: bool = False) -> int:
    """Sum of apparent file sizes under ``root`` (hard links counted per path, as in a zip)."""
    if not root.is_dir():
        return 0
    return sum(
        p.lstat().st_size
        for p in _files(root)
        if not (skip_stripped and _is_stripped(p.relative_to(root)))
    )


def write_zip(layer_root: Path, dest: Path) -> int:
    """Zip ``layer_root`` (which holds ``python/``) reproducibly; return the zip's size.

    Fixed timestamps and sorted entries: unchanged inputs give a byte-identical zip, hence
    the same CDK asset hash and no re-upload. CDK uses the zip as is (no re-zipping of
    thousands of files at synth or deploy time).
    """
    tmp = dest.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for path in _files(layer_root):
            info = zipfile.ZipInfo(str(path.relative_to(layer_root)), date_time=ZIP_EPOCH)
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with path.open("rb") as src, zf.open(info, "w") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    tmp.replace(dest)
    return dest.stat().st_size


def _largest(site: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for top in site.iterdir():
        name = top.name.split(".")[0] if top.is_file() else top.name
        sizes[name] = sizes.get(name, 0) + (
            tree_bytes(top) if top.is_dir() else top.lstat().st_size
        )
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:12])


def _info(
    layer_root: Path, zip_path: Path, digest: str, started: float, *, packages: list[str]
) -> LayerInfo:
    site = layer_root / "python"
    return LayerInfo(
        input_hash=digest,
        unzipped_bytes=tree_bytes(layer_root),
        zipped_bytes=write_zip(layer_root, zip_path),
        file_count=sum(1 for _ in _files(layer_root)),
        largest=_largest(site),
        packages=packages,
        build_seconds=round(time.monotonic() - started, 1),
    )


# ---------------------------------------------------------------------------- hashing


def deps_input_hash(target: Target = LAMBDA_TARGET) -> str:
    """Hash of what the dependency layer is built from: lock, project, this script, target."""
    h = hashlib.sha256(f"format={BUILD_FORMAT}|{target!r}".encode())
    for path in (ROOT / "uv.lock", ROOT / "pyproject.toml", Path(__file__).resolve()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def lib_input_hash() -> str:
    """Hash of the ``lethe`` sources that go into the library layer (:mod:`layers.ships`)."""
    h = hashlib.sha256(f"format={BUILD_FORMAT}".encode())
    for dest, path in ships.library_files().items():
        h.update(dest.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------- steps


def _uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(found).exists():
        raise LayerBuildError("uv not found: run `make setup` (it installs uv) or put uv on PATH")
    return found


def _run(cmd: list[str], *, what: str) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LayerBuildError(f"{what} failed:\n$ {' '.join(cmd)}\n{proc.stderr.strip()}")


def export_requirements(dest: Path) -> None:
    """Write the locked runtime dependencies of the functions (the library's and its
    ``lambda`` extra's, with hashes) as a requirements file."""
    _run(
        [
            _uv(),
            "export",
            "--frozen",
            "--no-default-groups",
            "--no-emit-project",
            "--extra",
            LAMBDA_EXTRA,
            "--format",
            "requirements-txt",
            "--output-file",
            str(dest),
        ],
        what="uv export",
    )


def install(requirements: Path, site: Path, target: Target) -> None:
    """Install exactly the locked wheels for ``target`` into ``site`` (no resolution, no build)."""
    _run(
        [
            _uv(),
            "pip",
            "install",
            "--python-platform",
            target.wheel_platform,
            "--python-version",
            target.python_version,
            "--only-binary",
            ":all:",
            "--no-deps",
            "--require-hashes",
            "--link-mode",
            "copy",
            "--no-compile",
            "--target",
            str(site),
            "-r",
            str(requirements),
        ],
        what=f"uv pip install for {target.wheel_platform} / Python {target.python_version}",
    )


def strip(site: Path) -> None:
    """Remove what a Lambda never loads (see the module docstring)."""
    for dirpath, dirnames, filenames in os.walk(site, topdown=True):
        for name in list(dirnames):
            if name in STRIP_DIRS:
                shutil.rmtree(Path(dirpath) / name)
                dirnames.remove(name)
        for name in filenames:
            if name.endswith(STRIP_SUFFIXES):
                (Path(dirpath) / name).unlink()
    for pattern in STRIP_GLOBS:
        for path in site.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    # Development copies of versioned shared objects: keep only libX.so.N (the SONAME).
    for path in sorted(site.rglob("lib*.so*")):
        if not path.is_file():
            continue
        m = _VERSIONED_SO_RE.match(path.name)
        soname = path.parent / f"{m.group('stem')}.{m.group('major')}" if m else None
        if m and m.group("rest") and soname is not None and soname.exists():
            path.unlink()  # libX.so.N.M.P next to libX.so.N
        elif path.name.endswith(".so") and any(path.parent.glob(f"{path.name}.[0-9]*")):
            path.unlink()  # libX.so next to libX.so.N


def check_binaries(site: Path, target: Target) -> None:
    """Refuse extension modules of another interpreter and objects needing a newer glibc."""
    want = tuple(int(x) for x in target.glibc.split("."))
    too_new: list[str] = []
    wrong_abi: list[str] = []
    for path in _files(site):
        name = path.name
        if not (name.endswith(".so") or ".so." in name):
            continue
        if ".cpython-" in name and not name.endswith(target.extension_suffix):
            wrong_abi.append(str(path.relative_to(site)))
        needed = {(int(a), int(b)) for a, b in _GLIBC_RE.findall(path.read_bytes())}
        if needed and max(needed) > want:
            newest = ".".join(map(str, max(needed)))
            too_new.append(f"{path.relative_to(site)} needs GLIBC_{newest}")
    if wrong_abi:
        raise LayerBuildError(
            f"extension modules not built for {target.extension_suffix}: {wrong_abi[:5]}"
        )
    if too_new:
        raise LayerBuildError(
            f"shared objects need a newer glibc than the Python {target.python_version} "
            f"runtime's {target.glibc}: {too_new[:5]}"
        )


def assemble_deps(site: Path, target: Target, *, requirements: Path) -> list[str]:
    """Export, install for ``target``, strip and check the dependencies into ``site``.

    ``build()`` calls it for Lambda; the tests also call it for the host interpreter to prove
    that the stripped tree still imports (the aarch64 tree cannot be executed here).

    Returns:
        The installed distributions as ``name-version``.
    """
    export_requirements(requirements)
    site.mkdir(parents=True)
    install(requirements, site, target)
    strip(site)
    check_binaries(site, target)
    return sorted(p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info"))


def assemble_lib(site: Path) -> None:
    """Copy the library into ``site/lethe``: :func:`layers.ships.library_files`, the same
    files the EMR job archive ships. The library holds only what runs: the local runtime and
    the demo live in ``devtools/``, outside it."""
    site.mkdir(parents=True)
    ships.copy_into(site, ships.library_files())


# ---------------------------------------------------------------------------- driver


def read_report() -> LayerReport | None:
    """The report of the current build, or None when there is none (or it is unreadable)."""
    try:
        return LayerReport.from_json(REPORT_FILE.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _deps_current(report: LayerReport | None) -> bool:
    return (
        report is not None
        and report.deps.input_hash == deps_input_hash()
        and (DEPS_DIR / "python").is_dir()
        and DEPS_ZIP.is_file()
    )


def _lib_current(report: LayerReport | None) -> bool:
    return (
        report is not None
        and report.lib.input_hash == lib_input_hash()
        and (LIB_DIR / "python" / "lethe").is_dir()
        and LIB_ZIP.is_file()
    )


def is_up_to_date() -> bool:
    report = read_report()
    return _deps_current(report) and _lib_current(report)


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with (BUILD_DIR / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # two pytest-xdist workers may ask at once
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _replace(staged: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    staged.rename(final)


def build(*, force: bool = False) -> LayerReport:
    """Bring ``layers/build/deps`` and ``layers/build/lethe`` up to date; return the report.

    Each layer is rebuilt only when its inputs changed (or with ``force``).

    Raises:
        LayerBuildError: uv fails, a binary does not fit the runtime, or the size quota is hit.
    """
    with _lock():
        old = read_report()
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=BUILD_DIR))
        try:
            if force or old is None or not _deps_current(old):
                started = time.monotonic()
                digest = deps_input_hash()
                requirements = staging / "requirements.txt"
                root = staging / "deps"
                packages = assemble_deps(root / "python", LAMBDA_TARGET, requirements=requirements)
                deps = _info(root, DEPS_ZIP, digest, started, packages=packages)
                _replace(root, DEPS_DIR)
                shutil.copyfile(requirements, BUILD_DIR / "requirements.txt")
            else:
                deps = old.deps
            if force or old is None or not _lib_current(old):
                started = time.monotonic()
                digest = lib_input_hash()
                root = staging / "lethe"
                assemble_lib(root / "python")
                lib = _info(root, LIB_ZIP, digest, started, packages=["lethe"])
                _replace(root, LIB_DIR)
            else:
                lib = old.lib
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        report = LayerReport(
            python_version=LAMBDA_TARGET.python_version,
            platform=LAMBDA_TARGET.wheel_platform,
            deps=deps,
            lib=lib,
            functions_bytes=tree_bytes(FUNCTIONS_DIR, skip_stripped=True),
        )
        if report != old:
            REPORT_FILE.write_text(report.to_json())
        check_size(report)
        return report


def verify() -> LayerReport:
    """Under the build lock: bring the layers up to date, then re-measure the trees and zips
    and compare them with the report (so a stale or hand-edited build is caught).

    Raises:
        LayerBuildError: the built trees do not match the report, or the quota is exceeded.
    """
    build()
    with _lock():
        report = read_report()
        if report is None:
            raise LayerBuildError("no layer report after building")
        measured = {
            "deps unzipped": (tree_bytes(DEPS_DIR), report.deps.unzipped_bytes),
            "lethe unzipped": (tree_bytes(LIB_DIR), report.lib.unzipped_bytes),
            "deps zip": (DEPS_ZIP.stat().st_size, report.deps.zipped_bytes),
            "lethe zip": (LIB_ZIP.stat().st_size, report.lib.zipped_bytes),
        }
        wrong = {k: v for k, v in measured.items() if v[0] != v[1]}
        if wrong:
            raise LayerBuildError(f"layers/build does not match its report: {wrong}")
        current = LayerReport(
            python_version=report.python_version,
            platform=report.platform,
            deps=report.deps,
            lib=report.lib,
            functions_bytes=tree_bytes(FUNCTIONS_DIR, skip_stripped=True),
        )
        check_size(current)
        return current


def check_size(report: LayerReport) -> None:
    """Fail clearly when function code + layers exceed Lambda's unzipped quota."""
    if report.total_unzipped_bytes > c.LAMBDA_UNZIPPED_LIMIT_BYTES:
        raise LayerBuildError(
            "Lambda code + layers exceed the 250 MB unzipped quota: "
            + report.summary()
            + ". Trim more in layers/build.py (STRIP_GLOBS) or split the dependency layer."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m layers.build", description="Build Lethe's Lambda layers."
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument(
        "--check", action="store_true", help="only verify that up-to-date layers exist"
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            report = read_report()
            if report is None or not is_up_to_date():
                print("layers are missing or stale: run `make layer`", file=sys.stderr)
                return 1
            check_size(report)
        else:
            before = read_report()
            report = build(force=args.force)
            print("layers up to date" if report == before else "layers built")
    except LayerBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
