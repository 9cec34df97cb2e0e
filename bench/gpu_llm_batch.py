"""The LLM's decode step on one GPU: one process batching every session's stream against
the cluster's per-worker processes (issue 26: "one GPU inference process that batches across
workers, or per-worker batches; measure which"), as stage times.

Each arm runs P processes at once, each with its own copy of the model and a decode step of
B streams captured as one CUDA graph (the graph decoder's step, engines/llm/cuda_graphs.py:
a static cache, a mask by position, greedy argmax fed back on the device), with B rows at
different positions sharing the cache's write slot (how a batched decoder would hold
streams that started at different times; the cost is the same as aligned rows). The
processes wait on one barrier, then replay their step `--steps` times, reading each step's
tokens back (a decoder hands every token to its session). Reported per arm: ms per step
(p50 / p95 over the processes' steps) and tokens per second over all rows of all processes.

    python3 bench/gpu_llm_batch.py --model random-1.5b \\
        [--arms 1x1,1x8,1x32,6x1,6x6] [--steps 300] [--bucket 1024] [--json FILE]

`PxB`: P processes of B streams each. 1x32 is one shared inference process for 32 sessions;
6x6 per-worker batches (6 workers, ~5-6 sessions each); 6x1 what the workers do now (one
stream at a time each, the others waiting for their slice). Without a GPU (`--device cpu`,
a smoke test) the step runs eagerly.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.llm_shapes import SHAPES  # noqa: E402
from bench.stats import pct  # noqa: E402

START_POSITION = 64  # the first row's position; row r starts ROW_STEP r later
ROW_STEP = 7
MAX_BATCH = 64  # streams per process (the positions check in main assumes at most this)


def parse_arm(text: str) -> tuple[int, int]:
    """"6x5" -> (6 processes, 5 streams each)."""
    processes, _, batch = text.partition("x")
    p, b = int(processes), int(batch)
    if p < 1 or not 1 <= b <= MAX_BATCH:
        raise argparse.ArgumentTypeError(f"bad arm {text!r}: PxB with P >= 1, "
                                         f"1 <= B <= {MAX_BATCH}")
    return p, b


class BatchedStep:
    """One model's decode step for `batch` streams on static tensors (captured on CUDA)."""

    def __init__(self, model: Any, batch: int, bucket: int) -> None:
        import inspect

        import torch
        from transformers.cache_utils import Cache, StaticLayer

        self.torch = torch
        self.model = model
        self.batch = batch
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        config = model.config.get_text_config(decoder=True)
        layers: list[Any] = [StaticLayer(max_cache_len=bucket)
                             for _ in range(config.num_hidden_layers)]
        self.cache = Cache(layers=layers)
        params = inspect.signature(type(model).forward).parameters
        self.kwarg = "cache" if "cache" in params else "past_key_values"
        dev = self.device
        self.counts = torch.zeros(len(layers), dtype=torch.long, device=dev)
        for i, layer in enumerate(layers):
            layer.cumulative_length = self.counts[i]
        self.token = torch.zeros((batch, 1), dtype=torch.long, device=dev)
        self.start = (START_POSITION + ROW_STEP * torch.arange(batch, device=dev)).view(batch, 1)
        self.pos = self.start.clone()
        self.arange = torch.arange(bucket, device=dev).view(1, bucket)
        self.neg = torch.finfo(self.dtype).min
        self.host = torch.zeros((batch, 1), dtype=torch.long,
                                pin_memory=self.device.type == "cuda")
        self.graph: Any = None

    def _step(self) -> None:
        torch = self.torch
        visible = self.arange <= self.pos
        mask = torch.where(visible, 0.0, self.neg).to(self.dtype).view(self.batch, 1, 1, -1)
        out = self.model(input_ids=self.token, position_ids=self.pos, attention_mask=mask,
                         use_cache=True, logits_to_keep=1, **{self.kwarg: self.cache})
        self.token.copy_(out.logits[:, -1, :].float().argmax(dim=-1).view(self.batch, 1))
        self.pos.add_(1)

    def reset(self) -> None:
        self.counts.fill_(int(START_POSITION))
        self.pos.copy_(self.start)

    def prepare(self) -> None:
        torch = self.torch
        with torch.inference_mode():
            self.reset()
            self._step()  # allocates the cache
            if self.device.type != "cuda":
                return
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self.reset()
                    self._step()
            torch.cuda.current_stream(self.device).wait_stream(stream)
            self.reset()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._step()

    def run(self, steps: int) -> list[float]:
        """`steps` steps, each read back; seconds per step."""
        torch = self.torch
        times = []
        with torch.inference_mode():
            self.reset()
            for _ in range(steps):
                start = time.perf_counter()
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self._step()
                self.host.copy_(self.token, non_blocking=self.graph is not None)
                if self.graph is not None:
                    torch.cuda.current_stream(self.device).synchronize()
                times.append(time.perf_counter() - start)
        return times


