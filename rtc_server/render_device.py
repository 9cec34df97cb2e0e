"""Where a portrait's warp runs: the renderer's own OpenCV path, or torch on a GPU.

On a GPU box the workers' CPU is what bounds the sessions (bench/RESULTS.md, section gpu), and
the warp was its largest item; `[media] render_device = "cuda"` hands it to
`engines.face.gpu_warp.TorchWarp` (one CUDA graph per portrait), for the configured portrait,
the uploaded ones and the calibration's measure alike.
"""

from __future__ import annotations

from typing import Any


def place_warp(renderer: Any, device: str) -> Any:
    """`renderer` (a `media.avatar.AvatarRenderer`) with its warp on `device`; returned."""
    if device == "cpu":
        return renderer
    from engines.face.gpu_warp import TorchWarp

    renderer.use_warp(TorchWarp(renderer.mesh, renderer.image, device=device))
    return renderer
