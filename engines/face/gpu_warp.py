"""The portrait's warp in torch, for a GPU: the backward map and the remap of one frame as one
CUDA graph replay, so a worker's CPU no longer draws its sessions' faces (the renderer,
`media.avatar.AvatarRenderer`, takes it as its `Warp`: `use_warp`).

On the H200 box rendering was the largest CPU item of a worker (py-spy, 32 sessions: ~0.29 of
a core of ~1.35 for 5-6 sessions, bench/RESULTS.md section gpu) while the GPU idled. The
arithmetic is the mesh's (`WarpMesh.source_map`, then the renderer's remap), the OpenCV calls
replaced by torch ones with the same pixel conventions:
- the forward field on the grid: W @ dV, W dense on the device (grid points x vertices, a few
  MB per portrait);
- the mesh's `fixed_point_steps` fixed-point steps s = p - D(s): `grid_sample` (bilinear,
  zeros outside, `align_corners=True` so that -1 and 1 are the first and last grid points'
  centres) for cv2.remap with BORDER_CONSTANT 0;
- the grid's displacement scaled up to every pixel: `interpolate` (bilinear,
  `align_corners=False`, edges held) for cv2.resize INTER_LINEAR;
- the portrait sampled at the map: `grid_sample` with `padding_mode="border"` for cv2.remap
  with BORDER_REPLICATE, rounded to uint8.
OpenCV interpolates in 1/32-pixel steps and torch does not, so frames differ by a level or two
here and there (tests/engines/test_gpu_warp.py bounds it).

`TorchWarp.warp(displacement)` returns the ROI's pixels; the renderer pastes them and draws the
inner mouth on the CPU as before. Thread-safe: the static buffers are used under a lock, on
the warp's own CUDA stream (not behind an LLM's queued decode steps on the default one), and
the wait for the result sleeps (`engines/device_wait.py`), as does the rest of a worker's GPU
work. The mesh is taken as it is (`media.avatar.mesh.WarpMesh`'s arrays), not imported: the
media package stays free of torch.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from engines.device_wait import wait_for_device
from engines.face.errors import InvalidInputError, RuntimeUnavailableError


class TorchWarp:
    """One portrait's warp on `device` ("cuda", "cuda:N", or "cpu" for tests)."""

    def __init__(self, mesh: Any, image: np.ndarray, device: str = "cuda",
                 graphs: bool = True) -> None:
        try:
            import torch
        except ImportError as exc:
            raise RuntimeUnavailableError(f"rendering on {device!r} needs torch: {exc}") from exc
        self._torch = torch
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeUnavailableError(f"rendering on {device!r}: torch sees no CUDA GPU")
        self.mesh = mesh
        x0, y0, x1, y1 = mesh.roi
        self._rw, self._rh = x1 - x0, y1 - y0
        gw, gh = mesh.grid_size
        dev, f32 = self.device, torch.float32
        height, width = image.shape[:2]
        self._weights = torch.tensor(mesh.weights.toarray(), dtype=f32, device=dev)  # [P, V]
        self._grid = torch.tensor(mesh.grid, dtype=f32, device=dev)  # [gh, gw, 2]
        self._pixels = torch.tensor(mesh.pixels, dtype=f32, device=dev)  # [rh, rw, 2]
        self._image = torch.tensor(image, dtype=f32, device=dev).permute(2, 0, 1)[None]
        half = (mesh.step - 1) / 2.0
        # Frame pixels -> the grid's normalized coordinates, and -> the image's.
        self._grid_origin = torch.tensor([x0 + half, y0 + half], dtype=f32, device=dev)
        self._grid_scale = torch.tensor(
            [2.0 / (mesh.step * max(gw - 1, 1)), 2.0 / (mesh.step * max(gh - 1, 1))],
            dtype=f32, device=dev)
        self._image_scale = torch.tensor(
            [2.0 / max(width - 1, 1), 2.0 / max(height - 1, 1)], dtype=f32, device=dev)
        self._dv = torch.zeros((len(mesh.vertices), 2), dtype=f32, device=dev)  # the input
        self._out = torch.zeros((self._rh, self._rw, 3), dtype=torch.uint8, device=dev)
        self._lock = threading.Lock()
        self._graph: Any = None
        self._stream: Any = None
        if self.device.type == "cuda":
            self._stream = torch.cuda.Stream(dev)
            self._host_in = torch.zeros((mesh.n_moving, 2), dtype=f32).pin_memory()
            self._host_out = torch.zeros((self._rh, self._rw, 3), dtype=torch.uint8).pin_memory()
            if graphs:
                self._graph = self._capture()

    def warp(self, displacement: np.ndarray) -> np.ndarray:
        """The ROI [rh, rw, 3] uint8 for the moving vertices' displacement [n_moving, 2]."""
        torch = self._torch
        moving = np.asarray(displacement, dtype=np.float32)
        if moving.shape != (self.mesh.n_moving, 2):
            raise InvalidInputError(
                f"displacement must be [{self.mesh.n_moving}, 2], got {moving.shape}")
        with self._lock, torch.inference_mode():
            if self._stream is None:  # the CPU (tests): eager, no copies to stage
                self._dv[: self.mesh.n_moving] = torch.from_numpy(moving)
                self._compute()
                return self._out.numpy().copy()
            with torch.cuda.stream(self._stream):
                self._host_in.numpy()[:] = moving
                self._dv[: self.mesh.n_moving].copy_(self._host_in, non_blocking=True)
                if self._graph is not None:
                    self._graph.replay()
                else:
                    self._compute()
                self._host_out.copy_(self._out, non_blocking=True)
                wait_for_device(torch, self.device)  # asleep until the frame is back
            return self._host_out.numpy().copy()

    def _compute(self) -> None:
        """`self._dv` -> `self._out`, on static buffers (the body of the captured graph)."""
        torch = self._torch
        functional = torch.nn.functional
        gw, gh = self.mesh.grid_size
        step = self.mesh.step
        field = (self._weights @ self._dv).reshape(gh, gw, 2)
        field_image = field.permute(2, 0, 1)[None]  # [1, 2, gh, gw]
        src = self._grid - field
        for _ in range(self.mesh.fixed_point_steps):
            at = (src - self._grid_origin) * self._grid_scale - 1.0
            sampled = functional.grid_sample(field_image, at[None], mode="bilinear",
                                             padding_mode="zeros", align_corners=True)
            src = self._grid - sampled[0].permute(1, 2, 0)
        moved = (self._grid - src).permute(2, 0, 1)[None]
        if step > 1:
            moved = functional.interpolate(moved, size=(gh * step, gw * step), mode="bilinear",
                                           align_corners=False)
        source = self._pixels - moved[0, :, : self._rh, : self._rw].permute(1, 2, 0)
        at = source * self._image_scale - 1.0
        pixels = functional.grid_sample(self._image, at[None], mode="bilinear",
                                        padding_mode="border", align_corners=True)
        self._out.copy_(pixels[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8))

    def _capture(self) -> Any:
        torch = self._torch
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(2):  # warm-up off the default stream, as capture asks
                self._compute()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # "thread_local": a portrait uploaded mid-service is captured while the LLM's, the
        # face model's and the other portraits' threads keep launching their work; the
        # default ("global") would fail their calls for as long as this capture lasts.
        with torch.inference_mode(), torch.cuda.graph(graph, stream=stream,
                                                      capture_error_mode="thread_local"):
            self._compute()
        return graph
