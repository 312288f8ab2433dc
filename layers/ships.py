"""What of this repository ships: one rule for every artifact that carries our Python code.

* **the library**: every file of ``shared/lethe`` as ``lethe/...``, without caches
  (``__pycache__/``, ``*.pyc``, ``*.pyo``) and test suites (``tests/``);
* **the Spark job modules**: ``spark_jobs/*.py`` as ``spark_jobs/...``, plus an empty
  ``spark_jobs/__init__.py`` so that ``spark_jobs`` imports as a package on every node.

Nothing from ``devtools/``, ``tests/``, ``bench/``, ``infra/`` or ``layers/`` ships.

Who uses it:

* the Lambda library layer: :func:`layers.build.assemble_lib` copies :func:`library_files`;
* the EMR Serverless job archive: ``spark_jobs/package.sh`` (step 3) runs
  ``python layers/ships.py emr SITE`` (:func:`emr_files`);
* the wheel: hatchling packs ``shared/lethe`` (``[tool.hatch.build.targets.wheel]`` in
  ``pyproject.toml``); ``tests/layers/test_ships.py`` checks that it, the layer and the
  archive hold exactly :func:`library_files`.

Standard library only, so that ``package.sh`` can run it with any Python 3.

Usage (from anywhere)::

    python layers/ships.py list library       # what ships, one artifact path a line
    python layers/ships.py emr SITE           # copy the library and the jobs into SITE
    python layers/ships.py library SITE       # copy the library into SITE
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_SOURCE = ROOT / "shared" / "lethe"
SPARK_JOBS_SOURCE = ROOT / "spark_jobs"
LIBRARY_PACKAGE = "lethe"
SPARK_JOBS_PACKAGE = "spark_jobs"
SKIPPED_DIRS = frozenset({"__pycache__", "tests"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")

# {path in the artifact: the source file, or the bytes of a file written there}
Files = Mapping[str, Path | bytes]


def ships(rel: Path) -> bool:
    """Whether a file at ``rel`` (relative to a shipped package's source) ships."""
    return not (SKIPPED_DIRS & set(rel.parts) or rel.suffix in SKIPPED_SUFFIXES)


def library_files() -> dict[str, Path]:
    """The library, ``{"lethe/<path>": source}``, sorted."""
    out: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(LIBRARY_SOURCE):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(LIBRARY_SOURCE)
            if ships(rel):
                out[f"{LIBRARY_PACKAGE}/{rel.as_posix()}"] = path
    return out


def spark_job_files() -> dict[str, Path | bytes]:
    """The job modules, ``{"spark_jobs/<name>.py": source}``, and their package marker."""
    out: dict[str, Path | bytes] = {
        f"{SPARK_JOBS_PACKAGE}/{p.name}": p for p in sorted(SPARK_JOBS_SOURCE.glob("*.py"))
    }
    out.setdefault(f"{SPARK_JOBS_PACKAGE}/__init__.py", b"")
    return out


def emr_files() -> dict[str, Path | bytes]:
    """What the EMR job archive holds of ours (beside the locked dependencies)."""
    return {**library_files(), **spark_job_files()}


def copy_into(site: Path, files: Files) -> None:
    """Write ``files`` under ``site`` (created if needed)."""
    for dest, src in files.items():
        target = site / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            target.write_bytes(src)
        else:
            shutil.copy2(src, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python layers/ships.py", description="What of the repository ships."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="print the artifact paths, one a line")
    listing.add_argument("what", choices=["library", "emr"])
    for name, what in (("library", "the library"), ("emr", "the library and the Spark jobs")):
        copy = sub.add_parser(name, help=f"copy {what} into SITE")
        copy.add_argument("site", type=Path)
    args = parser.parse_args(argv)
    if args.command == "list":
        files: Files = library_files() if args.what == "library" else emr_files()
        print("\n".join(files))
    else:
        copy_into(args.site, library_files() if args.command == "library" else emr_files())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
