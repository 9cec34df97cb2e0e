"""Benchmarks: each prints p50/p95 tables; latest results in bench/RESULTS.md."""
