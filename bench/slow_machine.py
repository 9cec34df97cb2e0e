"""Run the server as on a slower machine than this one: the emulated slow machine.

Users' machines often lack AVX-512 and have fewer cores to spare than the VMs the defaults
were tuned on (issue 23: a 2-core AVX2-only EPYC answered in 3.8 s). The emulation:
- llama.cpp built without AVX-512 (AVX2, FMA, F16C on), by `make slow-llama` into
  `.venv-avx2/site-packages`, put first on the server's `PYTHONPATH`;
- CTranslate2 (Whisper) told to use its AVX2 kernels (`CT2_FORCE_CPU_ISA=AVX2`);
- the server process held to `cores` of the CPU by a cgroup v1 quota
  (`/sys/fs/cgroup/cpu/<group>/cpu.cfs_quota_us`; root), which it joins before Python starts,
  so its calibration sees the quota too.
onnxruntime (piper, Smart Turn, silero, the face) picks its kernels itself: it keeps AVX-512.
The benchmark's own client runs outside the quota, as a user's browser would.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from rtc_server.machine import Machine

REPO = Path(__file__).resolve().parents[1]
AVX2_LLAMA = REPO / ".venv-avx2" / "site-packages"
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


def built_for_emulation() -> bool:
    """An AVX2-only llama.cpp was built for the emulation (`make slow-llama`); on a CPU
    without AVX-512 the venv's own build is one and none is needed."""
    return (AVX2_LLAMA / "llama_cpp").is_dir()


@dataclass(frozen=True)
class SlowMachine:
    cores: float = 1.0  # the CPU quota, in cores (1.0 of this 2-core machine = half)
    group: str = "rtc-avatar-slow"

    def label(self) -> str:
        return (f"emulated slow machine: llama.cpp without AVX-512 (AVX2/FMA), CTranslate2 "
                f"AVX2, the server held to {self.cores:g} of {os.cpu_count()} cores "
                "(cgroup v1 quota)")

    def prepare(self) -> None:
        """Check the AVX2 build and set up the cgroup (clear errors when either is missing)."""
        if not built_for_emulation() and "avx512f" in Machine.here().flags:
            raise SystemExit(f"no AVX2-only llama.cpp in {AVX2_LLAMA}: run `make slow-llama`")
        if not (CGROUP_V1 / "cpu.cfs_quota_us").is_file():
            raise SystemExit(f"{CGROUP_V1} is not a cgroup v1 cpu hierarchy: cannot hold the "
                             "server to a CPU quota here")
        group = CGROUP_V1 / self.group
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(int(self.cores * PERIOD_US)))

    def env(self) -> dict[str, str]:
        if not built_for_emulation():  # an AVX2-only CPU: the venv's build is that already
            return {**os.environ, "CT2_FORCE_CPU_ISA": "AVX2"}
        path = os.environ.get("PYTHONPATH", "")
        return {**os.environ, "PYTHONPATH": f"{AVX2_LLAMA}{os.pathsep}{path}" if path else
                str(AVX2_LLAMA), "CT2_FORCE_CPU_ISA": "AVX2"}

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cgroup (the shell joins it, then becomes the program)."""
        procs = CGROUP_V1 / self.group / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--profile`, `--modes` and `--slow-cores`, as every server benchmark takes them."""
    parser.add_argument("--profile", choices=("auto", "quality", "fast", "fixed"),
                        help="profile.mode (default: the server's, auto)")
    parser.add_argument("--modes", default="as-is",
                        help="as-is, slow (the emulated slow machine, bench/slow_machine.py) or "
                        "as-is,slow: each run in turn, reported side by side")
    parser.add_argument("--slow-cores", type=float, default=1.0,
                        help="slow mode: the server's CPU quota in cores (default 1 = half)")


def modes(parser: argparse.ArgumentParser, args: argparse.Namespace
          ) -> list[tuple[str, SlowMachine | None]]:
    """The runs `--modes` asks for: (name, the slow machine or None for this one)."""
    out: list[tuple[str, SlowMachine | None]] = []
    for mode in args.modes.split(","):
        if mode not in ("as-is", "slow"):
            parser.error(f"--modes: unknown mode {mode!r}")
        out.append((mode, SlowMachine(args.slow_cores) if mode == "slow" else None))
    return out
