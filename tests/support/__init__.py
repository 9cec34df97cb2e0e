"""Test-only helpers: the server app in the test's event loop, a local cluster, fakes.

What tests share with the benchmarks (the client peer, generated speech) is in `testkit/`.
"""
