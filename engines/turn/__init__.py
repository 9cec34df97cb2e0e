"""Semantic end of turn: is the user done speaking, or only pausing mid-sentence?

`load_turn_model(config)` gives the process-wide `TurnModel` (Smart Turn v3.2 by default;
None when `config.model == "none"`), loaded once and shared read-only by every session. The
endpointer (`engines.vad`) asks for a verdict at each pause; see `engines/vad/endpointer.py`
for how the verdict is fed back.
"""

from __future__ import annotations

from engines.turn.base import WINDOW_S, TurnModel
from engines.turn.config import TurnConfig


def load_turn_model(config: TurnConfig | None = None) -> TurnModel | None:
    """Load (once per process) the configured model; blocking, call at start-up."""
    config = config or TurnConfig()
    if not config.enabled:
        return None
    if config.runtime == "torch":
        from engines.graph_torch import resolve_device
        from engines.turn.smart_turn import model_file
        from engines.turn.smart_turn_torch import load_torch_smart_turn

        return load_torch_smart_turn(model_file(config.model_path),
                                     resolve_device(config.device, "[turn]"))
    from engines.turn.smart_turn import load_smart_turn

    return load_smart_turn(config.model_path, config.threads)


__all__ = ["WINDOW_S", "TurnConfig", "TurnModel", "load_turn_model"]
