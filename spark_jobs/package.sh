#!/usr/bin/env bash
# Build the EMR Serverless job archive: the `lethe` library, the job modules and their locked
# runtime dependencies, as a relocatable site-packages tree in one tar.gz (no Docker, no venv).
#
#   spark_jobs/package.sh [OUTPUT]        # default: dist/lethe-pyspark.tar.gz
#
# Environment:
#   LETHE_EMR_PLATFORM  wheel platform of the EMR image   (default aarch64-manylinux_2_34:
#                       EMR Serverless on Graviton, Amazon Linux 2023 = glibc 2.34;
#                       use x86_64-manylinux_2_34 for an X86_64 application)
#   LETHE_EMR_PYTHON    Python version of the EMR image   (default 3.11, emr-spark-8.0.0)
#   UV                  the uv executable                 (default: uv on PATH)
#   PYTHON              any Python 3, to run layers/ships.py (default: python3 on PATH)
#
# The archive's root holds the packages (lethe/, spark_jobs/, pyarrow/, boto3/, ...). Jobs use it
# with (see docs/spark.md; the ingest trigger adds these flags itself):
#   --conf spark.archives=s3://<artifacts>/lethe-pyspark.tar.gz#lethe_env
#   --conf spark.emr-serverless.driverEnv.PYTHONPATH=./lethe_env
#   --conf spark.executorEnv.PYTHONPATH=./lethe_env
# pyspark itself is not packed: EMR provides it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/dist/lethe-pyspark.tar.gz}"
PLATFORM="${LETHE_EMR_PLATFORM:-aarch64-manylinux_2_34}"
PYVER="${LETHE_EMR_PYTHON:-3.11}"
UV="${UV:-uv}"
PYTHON="${PYTHON:-python3}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
site="$work/site"
mkdir -p "$site" "$(dirname "$OUT")"

# 1. The library's locked runtime dependencies only (no dev/spark/infra groups, not the project
#    itself, not the `lambda` extra: Powertools and pydantic-settings are for the functions).
"$UV" export --project "$ROOT" --frozen --no-default-groups --no-emit-project \
  --format requirements-txt --output-file "$work/requirements.txt" >/dev/null

# 2. Wheels built for EMR's OS, CPU and Python, exactly as locked (hashes checked). Copies,
#    not hardlinks into uv's cache: another uv linking the same file meanwhile changes its
#    ctime, and tar then fails with "file changed as we read it".
"$UV" pip install --quiet --target "$site" --no-deps --require-hashes --only-binary :all: \
  --link-mode copy --python-platform "$PLATFORM" --python-version "$PYVER" \
  -r "$work/requirements.txt"

# 3. The library and the job modules (importable as lethe and spark_jobs on every node):
#    layers/ships.py decides what of them ships, for the Lambda layer as for this archive.
"$PYTHON" "$ROOT/layers/ships.py" emr "$site"

# 4. Nothing a job never loads.
find "$site" -depth \( -name __pycache__ -o -name tests -o -name '*.pyc' \) -exec rm -rf {} +
rm -rf "$site/.lock" "$site/bin"

# 5. A reproducible tar.gz (sorted names, fixed owner and mtime).
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00Z' \
  -C "$site" -cf - . | gzip -n -9 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$OUT: $(du -h "$OUT" | cut -f1) ($PLATFORM, Python $PYVER)"
