"""Lambda layer build (see layers/build.py)."""
