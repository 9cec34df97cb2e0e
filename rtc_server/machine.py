"""What machine this is, as far as speed goes: the CPU, its vector extensions, and how much
of it this process may use.

`Machine.here()` reads `/proc/cpuinfo` (model name, the flags that change llama.cpp's,
CTranslate2's and onnxruntime's kernels) and the cores the process may run on: its CPU
affinity, capped by a cgroup CPU quota (v1 `cpu.cfs_quota_us`, v2 `cpu.max`), as a container
or a `docker --cpus` limit sets it. A calibration is valid for one `Machine` only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Flags that pick different compute kernels in the engines' libraries.
SPEED_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
)
_CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Machine:
    cpu: str  # model name
    flags: tuple[str, ...]  # the SPEED_FLAGS it has
    cores: float  # CPUs this process may use (affinity, capped by a cgroup quota)

    @classmethod
    def here(cls) -> Machine:
        cpu, flags = _cpuinfo()
        return cls(cpu, flags, usable_cores())

    def describe(self) -> str:
        vector = "avx512" if "avx512f" in self.flags else "avx2" if "avx2" in self.flags else (
            "no avx2")
        return f"{self.cpu} ({vector}), {self.cores:g} cores"


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    model, flags = "unknown CPU", set[str]()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, ()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, tuple(f for f in SPEED_FLAGS if f in flags)


def usable_cores() -> float:
    """CPUs this process may use: its affinity, capped by the tightest cgroup CPU quota."""
    cores = float(len(os.sched_getaffinity(0)))
    quota = cgroup_quota()
    return min(cores, quota) if quota is not None else cores


def cgroup_quota() -> float | None:
    """The CPU quota of this process's cgroup and its parents, in cores (None: no quota)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    quotas: list[float] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: cpu.max holds "quota period" or "max period"
            quotas += _walk(_CGROUP, path, "cpu.max", _v2)
        elif "cpu" in controllers.split(","):
            root = _CGROUP / controllers if (_CGROUP / controllers).is_dir() else _CGROUP / "cpu"
            quotas += _walk(root, path, "cpu.cfs_quota_us", _v1)
    return min(quotas) if quotas else None


def _walk(
    root: Path, path: str, name: str, parse: Callable[[Path], float | None]
) -> list[float]:
    found = []
    folder = root / path.lstrip("/")
    while True:
        try:
            value = parse(folder / name)
        except (OSError, ValueError):
            value = None
        if value is not None:
            found.append(value)
        if folder == root or root not in folder.parents:
            return found
        folder = folder.parent


def _v1(quota_file: Path) -> float | None:
    quota = int(quota_file.read_text())
    if quota <= 0:
        return None
    period = int((quota_file.parent / "cpu.cfs_period_us").read_text())
    return quota / period


def _v2(max_file: Path) -> float | None:
    quota, period = max_file.read_text().split()
    return None if quota == "max" else int(quota) / int(period)
