"""Qwen2.5 model shapes (the published configs), for the GPU benchmarks' random-weight
models: imports nothing, so a script can build one where nothing else is staged."""

from __future__ import annotations

from typing import Any

SHAPES: dict[str, dict[str, Any]] = {  # Qwen2.5 shapes (the published configs)
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "tie_word_embeddings": True},
    "1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2, "tie_word_embeddings": True},
    "3b": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
           "num_attention_heads": 16, "num_key_value_heads": 2, "tie_word_embeddings": True},
}
