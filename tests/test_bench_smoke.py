"""Every benchmark in bench/ still starts: each script shows its options (its imports load) and
names its command in its docstring, each helper module imports, the shell scripts parse, and
the benchmarks that need neither a GPU nor a server run their cheapest case (one sentence, one
question, one repeat) on the bundled models. No timing is asserted: speed targets are bench/'s
(bench/RESULTS.md), never the tests'."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text())
HELPERS = sorted(p.stem for p in BENCH.glob("*.py")
                 if p.name not in SCRIPTS and p.name != "__init__.py")


def bench(*args: str, timeout: float = 300) -> str:
    """`python bench/...` from the repository's root; its stdout, once it exited 0."""
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_benchmarks_are_found() -> None:
    assert {"asr.py", "face.py", "tts.py", "gpu_llm.py", "cluster.py"} <= set(SCRIPTS)
    assert {"stats", "server_process"} <= set(HELPERS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_names_its_command_and_shows_its_options(script: str) -> None:
    doc = ast.get_docstring(ast.parse((BENCH / script).read_text()))
    assert doc is not None and f"bench/{script}" in doc
    assert "usage:" in bench(f"bench/{script}", "--help")


@pytest.mark.parametrize("module", HELPERS)
def test_a_bench_helper_module_imports(module: str) -> None:
    assert importlib.import_module(f"bench.{module}").__doc__


@pytest.mark.parametrize("script", ["gpu_device.sh", "gpu_workers.sh"])
def test_a_gpu_shell_script_parses_and_names_its_command(script: str) -> None:
    assert subprocess.run(["sh", "-n", str(BENCH / script)], check=False).returncode == 0
    assert f"sh bench/{script}" in (BENCH / script).read_text()


@pytest.mark.slow
def test_asr_one_sentence_per_voice_and_noise() -> None:
    out = bench("bench/asr.py", "--sections", "wer", "--limit", "1")
    for row in ("| piper | clean |", "| piper | 15 dB |", "| espeak | clean |", "| all | 15 dB |"):
        assert row in out


@pytest.mark.slow
def test_turn_silence_one_question() -> None:
    out = bench("bench/turn_silence.py", "--questions", "What time is it?", "--silences", "200")
    assert "| What time is it? |" in out


@pytest.mark.slow
def test_tts_one_sentence_of_piper() -> None:
    out = bench("bench/tts.py", "--voices", "piper", "--sentences", "1", "--no-asr")
    assert "| piper | en |" in out


@pytest.mark.slow
def test_face_one_repeat_of_every_cpu_row() -> None:
    out = bench("bench/face.py", "--repeats", "1", "--sessions", "2", "--seconds", "1")
    for row in ("| features (log-mel) |", "| model onnxruntime cpu | 2 |",
                "| render 512x512 (per frame) |", "| VP8 encode, 500 kbit/s (per frame) |",
                "| pipeline: features+model+smooth+render |"):
        assert row in out


@pytest.mark.slow
def test_gpu_llm_one_burst_on_the_cpu() -> None:
    """The LLM stage's GPU tool on the bundled 0.5B on the CPU: one burst of one written answer
    on a one-row batched decode."""
    out = bench("bench/gpu_llm.py", "--model", "qwen2.5-coder-0.5b", "--device", "cpu",
                "--arms", "1", "--streams", "1", "--rounds", "1", "--max-new-tokens", "2",
                "--forced-answers", "bench/gpu_answers.json")
    assert "| 1 |" in out


@pytest.mark.slow
def test_tools_one_request_of_each_kind_written() -> None:
    """The tool-call benchmark on the written requests (no TTS, no ASR) and the 0.5B."""
    out = bench("bench/tools.py", "--text", "--limit", "1", "--model", "qwen2.5-coder-0.5b")
    assert "| text | **" in out and "Wrong outcomes" in out


def test_spy_threads_reads_a_raw_profile(tmp_path: Path) -> None:
    profile = tmp_path / "spy.txt"
    profile.write_text("thread (0x1): MainThread;main (a.py:1);encode (b.py:2) 40\n"
                       "thread (0x2): render_0;frame (c.py:3) 10\n")
    out = bench("bench/spy_threads.py", str(profile), "--rate", "50", "--seconds", "1")
    assert "| MainThread | 0.80 |" in out
    assert "| render | 0.20 |" in out
    assert "| encode | 0.80 |" in out
