"""Benchmarks and the pinned corpus they run on (see README.md)."""
