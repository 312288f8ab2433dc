"""Benchmarks (``make bench``): they print numbers; nothing here asserts on time."""
