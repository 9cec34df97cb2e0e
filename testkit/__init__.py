"""What the tests and the benchmarks share: the harness of a real conversation, not a product.

- `peer`: an aiortc client peer in the test's process (`LoopbackPeer`, `PcmMicrophone`, what
  it received);
- `speech`: generated speech from the project's own TTS engines, cached on disk, and noises;
- `pauses`: spoken questions with a pause in mid-sentence;
- `agent`: the agent's test configuration and the measurements of what a peer received (mouth
  opening, audio and video timelines, their best lag).

Layering: `testkit` may import every product package; only `tests/` and `bench/` import it.
Test-only helpers (fakes, the in-loop server, the local cluster) stay in `tests/support/`.
"""
