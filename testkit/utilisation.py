"""What the machine was busy with while a benchmark ran: CPU of all cores, CPU per process and
the GPUs, sampled once a second (bench/cluster.py's conversation).

- CPU: deltas of the `cpu` line of /proc/stat (busy = all but idle and iowait), as % of all
  cores and as cores busy.
- Per process (the cluster's workers, the client processes): utime + stime of
  /proc/<pid>/stat, all its threads, per second of wall time: cores.
- GPU: `nvidia-smi --query-gpu=index,utilization.gpu,memory.used -l 1` as a child process, its
  lines parsed as they come (SM utilisation %, memory MiB per GPU); none without nvidia-smi.

`Sampler` is an async context manager: samples are taken between enter and exit; `summary()`
gives p50/max per series and `summary_rows` the table's rows. The parsers are pure functions
(tests/test_bench_cluster.py).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROC_STAT = Path("/proc/stat")
NVIDIA_SMI_ARGV = ("--query-gpu=index,utilization.gpu,memory.used",
                   "--format=csv,noheader,nounits", "-l", "1")


@dataclass(frozen=True)
class CpuTimes:
    busy: int  # jiffies, all cores, not idle or iowait
    total: int  # jiffies, all cores
    cores: int


def parse_proc_stat(text: str) -> CpuTimes:
    """The all-cores `cpu` line of /proc/stat (the `cpuN` lines count the cores)."""
    total = busy = cores = 0
    for line in text.splitlines():
        name, *fields = line.split()
        if name == "cpu":
            # user nice system idle iowait irq softirq steal (guest is inside user already)
            values = [int(v) for v in fields[:8]]
            total = sum(values)
            busy = total - values[3] - values[4]
        elif name.startswith("cpu"):
            cores += 1
    return CpuTimes(busy, total, cores)


def cpu_share(before: CpuTimes, after: CpuTimes) -> float:
    """% of all cores busy between two readings (NaN when no time passed)."""
    total = after.total - before.total
    return 100.0 * (after.busy - before.busy) / total if total > 0 else float("nan")


def cpu_times() -> CpuTimes:
    """The machine's CPU times now (/proc/stat: a kernel file, read at once)."""
    return parse_proc_stat(PROC_STAT.read_text())