def load_model(spec: str, device: str) -> Any:
    """A model directory; "random-1.5b" (a Qwen2.5 shape of bench/gpu_llm.py with random
    weights, made on the device: nothing to stage); "tiny" (a small one, for smoke tests)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    if spec == "tiny" or spec.startswith("random-"):
        torch.manual_seed(0)
        shape = (dict(vocab_size=512, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
                 if spec == "tiny" else dict(vocab_size=151936, **SHAPES[spec[7:]]))
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(Qwen2Config(**shape), dtype=dtype)
        return model.eval()
    loaded: Any = AutoModelForCausalLM.from_pretrained(spec, dtype=dtype)
    return loaded.to(device).eval()


def _process(spec: str, device: str, batch: int, bucket: int, steps: int,
             barrier: Any, out: Any) -> None:
    try:
        step = BatchedStep(load_model(spec, device), batch, bucket)
        step.prepare()
        step.run(10)  # warm
    except BaseException as exc:
        barrier.abort()
        out.put({"error": repr(exc)})
        raise
    barrier.wait()
    start = time.perf_counter()
    times = step.run(steps)
    out.put({"times": times, "wall": time.perf_counter() - start})


def run_arm(spec: str, device: str, processes: int, batch: int, bucket: int,
            steps: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    out = ctx.Queue()
    procs = [ctx.Process(target=_process, args=(spec, device, batch, bucket, steps, barrier, out))
             for _ in range(processes)]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise SystemExit(f"arm {processes}x{batch} failed: {errors[0]}")
    times = [t * 1000 for r in results for t in r["times"]]
    tokens = sum(batch * steps / r["wall"] for r in results)
    return {"arm": f"{processes}x{batch}", "processes": processes, "batch": batch,
            "streams": processes * batch, "step_ms_p50": pct(times, 0.5),
            "step_ms_p95": pct(times, 0.95), "step_ms_mean": statistics.fmean(times),
            "tokens_per_s": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True,
                        help="a model directory, random-0.5b|1.5b|3b or tiny")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--arms", default="1x1,1x8,1x32,6x1,6x6",
                        type=lambda s: [parse_arm(a) for a in s.split(",")])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--bucket", type=int, default=1024, help="cache positions attended")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    if START_POSITION + ROW_STEP * MAX_BATCH + args.steps + 16 > args.bucket:
        raise SystemExit("--steps too many for --bucket (positions would run past the cache)")
    rows = []
    print("| arm (processes x streams) | streams | ms per step p50 / p95 | tokens/s, all |")
    print("|---|---|---|---|")
    for processes, batch in args.arms:
        print(f"arm {processes}x{batch}: loading {processes} model(s)...", file=sys.stderr,
              flush=True)
        row = run_arm(args.model, args.device, processes, batch, args.bucket, args.steps)
        rows.append(row)
        print(f"| {row['arm']} | {row['streams']} | {row['step_ms_p50']:.2f} / "
              f"{row['step_ms_p95']:.2f} | {row['tokens_per_s']:.0f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
