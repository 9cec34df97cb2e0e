"""Read the examples with the chat model and fit the probe (engines/turn/text_end.py).

The features are what the server computes at a pause: the model's last hidden state (after
the final norm) at the last token of `HEAD + text`, one text at a time there, right-padded
batches here (causal attention: the pads never reach a real token), in bf16 as the GPU
profile runs the model (`config/gpu.toml`). The fit: a standardized
logistic regression with an L2 penalty chosen on held-out utterances (an utterance and its
cuts stay on one side of the split), then refitted on all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from engines.turn.text_end import HEAD, TextEndProbe, fingerprint

logger = logging.getLogger(__name__)

PENALTIES = (0.01, 0.1, 1.0, 10.0, 100.0)  # L2 weights tried (on the mean loss's scale x n)
CUT_RATE = 0.02  # the threshold suggested: held-out cuts read whole at most this often


def load_model(model: str | None, device: str = "cpu") -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engines.llm.model_files import resolve_hf_dir

    directory = resolve_hf_dir(model)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    net: Any = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16)
    net.eval()
    return net.to(device), tokenizer


def hidden_states(net: Any, tokenizer: Any, texts: Sequence[str], batch: int = 16) -> np.ndarray:
    import torch

    rows: list[np.ndarray] = []
    for start in range(0, len(texts), batch):
        ids = [tokenizer.encode(HEAD + t, add_special_tokens=False)
               for t in texts[start:start + batch]]
        width = max(len(i) for i in ids)
        pad = tokenizer.pad_token_id or 0
        tokens = torch.tensor([i + [pad] * (width - len(i)) for i in ids], device=net.device)
        mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids],
                            device=net.device)
        with torch.inference_mode():
            out = net.model(input_ids=tokens, attention_mask=mask, use_cache=False)
        last = torch.tensor([len(i) - 1 for i in ids], device=net.device)
        picked = out.last_hidden_state[torch.arange(len(ids), device=net.device), last]
        rows.append(picked.float().cpu().numpy())
        logger.info("features: %d/%d texts", min(start + batch, len(texts)), len(texts))
    return np.concatenate(rows)


def fit_logistic(x: np.ndarray, y: np.ndarray, penalty: float) -> tuple[np.ndarray, float]:
    """Weights and bias minimizing the summed log loss + penalty/2 * |w|^2 (L-BFGS)."""
    import torch

    xt = torch.tensor(x, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

    def loss() -> Any:
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(
            xt @ w + b, yt, reduction="sum") + 0.5 * penalty * (w * w).sum()
        value.backward()
        return value

    opt.step(loss)
    return w.detach().numpy(), float(b.detach())


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def train(features: np.ndarray, labels: np.ndarray, groups: np.ndarray, embedding: Any,
          seed: int = 0) -> tuple[TextEndProbe, dict[str, float]]:
    """The probe, and on held-out utterances at the chosen penalty: its log loss, accuracy,
    and the threshold at which `CUT_RATE` of their cuts read whole (with the share of whole
    ones at or above it)."""
    mean = features.mean(axis=0)
    scale = features.std(axis=0) + 1e-6
    x = (features - mean) / scale
    y = labels.astype(np.float64)
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    held = set(rng.choice(unique, size=len(unique) // 5, replace=False).tolist())
    test = np.array([g in held for g in groups])
    scores: dict[float, float] = {}
    for penalty in PENALTIES:
        w, b = fit_logistic(x[~test], y[~test], penalty)
        p = 1 / (1 + np.exp(-(x[test] @ w + b)))
        scores[penalty] = log_loss(p, y[test])
        logger.info("penalty %g: held-out log loss %.4f, accuracy %.3f", penalty,
                    scores[penalty], float(np.mean((p > 0.5) == (y[test] > 0.5))))
    best = min(scores, key=lambda k: scores[k])
    w, b = fit_logistic(x[~test], y[~test], best)
    p = 1 / (1 + np.exp(-(x[test] @ w + b)))
    cuts, wholes = p[y[test] < 0.5], p[y[test] > 0.5]
    threshold = float(np.quantile(cuts, 1 - CUT_RATE))
    report = {"penalty": best, "held_out_log_loss": scores[best],
              "held_out_accuracy": float(np.mean((p > 0.5) == (y[test] > 0.5))),
              "held_out_n": float(test.sum()), "threshold": threshold,
              "wholes_at_threshold": float(np.mean(wholes >= threshold)),
              "wholes_at_0.9": float(np.mean(wholes >= 0.9)),
              "cuts_at_0.9": float(np.mean(cuts >= 0.9))}
    w, b = fit_logistic(x, y, best)
    probe = TextEndProbe(w, b, mean.astype(np.float64), scale.astype(np.float64),
                         fingerprint(embedding))
    return probe, report