def parse_process_stat(text: str) -> float:
    """CPU seconds (utime + stime, every thread) from a /proc/<pid>/stat line."""
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of the line


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of `pid` so far (None once it has gone)."""
    try:
        return parse_process_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError):
        return None


def parse_gpu_line(line: str) -> tuple[int, float, float] | None:
    """`index, utilization %, memory MiB` (nvidia-smi's csv, noheader, nounits); None for
    anything else ("[N/A]", a warning)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        return None
    try:
        return int(parts[0]), float(parts[1]), float(parts[2])
    except ValueError:
        return None


def p50_max(values: list[float]) -> dict[str, float]:
    finite = [v for v in values if math.isfinite(v)]
    return {"p50": statistics.median(finite) if finite else float("nan"),
            "max": max(finite, default=float("nan")), "n": len(finite)}


@dataclass
class Sampler:
    """CPU (all cores and per named process) and GPU samples, once a second, while open."""

    processes: Mapping[str, int] = field(default_factory=dict)  # name -> pid
    period_s: float = 1.0
    cpu_pct: list[float] = field(default_factory=list)
    process_cores: dict[str, list[float]] = field(default_factory=dict)
    gpu_util: dict[int, list[float]] = field(default_factory=dict)
    gpu_mem_mib: dict[int, list[float]] = field(default_factory=dict)
    cores: int = 0
    wall_s: float = 0.0
    _process_total: dict[str, float] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _smi: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Sampler:
        loop = asyncio.get_running_loop()
        smi = shutil.which("nvidia-smi")
        if smi is not None:
            self._smi = await asyncio.create_subprocess_exec(
                smi, *NVIDIA_SMI_ARGV, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, stdin=asyncio.subprocess.DEVNULL)
            self._tasks.append(loop.create_task(self._read_gpu(), name="sampler:gpu"))
        self._tasks.append(loop.create_task(self._sample_cpu(), name="sampler:cpu"))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._smi is not None and self._smi.returncode is None:
            self._smi.terminate()
            await self._smi.wait()

    async def _sample_cpu(self) -> None:
        last = cpu_times()
        self.cores = last.cores
        start = time.monotonic()
        first = {name: process_cpu_s(pid) for name, pid in self.processes.items()}
        seen = {name: (cpu, start) for name, cpu in first.items() if cpu is not None}
        try:
            while True:
                await asyncio.sleep(self.period_s)  # a sampling period, not a wait for a state
                now, t = cpu_times(), time.monotonic()
                self.cpu_pct.append(cpu_share(last, now))
                last = now
                for name, pid in self.processes.items():
                    cpu = process_cpu_s(pid)
                    if cpu is None or name not in seen:  # gone (a client that has finished)
                        continue
                    before, before_t = seen[name]
                    self.process_cores.setdefault(name, []).append((cpu - before) / (t - before_t))
                    seen[name] = (cpu, t)
        finally:
            self.wall_s = time.monotonic() - start
            for name, pid in self.processes.items():  # the mean up to its last reading
                cpu, begin = process_cpu_s(pid), first.get(name)
                t = time.monotonic()
                if cpu is None and name in seen:
                    cpu, t = seen[name]
                if cpu is not None and begin is not None and t > start:
                    self._process_total[name] = (cpu - begin) / (t - start)

    async def _read_gpu(self) -> None:
        assert self._smi is not None and self._smi.stdout is not None
        while line := await self._smi.stdout.readline():
            sample = parse_gpu_line(line.decode(errors="replace"))
            if sample is not None:
                index, util, mem = sample
                self.gpu_util.setdefault(index, []).append(util)
                self.gpu_mem_mib.setdefault(index, []).append(mem)

    def summary(self) -> dict[str, Any]:
        """p50/max of each series; per process also its mean cores over the whole window."""
        return {
            "cores": self.cores, "wall_s": self.wall_s, "cpu_pct": p50_max(self.cpu_pct),
            "processes": {name: {**p50_max(values), "mean": self._process_total.get(
                name, float("nan"))} for name, values in self.process_cores.items()},
            "gpu": None if self._smi is None else {
                str(i): {"util_pct": p50_max(self.gpu_util[i]),
                         "mem_mib": p50_max(self.gpu_mem_mib.get(i, []))}
                for i in sorted(self.gpu_util)},
        }


def summary_rows(u: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A `summary()`'s table rows (metric, p50, max): CPU of all cores, each sampled
    process's cores, each GPU (or "no GPU")."""
    cpu, cores = u["cpu_pct"], u["cores"]
    rows: list[tuple[str, str, str]] = [(f"CPU, % of all {cores} cores (cores busy)",
                        f"{cpu['p50']:.0f} ({cpu['p50'] * cores / 100:.1f})",
                        f"{cpu['max']:.0f} ({cpu['max'] * cores / 100:.1f})")]
    for name, p in u["processes"].items():
        rows.append((f"{name}, cores (mean {p['mean']:.2f})", f"{p['p50']:.2f}",
                     f"{p['max']:.2f}"))
    if u["gpu"] is None:
        rows.append(("GPU", "no GPU (no nvidia-smi)", ""))
    for index, g in (u["gpu"] or {}).items():
        rows.append((f"GPU {index} SM utilisation, %", f"{g['util_pct']['p50']:.0f}",
                     f"{g['util_pct']['max']:.0f}"))
        rows.append((f"GPU {index} memory used, MiB", f"{g['mem_mib']['p50']:.0f}",
                     f"{g['mem_mib']['max']:.0f}"))
    return rows
