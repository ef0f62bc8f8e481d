"""Benchmarks (scripts/bench and python -m bench.<name>); results in docs/PERFORMANCE.md."""
