"""Smart Turn's cost per call by runtime: onnxruntime on the CPU against the file's graph in
torch (`[turn] runtime = "torch"`) on the CPU, on CUDA eagerly and on CUDA as a captured
graph, one caller and several at once (the sessions of a worker asking together).

    python bench/gpu_turn.py [--arms onnxruntime,torch-cpu,torch-cuda,torch-cuda-eager]
                             [--calls 60] [--threads 6] [--json out.json]

Windows are 8 s of random speech-level noise (the model's input shape is fixed: the time per
call does not depend on what is said); the table adds each arm's largest difference from the
first arm on those windows. Features (pipecat's NumPy function, ~3 ms) are included, as the
server pays them per call.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.stats import pct  # noqa: E402
from bench.together import at_once  # noqa: E402
from engines.turn.smart_turn import bundled_model_path, load_smart_turn  # noqa: E402
from engines.turn.smart_turn_torch import TorchSmartTurn  # noqa: E402

ARMS = ("onnxruntime", "torch-cpu", "torch-cuda", "torch-cuda-eager")


def load(arm: str) -> Any:
    if arm == "onnxruntime":
        return load_smart_turn()
    if arm == "torch-cpu":
        return TorchSmartTurn(bundled_model_path(), "cpu")
    return TorchSmartTurn(bundled_model_path(), "cuda", cuda_graph=arm == "torch-cuda")


def timed(model: Any, windows: list[np.ndarray]) -> tuple[list[float], list[float]]:
    ms, out = [], []
    for w in windows:
        start = time.perf_counter()
        out.append(model.complete_probability(w))
        ms.append((time.perf_counter() - start) * 1000)
    return ms, out


def together(model: Any, windows: list[np.ndarray], threads: int) -> list[float]:
    return at_once(threads, lambda i: timed(model, windows[i::threads])[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="onnxruntime,torch-cpu")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; one of {ARMS}")
    rng = np.random.default_rng(0)
    windows = [np.clip(rng.normal(0, 3000, 8 * 16000), -32768, 32767).astype(np.int16)
               for _ in range(args.calls)]
    print("| arm | one caller: ms per call p50 / p95 | "
          f"{args.threads} at once: p50 / p95 | largest difference from {arms[0]} | load s |")
    print("|---|---|---|---|---|")
    results: dict[str, Any] = {}
    reference: list[float] | None = None
    for arm in arms:
        start = time.perf_counter()
        model = load(arm)
        load_s = time.perf_counter() - start
        timed(model, windows[:3])  # first calls: allocations, kernels' set-up
        alone, out = timed(model, windows)
        crowd = together(model, windows, args.threads)
        reference = reference or out
        gap = max(abs(a - b) for a, b in zip(out, reference, strict=True))
        results[arm] = {"alone": alone, "together": crowd, "gap": gap, "load_s": load_s}
        print(f"| {arm} | {pct(alone, 0.5):.1f} / {pct(alone, 0.95):.1f} | "
              f"{pct(crowd, 0.5):.1f} / {pct(crowd, 0.95):.1f} | {gap:.3f} | {load_s:.1f} |",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
